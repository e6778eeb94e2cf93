"""`switchyard simulate`: point and benchmark predictions, calibration and trace runs from the command line."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import click

from switchyard.accelerator.errors import SimulatorError
from switchyard.accelerator.sim.bench import BenchResult, simulate_bench
from switchyard.accelerator.sim.calibration import calibrate, read_benchmarks, write_result
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import (
    DEFAULT_ACCEPTANCE_RATE,
    MAX_SPECULATIVE_TOKENS,
    Deployment,
    KvCacheDtype,
    Precision,
    make_deployment,
)
from switchyard.accelerator.sim.disaggregated import DisaggregatedCluster
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.hardware import Instance, get_instance
from switchyard.accelerator.sim.metrics import RunSummary, summarize
from switchyard.accelerator.sim.models import load_model_config
from switchyard.accelerator.sim.point import simulate_point
from switchyard.accelerator.sim.report import format_table, html_report, with_progress
from switchyard.accelerator.sim.requests import Request
from switchyard.accelerator.sim.router import RoutingPolicy
from switchyard.accelerator.sim.search import SearchProgress, SearchResult, SearchSettings, Slo, WaveEvaluator, search
from switchyard.accelerator.sim.search_report import pareto_svg, search_html
from switchyard.accelerator.sim.search_space import DEFAULT_CHUNK_TOKENS, PARALLELISMS, configuration_space
from switchyard.accelerator.sim.workloads import parse_workload, scale_rate

__all__ = ["register_search_workers", "simulate"]

_SEARCH_WORKERS: dict[str, Callable[[float | None], WaveEvaluator]] = {}
"""`simulate search --workers NAME` besides `local`: how to build each one's evaluator (registered by whoever mounts
this group: the platform's `switchyard` command registers `celery`)."""
DEFAULT_WAVE_SIZE = 8
"""Configurations a search sends at once to workers other than `local` (which evaluates one at a time)."""


def register_search_workers(name: str, make: Callable[[float | None], WaveEvaluator]) -> None:
    """Offer `simulate search --workers NAME`: `make(idle_timeout_s)` builds the evaluator that runs each wave when a
    search asks for it (failing after `idle_timeout_s` without a result, None: never), so the simulator needs to know
    nothing of where that is (the platform's CLI registers `celery`)."""
    if name == "local":
        raise ValueError("'local' is the simulator's own evaluator")
    _SEARCH_WORKERS[name] = make


_WEIGHTS = click.Choice([p.value for p in Precision])
_MODEL_HELP = "Hugging Face id, e.g. meta-llama/Llama-3.1-8B-Instruct (or the name of --model-config)"
_MODEL_CONFIG = click.option(
    "--model-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="a Hugging Face config.json for a model not in the catalog (served as --model, else its folder's name)",
)


_JSON_FILE = click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default=None,
    help="write the result as one JSON object to this file ('-': stdout)",
)


def _write_json(result: dict[str, Any], out: Path) -> None:
    """``result`` as one JSON object: on stdout for ``-``, else indented into the file."""
    if str(out) == "-":
        click.echo(json.dumps(result))
    else:
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def _model_name(model: str | None, model_config: Path | None) -> str:
    """The model to simulate: `--model-config` registers its config (named `--model` when given)."""
    if model_config is not None:
        try:
            return load_model_config(model_config, name=model).name
        except (SimulatorError, ValueError, OSError) as exc:
            raise click.ClickException(f"{model_config}: {exc}") from exc
    if model is None:
        raise click.UsageError("give --model, or --model-config with a config.json")
    return model


