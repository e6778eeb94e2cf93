"""Which models are served where: the fleet file (JSON) and the default fleet of ``switchyard up``.

A fleet file is ``{"deployments": [{...}, ...]}``; each deployment has a served ``name`` (the model id clients
send), a ``backend`` (``trainium-sim`` or ``openai-compatible``) and that backend's fields below. Its ``task`` says
which calls it serves: ``chat`` (chat completions, agent runs) or ``embeddings``.

A deployment also answers to aliases without ``/`` (clients such as openai-agents read a ``/`` as a provider
prefix): the listed ``aliases``, and the name's last segment lower-cased (``meta-llama/Llama-3.1-8B-Instruct`` →
``llama-3.1-8b-instruct``) unless another deployment's name or alias would be the same. :func:`model_aliases`
resolves them and refuses a listed alias that names two models.

A ``trainium-sim`` chat deployment may serve its model with speculative decoding, as vLLM's ``speculative_config``
and ``switchyard simulate``'s options state it: ``draft_model`` (a catalog id or alias), ``num_speculative_tokens``
(tokens the draft proposes a step) and ``acceptance_rate`` (the chance the target accepts each drafted token). A
catalog target + draft pair has its own draft and tokens, which these replace. They are checked when the file is
loaded, with make_deployment's refusals, and :func:`simulated_deployment` builds the deployment they describe.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from switchyard.accelerator.errors import ConfigurationError, SimulatorError
from switchyard.accelerator.pool.embeddings import EMBEDDING_SHAPES
from switchyard.accelerator.sim.deployment import Deployment, make_deployment

__all__ = ["DEFAULT_FLEET", "DeploymentSpec", "load_fleet", "model_aliases", "parse_fleet", "simulated_deployment"]


@dataclass(frozen=True, slots=True)
class DeploymentSpec:
    """One served model."""

    name: str
    backend: str = "trainium-sim"
    # trainium-sim: the catalog model, instance type, tensor parallelism, replicas, weights and routing
    model: str = ""
    instance: str = "trn2.48xlarge"
    tp: int = 8
    replicas: int = 1
    weights: str = "bf16"
    policy: str = "kv_aware"  # the routing policy (sim/router.py): kv_aware follows the prompts' cached prefixes
    max_batch: int = 64
    # openai-compatible: the upstream server and the chips the operator declares it runs on
    base_url: str = ""
    upstream_model: str = ""
    api_key: str = field(default="", repr=False)
    chips: int = 1
    context_window: int = 8192
    timeout_s: float = 120.0
    # who may use it: empty means every tenant
    tenants: tuple[str, ...] = ()
    # "chat" or "embeddings"; a trainium-sim embedding deployment runs a catalog embedding model
    task: str = "chat"
    # more ids clients may send for it (besides the derived one, see model_aliases)
    aliases: tuple[str, ...] = ()
    # trainium-sim chat: speculative decoding (vLLM's speculative_config); "" / None: a catalog pair's own, else none
    draft_model: str = ""  # the draft, a catalog id or alias
    num_speculative_tokens: int | None = None  # tokens the draft proposes a step (>= 1)
    acceptance_rate: float | None = None  # chance each drafted token is accepted, in [0, 1] [default: the simulator's]

    def __post_init__(self) -> None:
        if self.backend not in ("trainium-sim", "openai-compatible"):
            raise ConfigurationError(f"deployment {self.name!r}: unknown backend {self.backend!r}")
        if self.backend == "trainium-sim" and not self.model:
            raise ConfigurationError(f"deployment {self.name!r}: trainium-sim needs a catalog `model`")
        if self.backend == "openai-compatible" and not self.base_url:
            raise ConfigurationError(f"deployment {self.name!r}: openai-compatible needs a `base_url`")
        if self.task not in ("chat", "embeddings"):
            raise ConfigurationError(f"deployment {self.name!r}: task is 'chat' or 'embeddings', not {self.task!r}")
        if self.backend == "trainium-sim" and (self.model in EMBEDDING_SHAPES) != (self.task == "embeddings"):
            kind = "an embedding model" if self.model in EMBEDDING_SHAPES else "not an embedding model"
            raise ConfigurationError(f"deployment {self.name!r}: {self.model} is {kind}; task is {self.task!r}")
        if self.replicas < 1 or self.tp < 1 or self.chips < 1 or self.max_batch < 1:
            raise ConfigurationError(f"deployment {self.name!r}: replicas, tp, chips and max_batch must be >= 1")
        if any(not isinstance(alias, str) or not alias for alias in self.aliases):
            raise ConfigurationError(f"deployment {self.name!r}: aliases are non-empty strings")
        self._check_speculation()

    @property
    def speculation(self) -> dict[str, Any]:
        """make_deployment's speculative-decoding arguments (None where the spec leaves them to the catalog)."""
        return {
            "draft_model": self.draft_model or None,
            "num_speculative_tokens": self.num_speculative_tokens,
            "acceptance_rate": self.acceptance_rate,
        }

    def _check_speculation(self) -> None:
        """Refuse speculation fields of the wrong type or range, on a deployment that cannot speculate, or that
        make_deployment refuses (an unknown draft, another vocabulary, tokens without a draft, ...), naming them."""
        stated = {k: v for k, v in self.speculation.items() if v is not None}
        if not stated:
            return
        where = f"deployment {self.name!r}"
        if not isinstance(self.draft_model, str):
            raise ConfigurationError(f"{where}: `draft_model` is a catalog model id or alias, not {self.draft_model!r}")
        tokens = self.num_speculative_tokens
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
            raise ConfigurationError(f"{where}: `num_speculative_tokens` is an integer >= 1, not {tokens!r}")
        rate = self.acceptance_rate
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1):
            raise ConfigurationError(f"{where}: `acceptance_rate` is a number in [0, 1], not {rate!r}")
        named = ", ".join(f"`{k}`" for k in stated)
        if self.backend != "trainium-sim" or self.task != "chat":
            raise ConfigurationError(f"{where}: {named} apply to a trainium-sim chat deployment's speculative decoding")
        try:
            simulated_deployment(self)
        except SimulatorError as exc:
            raise ConfigurationError(f"{where}: speculative decoding ({named}): {exc}") from exc


