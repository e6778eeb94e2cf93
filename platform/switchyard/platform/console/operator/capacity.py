"""The operator's capacity page of a tenant: the configuration search over the tenant's own recorded traffic
("what would last week's traffic cost on trn3 at the same p90 TTFT?").

The form names a period, a model, instance types, TP degrees, replica counts and the p90 objectives; the search
(``simulation.capacity``) runs on its own thread, off the event loop, within its bounds (a sample of at most
``MAX_REQUESTS`` requests, ``MAX_CONFIGURATIONS`` configurations, ``TIME_LIMIT_S`` seconds, one search per
process). The traffic is read in a unit of work of its own that ends before the search starts, so no database
connection waits on the simulator. A search reads and changes nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath

from switchyard.platform.console.edge import console_access
from switchyard.platform.console.operator.pages import operator_page
from switchyard.platform.console.operator.queries import TenantSummary, tenant_summary
from switchyard.platform.db import UNSCOPED, Database, TenantScope
from switchyard.platform.deps import DbSession
from switchyard.platform.http.errors import NotFound
from switchyard.platform.settings import Settings
from switchyard.platform.simulation.capacity import (
    DEFAULT_REPLICAS,
    DEFAULT_TPOT_MS,
    DEFAULT_TTFT_MS,
    MAX_CONFIGURATIONS,
    TIME_LIMIT_S,
    CapacityError,
    CapacityQuestion,
    CapacitySearchBusy,
    CurrentDeployment,
    InstanceChoice,
    current_deployment,
    default_tps,
    instance_choices,
    run_capacity_search,
    simulator_model,
)
from switchyard.platform.simulation.traffic import MAX_REQUESTS, models_with_traffic, period_ending, recorded_workload

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["CapacityForm", "CapacityPageController", "read_capacity_form"]

_OPERATOR = console_access("operator")
PERIOD_DAYS = (1, 7, 14, 30)
DEFAULT_DAYS = 7
MODELS_LISTED_DAYS = 30  # the model choice lists what the tenant called in the longest period offered
MAX_TPS = 6
MAX_REPLICA_COUNTS = 4
MAX_REPLICAS = 64
MAX_OBJECTIVE_MS = 600_000.0
MAX_ASSUMED_USD_PER_HOUR = Decimal(100_000)


@dataclass(frozen=True, slots=True)
class CapacityForm:
    """The capacity form, read and checked; ``model`` None: the tenant's most-used model in the period."""

    days: int
    model: str | None
    question: CapacityQuestion


def _numbers(text: str, what: str, *, most: int, largest: int) -> tuple[int, ...]:
    parts = [p.strip() for p in text.replace(" ", ",").split(",") if p.strip()]
    if not parts:
        raise CapacityError(f"{what}: give one whole number at least, such as 1,2")
    if len(parts) > most:
        raise CapacityError(f"{what}: {most} values at most (got {len(parts)})")
    try:
        values = tuple(sorted({int(p) for p in parts}))
    except ValueError:
        raise CapacityError(f"{what}: whole numbers separated by commas, such as 1,2 (got {text.strip()!r})") from None
    if values[0] < 1 or values[-1] > largest:
        raise CapacityError(f"{what}: between 1 and {largest}")
    return values