_SPECULATION_OPTIONS = (
    click.option(
        "--draft-model",
        default=None,
        help="speculative decoding with this draft model on the target's ranks: a catalog id or alias (or the name "
        "of --draft-model-config) [default: a target + draft pair's own]",
    ),
    click.option(
        "--draft-model-config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="a Hugging Face config.json for a draft model not in the catalog (served as --draft-model, else its "
        "folder's name)",
    ),
    click.option(
        "--speculative-tokens",
        type=click.IntRange(min=1, max=MAX_SPECULATIVE_TOKENS),
        default=None,
        help="tokens the draft proposes a step (vLLM's num_speculative_tokens) [default: a pair's own]",
    ),
    click.option(
        "--acceptance-rate",
        type=click.FloatRange(min=0, max=1),
        default=None,
        help="chance the target accepts a drafted token, each independently "
        f"[default: {DEFAULT_ACCEPTANCE_RATE}, an assumption]",
    ),
)


def _speculation_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options of speculative decoding (vLLM's speculative_config), in the order listed."""
    for option in reversed(_SPECULATION_OPTIONS):
        command = option(command)
    return command


def _speculation(
    draft_model: str | None, draft_model_config: Path | None, tokens: int | None, acceptance_rate: float | None
) -> dict[str, Any]:
    """make_deployment's speculative-decoding arguments from the options; `--draft-model-config` registers its config
    (an option left out leaves a catalog pair's own draft and tokens, and refusals to make_deployment)."""
    draft = None if draft_model is None and draft_model_config is None else _model_name(draft_model, draft_model_config)
    return {"draft_model": draft, "num_speculative_tokens": tokens, "acceptance_rate": acceptance_rate}


def _speculation_line(speculation: dict[str, Any] | None) -> str:
    """One line on the speculative decoding served (empty without it)."""
    if speculation is None:
        return ""
    return (
        f"\n  speculative decoding: draft {speculation['draft_model']}, {speculation['num_speculative_tokens']} "
        f"tokens a step, acceptance rate {speculation['acceptance_rate']:g}"
    )


@click.group(name="simulate")
def simulate() -> None:
    """Simulate Trainium (and comparison) fleets serving LLMs."""


@simulate.command()
@click.option("--model", default=None, help=_MODEL_HELP)
@_MODEL_CONFIG
@click.option("--instance", required=True, help="AWS instance type, e.g. trn1.32xlarge")
@click.option("--tp", type=int, required=True, help="tensor-parallel degree (NeuronCores on trn1/inf2)")
@click.option("--batch", type=int, default=1, show_default=True)
@click.option("--input-len", type=int, required=True)
@click.option("--output-len", type=int, required=True)
@click.option("--weights", type=_WEIGHTS, default="bf16", show_default=True)
@click.option("--expert-parallel", is_flag=True, help="MoE: whole experts per rank, all-to-all token routing")
@click.option(
    "--stack", default=None, help="calibrated software stack (default: the newest), e.g. 'transformers-neuronx 2.18.0'"
)
@click.option(
    "--compiled-batch",
    type=int,
    default=None,
    help="batch the decode graph was compiled for (vLLM max_num_seqs on Neuron), if larger than the batch",
)
@click.option("--host-sampling", is_flag=True, help="sample on the host CPU instead of on the device")
@_speculation_options
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def point(
    model: str | None,
    model_config: Path | None,
    instance: str,
    tp: int,
    batch: int,
    input_len: int,
    output_len: int,
    weights: str,
    expert_parallel: bool,
    stack: str | None,
    compiled_batch: int | None,
    host_sampling: bool,
    draft_model: str | None,
    draft_model_config: Path | None,
    speculative_tokens: int | None,
    acceptance_rate: float | None,
    as_json: bool,
) -> None:
    """Latency and throughput of one static batch (the published benchmarks' methodology)."""
    name = _model_name(model, model_config)
    speculation = _speculation(draft_model, draft_model_config, speculative_tokens, acceptance_rate)
    try:
        r = simulate_point(
            name,
            instance,
            tp,
            batch,
            input_len,
            output_len,
            weights,
            expert_parallel=expert_parallel,
            stack=stack,
            compiled_batch=compiled_batch,
            host_sampling=host_sampling,
            **speculation,
        )
    except SimulatorError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(r.to_dict()))
        return
    click.echo(
        f"{r.model} on {r.instance} tp={r.tp} ({r.chips} chips), batch {r.batch}, {r.input_len}->{r.output_len}:\n"
        f"  TTFT {r.ttft_ms:.1f} ms  TPOT {r.tpot_ms:.2f} ms  {r.output_tokens_per_s:.1f} output tok/s  "
        f"{r.chip_seconds:.1f} chip-s  (coefficients: {r.coefficients_group})" + _speculation_line(r.speculation)
    )


@simulate.command()
@click.option("--model", default=None, help=_MODEL_HELP)
@_MODEL_CONFIG
@click.option("--instance", required=True, help="AWS instance type, e.g. trn1.32xlarge")
@click.option("--tp", type=int, required=True, help="tensor-parallel degree (NeuronCores on trn1/inf2)")
@click.option("--concurrency", type=click.IntRange(min=1), default=None, help="closed loop: requests in flight")
@click.option(
    "--rate", type=click.FloatRange(min=0, min_open=True), default=None, help="open loop: requests sent per second"
)
@click.option(
    "--arrivals",
    type=click.Choice(["poisson", "constant"]),
    default="poisson",
    show_default=True,
    help="open loop: exponential or even gaps between requests",
)
@click.option("--seed", type=int, default=0, show_default=True, help="open loop: seed of the Poisson arrivals")
@click.option("--requests", type=click.IntRange(min=1), required=True, help="requests sent, warm-up included")
@click.option("--input-len", type=click.IntRange(min=1), required=True)
@click.option("--output-len", type=click.IntRange(min=1), required=True)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=None,
    help="first finished requests left out of the statistics [default: the concurrency; 0 in open loop]",
)
@click.option("--weights", type=_WEIGHTS, default="bf16", show_default=True)
@click.option("--kv-dtype", type=click.Choice([d.value for d in KvCacheDtype]), default="bf16", show_default=True)
@click.option(
    "--parallelism",
    type=click.Choice(list(PARALLELISMS)),
    default="tp",
    show_default=True,
    help="ep: a mixture-of-experts model's experts whole on the --tp ranks (expert parallelism)",
)
@click.option("--max-batch", type=int, default=EngineConfig().max_batch, show_default=True, help="max_num_seqs")
@_speculation_options
@_JSON_FILE
def bench(
    model: str | None,
    model_config: Path | None,
    instance: str,
    tp: int,
    concurrency: int | None,
    rate: float | None,
    arrivals: str,
    seed: int,
    requests: int,
    input_len: int,
    output_len: int,
    warmup: int | None,
    weights: str,
    kv_dtype: str,
    parallelism: str,
    max_batch: int,
    draft_model: str | None,
    draft_model_config: Path | None,
    speculative_tokens: int | None,
    acceptance_rate: float | None,
    json_out: Path | None,
) -> None:
    """A serving benchmark's TTFT / ITL / E2E percentiles and throughput (llmperf, guidellm, vLLM, GenAI-Perf).

    Closed loop with --concurrency (a new request the moment one finishes), open loop with --rate.
    """
    if (concurrency is None) == (rate is None):
        raise click.UsageError("give exactly one of --concurrency (closed loop) or --rate (open loop)")
    if warmup is not None and warmup >= requests:
        raise click.BadParameter(f"{warmup} leaves none of the {requests} requests to measure", param_hint="--warmup")
    name = _model_name(model, model_config)
    speculation = _speculation(draft_model, draft_model_config, speculative_tokens, acceptance_rate)
    try:
        r = simulate_bench(
            name,
            instance,
            tp,
            requests=requests,
            input_len=input_len,
            output_len=output_len,
            concurrency=concurrency,
            rate_per_s=rate,
            poisson=arrivals == "poisson",
            seed=seed,
            warmup=warmup,
            weights=weights,
            kv_dtype=kv_dtype,
            config=EngineConfig(max_batch=max_batch),
            expert_parallel=parallelism == "ep",
            **speculation,
        )
    except SimulatorError as exc:
        raise click.ClickException(str(exc)) from exc
    if json_out is None:
        click.echo(_bench_table(r))
    else:
        _write_json(r.to_dict(), json_out)