def simulated_deployment(spec: DeploymentSpec) -> Deployment:
    """The simulator's replica of a ``trainium-sim`` deployment, speculative decoding included: what the pool serves
    and what capacity planning replays (raises the simulator's errors)."""
    return make_deployment(spec.model, spec.instance, spec.tp, spec.weights, **spec.speculation)


def derived_alias(name: str) -> str | None:
    """The alias a served name gets without being asked: its last ``/`` segment, lower-cased (None without ``/``)."""
    return name.rsplit("/", 1)[1].lower() if "/" in name else None


def model_aliases(specs: Iterable[DeploymentSpec]) -> dict[str, str]:
    """Every alias of ``specs`` → the served name it stands for, in the fleet's order.

    A listed alias that is a deployment's name, another deployment's derived alias, or listed twice is refused
    (:class:`ConfigurationError` naming both models). A derived alias that is a deployment's name, or that two
    deployments derive, is left out: neither gets it, so adding a deployment never makes an alias point elsewhere.
    """
    specs = tuple(specs)
    derived: dict[str, list[str]] = {}
    for spec in specs:
        if (alias := derived_alias(spec.name)) is not None:
            derived.setdefault(alias, []).append(spec.name)
    names = {spec.name for spec in specs}
    resolved: dict[str, str] = {}
    for spec in specs:
        own = derived_alias(spec.name)
        if own is not None and own not in names and derived[own] == [spec.name]:
            resolved[own] = spec.name
        for alias in spec.aliases:
            if alias == own:
                continue  # listing the derived alias changes nothing
            taken = alias if alias in names else resolved.get(alias) or next(iter(derived.get(alias, ())), None)
            if taken is not None:
                raise ConfigurationError(
                    f"deployment {spec.name!r}: alias {alias!r} already names the model {taken!r}; "
                    "an alias names one model"
                )
            resolved[alias] = spec.name
    return resolved


DEFAULT_FLEET: tuple[DeploymentSpec, ...] = (
    DeploymentSpec(
        name="meta-llama/Llama-3.1-8B-Instruct",
        model="meta-llama/Llama-3.1-8B",
        instance="trn2.48xlarge",
        tp=8,
        replicas=2,
    ),
    DeploymentSpec(
        name="meta-llama/Llama-3.3-70B-Instruct",
        model="meta-llama/Llama-3.3-70B-Instruct",
        instance="trn2.48xlarge",
        tp=32,
        replicas=1,
    ),
    # embedding models are small: one rank (24 GiB of HBM) holds BGE-large's 0.6 GiB at bf16; Qwen3-Embedding-8B's
    # 14 GiB get a whole chip (four ranks), leaving room for the activations of long inputs
    DeploymentSpec(
        name="BAAI/bge-large-en-v1.5",
        model="BAAI/bge-large-en-v1.5",
        task="embeddings",
        instance="trn2.48xlarge",
        tp=1,
        replicas=1,
    ),
    DeploymentSpec(
        name="Qwen/Qwen3-Embedding-8B",
        model="Qwen/Qwen3-Embedding-8B",
        task="embeddings",
        instance="trn2.48xlarge",
        tp=4,
        replicas=1,
    ),
)


def parse_fleet(data: Any) -> tuple[DeploymentSpec, ...]:
    """Deployments from the parsed fleet JSON, with errors that name the deployment and the field."""
    if not isinstance(data, dict) or not isinstance(data.get("deployments"), list):
        raise ConfigurationError('a fleet file is {"deployments": [...]}')
    known = {f.name for f in fields(DeploymentSpec)}
    specs = []
    for index, raw in enumerate(data["deployments"]):
        if not isinstance(raw, dict) or "name" not in raw:
            raise ConfigurationError(f"deployments[{index}] needs a `name`")
        unknown = set(raw) - known
        if unknown:
            raise ConfigurationError(f"deployments[{index}] ({raw['name']}): unknown fields {sorted(unknown)}")
        for listed in ("tenants", "aliases"):
            if listed in raw:
                if not isinstance(raw[listed], list):
                    raise ConfigurationError(f"deployments[{index}] ({raw['name']}): `{listed}` is a list of strings")
                raw = {**raw, listed: tuple(raw[listed])}
        specs.append(DeploymentSpec(**raw))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigurationError("deployment names must be unique")
    model_aliases(specs)  # refuses an alias that names two models
    return tuple(specs)


def load_fleet(path: str | Path | None) -> tuple[DeploymentSpec, ...]:
    """The fleet in ``path``, or the default fleet when no path is given."""
    if path is None or str(path) == "":
        return DEFAULT_FLEET
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"cannot read fleet file {path}: {exc}") from exc
    return parse_fleet(data)