def _objective(text: str, what: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise CapacityError(f"{what}: a number of milliseconds, or empty for the default (got {text!r})") from None
    if not 0 < value <= MAX_OBJECTIVE_MS:  # NaN fails this too
        raise CapacityError(f"{what}: more than 0 and at most {MAX_OBJECTIVE_MS:,.0f} ms")
    return value


def _assumed_price(text: str, name: str) -> Decimal:
    """An assumed price per instance-hour for an instance type the catalog does not price."""
    try:
        usd = Decimal(text.strip().lstrip("$"))
    except InvalidOperation:
        usd = Decimal(0)
    if not usd.is_finite() or not 0 < usd <= MAX_ASSUMED_USD_PER_HOUR:
        raise CapacityError(
            f"{name} has no price in the catalog: give it an assumed price per hour in USD (such as 120.50), "
            "or leave it out"
        )
    return usd


def read_capacity_form(form: Any) -> CapacityForm:
    """The form as a ``CapacityForm``; raises ``CapacityError`` saying what is wrong."""
    try:
        days = int(str(form.get("days", DEFAULT_DAYS)).strip())
    except ValueError:
        raise CapacityError("period: choose one of the periods offered") from None
    if days not in PERIOD_DAYS:
        raise CapacityError("period: choose one of the periods offered")
    catalog = {c.name: c for c in instance_choices()}
    instances = tuple(dict.fromkeys(str(i) for i in form.getall("instance", [])))
    unknown = [i for i in instances if i not in catalog]
    if unknown:
        raise CapacityError(f"instance types: {unknown[0]!r} is not in the simulator's catalog")
    if not instances:
        raise CapacityError("instance types: choose one at least")
    assumed = tuple(
        (name, _assumed_price(str(form.get(f"price.{name}", "")), name))
        for name in instances
        if catalog[name].price_usd_per_hour is None
    )
    question = CapacityQuestion(
        instances=instances,
        tps=_numbers(str(form.get("tp", "")), "TP degrees", most=MAX_TPS, largest=1024),
        replicas=_numbers(str(form.get("replicas", "")), "replicas", most=MAX_REPLICA_COUNTS, largest=MAX_REPLICAS),
        ttft_ms=_objective(str(form.get("ttft_ms", "")), "p90 TTFT objective"),
        tpot_ms=_objective(str(form.get("tpot_ms", "")), "p90 TPOT objective"),
        assumed_prices=assumed,
    )
    if question.size > MAX_CONFIGURATIONS:
        raise CapacityError(
            f"{question.size} configurations asked ({len(instances)} instance types x {len(question.tps)} TP degrees "
            f"x {len(question.replicas)} replica counts); this page searches {MAX_CONFIGURATIONS} at most"
        )
    model = str(form.get("model", "")).strip()[:200] or None
    return CapacityForm(days=days, model=model, question=question)


class CapacityPageController(Controller):
    path = "/tenants/{tenant_id:str}/capacity"

    @get("/", opt=_OPERATOR)
    async def capacity(
        self, request: Request[Any, Any, Any], db_session: DbSession, tenant_id: FromPath[str]
    ) -> Response[str]:
        """The form, its defaults taken from the tenant's most-used model and where it is deployed today."""
        tenant = await _tenant(db_session, tenant_id)
        return await self._page(request, db_session, tenant)

    async def _page(
        self, request: Request[Any, Any, Any], session: AsyncSession, tenant: TenantSummary, **context: Any
    ) -> Response[str]:
        settings: Settings = request.app.state.settings
        since, until = period_ending(period=timedelta(days=MODELS_LISTED_DAYS))
        models = await models_with_traffic(session, scope=TenantScope(tenant.id), since=since, until=until)
        current = current_deployment(models[0].model, settings.fleet_file) if models else None
        choices = instance_choices()
        defaults = {
            "days": str(DEFAULT_DAYS),
            "model": "",
            "instance": [c.name for c in choices if c.price_usd_per_hour is not None and _default_instance(c, current)],
            "prices": {},
            "tp": ",".join(str(tp) for tp in default_tps(current)),
            "replicas": ",".join(str(r) for r in DEFAULT_REPLICAS),
            "ttft_ms": "",
            "tpot_ms": "",
        }
        return operator_page(
            request,
            "operator_capacity.html",
            tenant=tenant,
            models=models,
            models_days=MODELS_LISTED_DAYS,
            current=current,
            choices=choices,
            periods=PERIOD_DAYS,
            values={**defaults, **context.pop("values", {})},
            limits={
                "requests": MAX_REQUESTS,
                "configurations": MAX_CONFIGURATIONS,
                "time_limit_s": TIME_LIMIT_S,
                "ttft_ms": DEFAULT_TTFT_MS,
                "tpot_ms": DEFAULT_TPOT_MS,
            },
            **context,
        )

    @post("/", opt=_OPERATOR, status_code=200)
    async def search(self, request: Request[Any, Any, Any], tenant_id: FromPath[str]) -> Response[str]:
        """Run the search on the tenant's recorded traffic and show the answer under the form."""
        form = await request.form()
        values = {
            "days": str(form.get("days", "")),
            "model": str(form.get("model", "")),
            "instance": [str(i) for i in form.getall("instance", [])],
            "prices": {c.name: str(form.get(f"price.{c.name}", ""))[:40] for c in instance_choices()},
            **{name: str(form.get(name, "")) for name in ("tp", "replicas", "ttft_ms", "tpot_ms")},
        }
        settings: Settings = request.app.state.settings
        database: Database = request.app.state.database
        async with database.unit_of_work(UNSCOPED) as session:  # ends before the search: no connection waits on it
            tenant = await _tenant(session, tenant_id)
            try:
                asked = read_capacity_form(form)
            except CapacityError as error:
                return await self._page(request, session, tenant, values=values, error=str(error), status_code=400)
            since, until = period_ending(period=timedelta(days=asked.days))
            workload = await recorded_workload(
                session, scope=TenantScope(tenant_id), since=since, until=until, model=asked.model
            )
            if workload is None:
                whose = asked.model or "any model"
                notice = f"No recorded traffic of {whose} in the last {asked.days} days: nothing to search."
                return await self._page(request, session, tenant, values=values, notice=notice)
            if not workload.searchable:
                notice = (
                    f"Too little traffic of {workload.model} in the last {asked.days} days to search: "
                    f"{workload.recorded} request{'' if workload.recorded == 1 else 's'} (a search needs two at least, "
                    "at different times)."
                )
                return await self._page(request, session, tenant, values=values, notice=notice, workload=workload)
            try:
                model = simulator_model(workload.model, settings.fleet_file)
            except CapacityError as error:
                return await self._page(
                    request, session, tenant, values=values, error=str(error), workload=workload, status_code=400
                )
        current = current_deployment(workload.model, settings.fleet_file)
        context: dict[str, Any] = {"workload": workload, "days": asked.days}
        try:
            context["answer"] = await run_capacity_search(workload, asked.question, model=model, current=current)
        except CapacitySearchBusy as error:
            context.update(error=str(error), status_code=503, headers={"retry-after": "10"})
        except CapacityError as error:
            context.update(error=str(error), status_code=400)
        async with database.unit_of_work(UNSCOPED) as session:
            return await self._page(request, session, tenant, values=values, **context)


def _default_instance(choice: InstanceChoice, current: CurrentDeployment | None) -> bool:
    """Checked by default: where the model runs today, and every Trainium3 size."""
    return choice.family == "trn3" or (current is not None and choice.name == current.instance)


async def _tenant(session: AsyncSession, tenant_id: str) -> TenantSummary:
    found = await tenant_summary(session, tenant_id)
    if found is None:
        raise NotFound(f"no tenant {tenant_id!r}", param="tenant_id")
    return found