def _bench_table(r: BenchResult) -> str:
    load = f"concurrency {r.concurrency}" if r.rate_per_s is None else f"{r.arrivals} {r.rate_per_s:g} req/s"
    rows = [
        f"{r.model} on {r.instance} tp={r.tp}{' (EP)' if r.expert_parallel else ''} ({r.chips} chips), {load}, "
        f"{r.input_len}->{r.output_len}, kv {r.kv_dtype}: {r.measured} of {r.requests} requests measured "
        f"(warm-up {r.warmup})",
        f"  {'ms':8} {'p50':>9} {'p90':>9} {'p99':>9}",
    ]
    for label, pcts in (("TTFT", r.ttft_ms), ("ITL", r.itl_ms), ("E2E", r.e2e_ms)):
        rows.append(f"  {label:8} {pcts['p50']:>9.1f} {pcts['p90']:>9.1f} {pcts['p99']:>9.1f}")
    rows.append(
        f"  {r.output_tokens_per_s:.1f} output tok/s  {r.requests_per_s:.2f} req/s over {r.duration_s:.1f} s"
        + (f"  ({r.rejected} rejected)" if r.rejected else "")
        + _speculation_line(r.speculation)
    )
    return "\n".join(rows)


@simulate.command(name="calibrate")
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    multiple=True,
    help="benchmark CSV (repeat: the Neuron 2024 and 2025 tables and the GPU table are fitted together)",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def calibrate_cmd(data: tuple[Path, ...], out: Path) -> None:
    """Fit efficiency coefficients per generation and stack; print per-row errors and leave-one-model-out CV."""
    result = calibrate(read_benchmarks(*data))
    write_result(result, out, data_source=", ".join(str(d) for d in data))
    click.echo(
        f"{'model':38} {'instance':14} {'B':>2} {'in':>5} {'out':>5} {'w':4} "
        f"{'TTFT':>8} {'pred':>8} {'err%':>6} {'TPOT':>6} {'pred':>6} {'err%':>6} {'CV TTFT%':>8} {'CV TPOT%':>8}"
    )
    cv_by_row = {e.row: e for e in result.cross_validation}
    nan = float("nan")
    for e in result.in_sample:
        r, c = e.row, cv_by_row.get(e.row)
        click.echo(
            f"{r.model[:38]:38} {r.instance:14} {r.batch:>2} {r.input_len:>5} {r.output_len:>5} {r.weights:4} "
            f"{r.ttft_ms:8.1f} {e.ttft_pred_ms:8.1f} {e.ttft_err * 100:6.1f} {r.tpot_ms:6.2f} {e.tpot_pred_ms:6.2f} "
            f"{e.tpot_err * 100:6.1f} {(c.ttft_err if c else nan) * 100:8.1f} {(c.tpot_err if c else nan) * 100:8.1f}"
        )
    for name, s in result.summary().items():
        click.echo(
            f"{name:20} TTFT |err| median {s['ttft_median_abs_pct']:.1f} % p90 {s['ttft_p90_abs_pct']:.1f} %   "
            f"TPOT |err| median {s['tpot_median_abs_pct']:.1f} % p90 {s['tpot_p90_abs_pct']:.1f} %"
        )
    for group_label, by_kind in result.summary_by_group().items():
        for kind, s in by_kind.items():
            click.echo(
                f"{group_label:42} {kind:20} rows {s['ttft_rows']:.0f}/{s['tpot_rows']:.0f}  TTFT |err| median "
                f"{s['ttft_median_abs_pct']:.1f} % p90 {s['ttft_p90_abs_pct']:.1f} %   TPOT |err| median "
                f"{s['tpot_median_abs_pct']:.1f} % p90 {s['tpot_p90_abs_pct']:.1f} %"
            )
    for group, coeffs in result.coefficients.items():
        for phase in ("prefill", "decode"):
            q = getattr(coeffs, phase).describe()
            click.echo(f"{group:7} {phase:8} " + "  ".join(f"{k}={v:.4g}" for k, v in q.items()))
    click.echo(f"wrote {out}")


@simulate.command()
@click.option("--model", default=None, help=_MODEL_HELP)
@_MODEL_CONFIG
@click.option("--instance", required=True)
@click.option("--replicas", type=int, default=1, show_default=True)
@click.option("--tp", type=int, required=True)
@click.option("--weights", type=_WEIGHTS, default="bf16", show_default=True)
@click.option(
    "--workload",
    required=True,
    help="CSV (arrival_s,input_tokens,output_tokens[,session,prefix_id,prefix_tokens,...] or an Azure trace), "
    "a Mooncake JSON-lines trace (timestamp,input_length,output_length,hash_ids), "
    "or poisson:n=..,rate=.. / bursty:n=..,rate=.. / agentic:sessions=..,rate=..",
)
@click.option("--rate-scale", type=float, default=1.0, show_default=True, help="multiply the arrival rate")
@click.option("--policy", type=click.Choice([p.value for p in RoutingPolicy]), default="least_load", show_default=True)
@click.option("--max-batch", type=int, default=64, show_default=True, help="sequences per replica")
@click.option(
    "--max-batched-tokens",
    type=click.IntRange(min=1),
    default=EngineConfig().max_batched_tokens,
    show_default=True,
    help="token budget of one iteration: the chunk size of chunked prefill (vLLM's max_num_batched_tokens)",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="show progress on stderr (default: when stderr is a terminal)",
)
@click.option("--fair-share", is_flag=True, help="admit by priority tier, then fair share across tenants")
@click.option(
    "--prefix-caching/--no-prefix-caching",
    default=True,
    show_default=True,
    help="reuse cached KV blocks of earlier prompts (block KV layout, with its calibrated overhead)",
)
@click.option(
    "--host-kv-gib",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="per replica, a KV tier in host memory: evicted prefix blocks are kept there and loaded back",
)
@click.option("--slo-ttft-ms", type=float, default=None)
@click.option("--slo-tpot-ms", type=float, default=None)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--extra-pool", "extra_pools", multiple=True, help="heterogeneous fleet: add instance[:tp=N][:replicas=R]; repeat"
)
@click.option("--decode-instance", default=None, help="disaggregate: run decode on this instance type")
@click.option("--decode-tp", type=int, default=None, help="TP of the decode pool (default: whole instance)")
@click.option("--decode-replicas", type=int, default=1, show_default=True)
@click.option("--kv-link-gbps", type=float, default=None, help="KV transfer bandwidth (default: slower NIC)")
@_speculation_options
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--report", "report_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def run(
    model: str | None,
    model_config: Path | None,
    instance: str,
    replicas: int,
    tp: int,
    weights: str,
    workload: str,
    rate_scale: float,
    policy: str,
    max_batch: int,
    max_batched_tokens: int,
    progress: bool | None,
    fair_share: bool,
    prefix_caching: bool,
    host_kv_gib: float,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    seed: int,
    extra_pools: tuple[str, ...],
    decode_instance: str | None,
    decode_tp: int | None,
    decode_replicas: int,
    kv_link_gbps: float | None,
    draft_model: str | None,
    draft_model_config: Path | None,
    speculative_tokens: int | None,
    acceptance_rate: float | None,
    json_out: Path | None,
    report_out: Path | None,
) -> None:
    """Serve a workload on a fleet and report throughput, latency percentiles, goodput and cost.

    With --decode-instance the fleet is disaggregated: the --instance pool runs prefills, KV caches cross
    the network, and the decode pool generates.
    """
    model = _model_name(model, model_config)
    speculation = _speculation(draft_model, draft_model_config, speculative_tokens, acceptance_rate)
    config = EngineConfig(
        max_batch=max_batch,
        max_batched_tokens=max_batched_tokens,
        fair_share=fair_share,
        prefix_caching=prefix_caching,
        host_kv_gib=host_kv_gib,
    )
    try:
        dep = make_deployment(model, instance, tp, weights, **speculation)
        requests = parse_workload(workload)
        extra = [_parse_fleet(model, spec, weights, speculation) for spec in extra_pools]
        pool = Cluster.heterogeneous([(dep, replicas), *extra], policy, config=config, seed=seed)
        cluster: Cluster | DisaggregatedCluster = pool
        if decode_instance is not None:
            dtp = decode_tp or get_instance(decode_instance).max_tp
            decode = Cluster(
                make_deployment(model, decode_instance, dtp, weights, **speculation),
                decode_replicas,
                policy,
                config=config,
                seed=seed,
            )
            link = None if kv_link_gbps is None else kv_link_gbps * 1e9 / 8
            cluster = DisaggregatedCluster(pool, decode, link)
    except (SimulatorError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if rate_scale != 1.0:
        requests = scale_rate(requests, rate_scale)
    shown = sys.stderr.isatty() if progress is None else progress
    for req in with_progress(requests, sys.stderr if shown else None, lambda: cluster.now):
        cluster.submit(req)
    cluster.step_until(float("inf"))
    finished = cluster.collect()
    summary = summarize(finished, cluster, slo_ttft_ms, slo_tpot_ms, requests)
    served = None if dep.speculation is None else dep.speculation.to_dict()
    click.echo(format_table(summary) + _speculation_line(served))
    if json_out is not None:
        payload: dict[str, Any] = summary.to_dict()
        payload["speculation"] = served
        json_out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if report_out is not None:
        pools = [cluster] if isinstance(cluster, Cluster) else [cluster.prefill, cluster.decode]
        busy = [r.busy_s for p in pools for r in p.replicas]
        report_out.write_text(html_report(summary, finished, busy), encoding="utf-8")


def _parse_fleet(
    model: str, spec: str, weights: str = "bf16", speculation: dict[str, Any] | None = None
) -> tuple[Deployment, int]:
    """`instance[:tp=N][:replicas=R][:weights=W]` -> (deployment, replicas); tp defaults to the whole instance.
    `speculation`: make_deployment's speculative-decoding arguments (_speculation)."""
    name, *opts = spec.split(":")
    kv = dict(o.split("=", 1) for o in opts if o)
    tp = int(kv.get("tp", get_instance(name).max_tp))
    dep = make_deployment(model, name, tp, kv.get("weights", weights), **(speculation or {}))
    return dep, int(kv.get("replicas", 1))


def _serve(
    dep: Deployment,
    replicas: int,
    requests: list[Request],
    policy: str,
    slo: tuple[float | None, float | None],
    config: EngineConfig,
) -> RunSummary:
    cluster = Cluster(dep, replicas, policy, config=config)
    finished = cluster.run(requests)
    return summarize(finished, cluster, *slo)


@simulate.command()
@click.option("--model", default=None, help=_MODEL_HELP)
@_MODEL_CONFIG
@click.option("--workload", required=True, help="CSV (plain or Azure trace), or poisson:/bursty:/agentic: spec")
@click.option(
    "--fleet", "fleets", multiple=True, required=True, help="instance[:tp=N][:replicas=R][:weights=W]; repeat"
)
@click.option("--rate-scale", type=float, default=1.0, show_default=True)
@click.option("--policy", type=click.Choice([p.value for p in RoutingPolicy]), default="least_load", show_default=True)
@click.option("--max-batch", type=int, default=64, show_default=True, help="sequences per replica")
@click.option(
    "--max-batched-tokens",
    type=click.IntRange(min=1),
    default=EngineConfig().max_batched_tokens,
    show_default=True,
    help="token budget of one iteration (the chunk size of chunked prefill)",
)
@click.option("--slo-ttft-ms", type=float, default=None)
@click.option("--slo-tpot-ms", type=float, default=None)
@_speculation_options
def compare(
    model: str | None,
    model_config: Path | None,
    workload: str,
    fleets: tuple[str, ...],
    rate_scale: float,
    policy: str,
    max_batch: int,
    max_batched_tokens: int,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    draft_model: str | None,
    draft_model_config: Path | None,
    speculative_tokens: int | None,
    acceptance_rate: float | None,
) -> None:
    """Serve one workload on several fleets and print latency, goodput and price-performance side by side.

    The speculative-decoding options apply to every fleet."""
    model = _model_name(model, model_config)
    speculation = _speculation(draft_model, draft_model_config, speculative_tokens, acceptance_rate)
    try:
        requests = scale_rate(parse_workload(workload), rate_scale)
        plans = [(spec, *_parse_fleet(model, spec, speculation=speculation)) for spec in fleets]
    except (SimulatorError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"{'fleet':34} {'chips':>5} {'tok/s':>8} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} {'TPOT p99':>9} "
        f"{'goodput':>8} {'$/M tok':>9} {'tok/$ vs 1st':>12}"
    )
    base: float | None = None
    for spec, dep, replicas in plans:
        config = EngineConfig(max_batch=max_batch, max_batched_tokens=max_batched_tokens)
        s = _serve(dep, replicas, requests, policy, (slo_ttft_ms, slo_tpot_ms), config)
        per_m = s.cost_per_million_output_tokens_usd
        ratio = "n/a"
        if per_m is not None and per_m > 0:
            tokens_per_usd = 1e6 / float(per_m)
            base = base or tokens_per_usd
            ratio = f"{tokens_per_usd / base:.2f}x"
        click.echo(
            f"{spec[:34]:34} {replicas * dep.chips:>5} {s.output_tokens_per_s:>8.1f} {s.ttft_ms['p50']:>9.1f} "
            f"{s.ttft_ms['p99']:>9.1f} {s.tpot_ms['p50']:>9.2f} {s.tpot_ms['p99']:>9.2f} "
            f"{s.goodput_requests_per_s:>8.2f} {'n/a' if per_m is None else f'{per_m:.2f}':>9} {ratio:>12}"
        )
    if plans and plans[0][1].speculation is not None:
        click.echo(_speculation_line(plans[0][1].speculation.to_dict()).lstrip("\n"))


def _positive_list(kind: type[int] | type[float], example: str) -> Any:
    """A click callback: a comma-separated list of positive numbers of `kind` (None: the option's default)."""
    noun = "integers" if kind is int else "numbers"

    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> list[Any] | None:
        if value is None:
            return None
        try:
            out = [kind(v) for v in value.split(",") if v.strip()]
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a comma-separated list of {noun}") from None
        if not out or not all(0 < v < math.inf for v in out):
            raise click.BadParameter(f"{value!r}: give positive {noun}, e.g. {example}")
        return out

    return parse


_ints = _positive_list(int, "1,2,4")
_floats = _positive_list(float, "0.5,2")


def _names(choices: list[str]) -> Any:
    """A click callback: a comma-separated list, each one of `choices`."""

    def parse(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
        out = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in out if v not in choices]
        if bad or not out:
            raise click.BadParameter(f"{', '.join(bad) or repr(value)}: choose from {', '.join(choices)}")
        return out

    return parse


def _instances(ctx: click.Context, param: click.Parameter, value: str | None) -> list[Instance]:
    if value is None:
        return []
    try:
        return [get_instance(v.strip()) for v in value.split(",") if v.strip()]
    except SimulatorError as exc:
        raise click.BadParameter(str(exc)) from exc


def _assumed_prices(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> dict[str, Decimal]:
    """`INSTANCE=USD` pairs: the hourly prices assumed for instance types the catalog does not price."""
    prices: dict[str, Decimal] = {}
    for item in value:
        name, _, usd = item.partition("=")
        try:
            price = Decimal(usd)
            instance = get_instance(name.strip())
        except (InvalidOperation, SimulatorError) as exc:
            raise click.BadParameter(f"{item!r}: give INSTANCE=USD per hour, e.g. cs-3=50 ({exc})") from None
        if not price.is_finite() or price <= 0:
            raise click.BadParameter(f"{item!r}: the price must be a positive number of USD per hour")
        if instance.price_usd_per_hour is not None:
            raise click.BadParameter(
                f"{instance.name} has a price in the catalog ({instance.price_usd_per_hour} USD/h); assume prices "
                "only for instance types it does not price"
            )
        prices[instance.name] = price
    return prices


def _workers(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if value != "local" and value not in _SEARCH_WORKERS:
        names = ", ".join(["local", *sorted(_SEARCH_WORKERS)])
        hint = "" if _SEARCH_WORKERS else " (celery is offered by `switchyard simulate search`, the platform's command)"
        raise click.BadParameter(f"{value!r}: choose from {names}{hint}")
    return value


@simulate.command(name="search")
@click.option("--model", default=None, help=_MODEL_HELP)
@_MODEL_CONFIG
@click.option(
    "--workload", required=True, help="CSV (plain or Azure trace), Mooncake trace, or poisson:/bursty:/agentic:"
)
@click.option("--slo-ttft-ms", type=click.FloatRange(min=0, min_open=True), required=True)
@click.option("--slo-tpot-ms", type=click.FloatRange(min=0, min_open=True), required=True)
@click.option(
    "--percentile",
    type=click.FloatRange(min=0, max=100, min_open=True),
    default=90.0,
    show_default=True,
    help="the SLO holds when this percentile of TTFT and of TPOT is within its limit",
)
@click.option("--instances", required=True, callback=_instances, help="instance types, comma-separated")
@click.option("--tp", callback=_ints, default=None, help="TP degrees, comma-separated [default: powers of two]")
@click.option("--replicas", callback=_ints, default="1", show_default=True)
@click.option("--max-batch", callback=_ints, default="64", show_default=True, help="max_num_seqs values")
@click.option("--routing", callback=_names([p.value for p in RoutingPolicy]), default="least_load", show_default=True)
@click.option("--weights", callback=_names([p.value for p in Precision]), default="bf16", show_default=True)
@click.option(
    "--parallelism",
    callback=_names(list(PARALLELISMS)),
    default="tp",
    show_default=True,
    help="tp, ep (a mixture-of-experts model's experts whole on the ranks), or both",
)
@click.option(
    "--chunk-tokens",
    callback=_ints,
    default=str(DEFAULT_CHUNK_TOKENS),
    show_default=True,
    help="token budgets of one iteration (chunked prefill's chunk size)",
)
@click.option("--kv-dtype", callback=_names([k.value for k in KvCacheDtype]), default="bf16", show_default=True)
@click.option(
    "--decode-instances",
    callback=_instances,
    default=None,
    help="also try each configuration disaggregated, with a decode pool on these instance types (e.g. cs-3)",
)
@click.option(
    "--decode-tp", callback=_ints, default=None, help="TP degrees of the decode pool [default: powers of two]"
)
@click.option("--decode-replicas", callback=_ints, default="1", show_default=True)
@click.option(
    "--assume-price",
    "assumed",
    multiple=True,
    callback=_assumed_prices,
    metavar="INSTANCE=USD",
    help="an hourly price for an instance type the catalog does not price (CS-3, Trainium3); results say it is "
    "assumed; repeatable",
)
@click.option(
    "--requests",
    type=click.IntRange(min=2),
    default=SearchSettings().requests,
    show_default=True,
    help="the workload's first requests simulated at each rate tried",
)
@_JSON_FILE
@click.option(
    "--report",
    "report_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="also write an HTML report (the Pareto plot, the cheapest per family, published claims) to this file",
)
@click.option(
    "--plot",
    "plot_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="also write the report's Pareto plot alone, as an SVG file",
)
@click.option(
    "--sensitivity",
    callback=_floats,
    default=None,
    help="TTFT limits, as factors of --slo-ttft-ms (e.g. 0.5,2), searched again for the report's SLO sensitivity",
)
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="folder of per-configuration results: read when present, written when simulated",
)
@click.option(
    "--workers",
    callback=_workers,
    default="local",
    show_default=True,
    help="where configurations are evaluated: local (here, one at a time) or celery (as tasks on the queue "
    "switchyard.simulate of the platform's workers; `switchyard simulate search` only)",
)
@click.option(
    "--worker-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="with --workers other than local: fail after this many seconds without a result (no worker takes the "
    "queue) [default: wait]",
)
@click.option(
    "--wave-size",
    type=click.IntRange(min=1),
    default=None,
    help=f"configurations evaluated at once, each pruned against the results back before its wave is sent "
    f"[default: 1 with --workers local, else {DEFAULT_WAVE_SIZE}]",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="print each result on stderr as it arrives (default: when stderr is a terminal)",
)
@_speculation_options
def search_cmd(
    model: str | None,
    model_config: Path | None,
    workload: str,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    percentile: float,
    instances: list[Instance],
    tp: list[int] | None,
    replicas: list[int],
    max_batch: list[int],
    routing: list[str],
    weights: list[str],
    parallelism: list[str],
    chunk_tokens: list[int],
    kv_dtype: list[str],
    decode_instances: list[Instance],
    decode_tp: list[int] | None,
    decode_replicas: list[int],
    assumed: dict[str, Decimal],
    requests: int,
    json_out: Path | None,
    report_out: Path | None,
    plot_out: Path | None,
    sensitivity: list[float] | None,
    cache_dir: Path | None,
    workers: str,
    worker_timeout: float | None,
    wave_size: int | None,
    progress: bool | None,
    draft_model: str | None,
    draft_model_config: Path | None,
    speculative_tokens: int | None,
    acceptance_rate: float | None,
) -> None:
    """The highest request rate each configuration serves within the SLO, and the cheapest configurations.

    Bisects over the workload's rate for every combination of the options, then prices each at its max rate
    (per million output tokens) and prints the Pareto front of cost against TTFT p90. With --workers celery the
    configurations go in waves to the platform's Celery workers; the front and the cheapest per instance are the
    same as a local run's. The speculative-decoding options apply to every configuration (and are part of each
    one's cache key).
    """
    name = _model_name(model, model_config)
    speculation = _speculation(draft_model, draft_model_config, speculative_tokens, acceptance_rate)
    shown = sys.stderr.isatty() if progress is None else progress
    try:
        space, skipped = configuration_space(
            name,
            [i.name for i in instances],
            tps=tp,
            replicas=replicas,
            max_batches=max_batch,
            routings=routing,
            weights=weights,
            parallelisms=parallelism,
            chunk_tokens=chunk_tokens,
            kv_dtypes=kv_dtype,
            decode_instances=[i.name for i in decode_instances],
            decode_tps=decode_tp,
            decode_replicas=decode_replicas,
            assumed_prices=assumed,
            draft_model=speculation["draft_model"] or "",
            num_speculative_tokens=speculation["num_speculative_tokens"],
            acceptance_rate=speculation["acceptance_rate"],
        )
        requests_ = parse_workload(workload)
        settings = SearchSettings(requests=requests, assumed_prices=tuple((k, str(v)) for k, v in assumed.items()))
        evaluate_wave = None if workers == "local" else _SEARCH_WORKERS[workers](worker_timeout)

        def search_at(slo: Slo) -> SearchResult:
            return search(
                space,
                requests_,
                slo,
                settings,
                skipped=skipped,
                workload_description={"spec": workload},
                cache_dir=cache_dir,
                evaluate_wave=evaluate_wave,
                wave_size=wave_size or (1 if workers == "local" else DEFAULT_WAVE_SIZE),
                on_progress=_print_progress if shown else None,
            )

        result = search_at(Slo(slo_ttft_ms, slo_tpot_ms, percentile))
        if report_out is not None:
            others = [Slo(slo_ttft_ms * f, slo_tpot_ms, percentile) for f in sensitivity or ()]
            report_out.write_text(
                search_html(result, sensitivity=[(slo, search_at(slo)) for slo in others]), encoding="utf-8"
            )
        if plot_out is not None and result.pareto:
            plot_out.write_text(pareto_svg(result) + "\n", encoding="utf-8")
        elif plot_out is not None:
            click.echo(f"no configuration meets the SLO at any rate: {plot_out} not written", err=True)
    except (SimulatorError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    if json_out is None:
        click.echo(_search_table(result))
    else:
        _write_json(result.to_dict(), json_out)


def _print_progress(p: SearchProgress) -> None:
    """One line on stderr per configuration evaluated (pruned ones are counted in the next line)."""
    if p.result is None:
        return
    c, r = p.result.configuration, p.result
    cost = "infeasible" if r.cost_per_million_tokens_usd is None else f"${r.cost_per_million_tokens_usd:.2f}/M tok"
    origin = "cache" if p.cached else f"wave {p.wave}"
    click.echo(
        f"{p.done}/{p.total} configurations done ({p.pruned} pruned): {c.label()}: {r.max_rate_rps:.2f} req/s, "
        f"{cost} ({origin})",
        err=True,
    )


def _search_table(r: SearchResult) -> str:
    slo = r.slo
    rows = [
        f"{r.model}, {r.workload['requests']} requests of {r.workload['spec']}: SLO p{slo.percentile:g} TTFT <= "
        f"{slo.ttft_ms:g} ms and TPOT <= {slo.tpot_ms:g} ms",
        f"  {r.configurations_evaluated} evaluated ({r.simulated} simulated), {r.pruned} pruned, "
        f"{len(r.skipped)} skipped",
    ]
    header = (
        f"  {'instance':16} {'tp':>3} {'repl':>4} {'batch':>5} {'routing':11} {'w':4} {'max req/s':>9} "
        f"{'$/M tok':>8} {'TTFT p90':>9} {'TPOT p90':>9} {'req/s per $/h':>13}  other"
    )
    for title, results in (
        ("Pareto front (cost against TTFT p90):", r.pareto),
        ("Cheapest per instance:", list(r.best_per_instance.values())),
    ):
        rows += [title, header]
        for x in results:
            c = x.configuration
            rows.append(
                f"  {c.instance:16} {c.tp:>3} {c.replicas:>4} {c.max_batch:>5} {c.routing:11} {c.weights:4} "
                f"{x.max_rate_rps:>9.2f}{'+' if x.rate_capped else ' '}{x.cost_per_million_tokens_usd:>8.2f} "
                f"{x.ttft_p90_ms:>9.1f} {x.tpot_p90_ms:>9.2f} {x.qps_per_dollar:>13.3f}  {', '.join(c.extras())}"
            )
    return "\n".join(rows)
