"""The ``trainium-sim`` backend: a simulated deployment served on the wall clock (or as fast as possible).

``time_scale`` maps simulated seconds to wall seconds: 1.0 waits out the simulated latency, 0 answers as soon
as the simulation is done while still reporting simulated timings (tests use 0). Requests that arrive in the
same event-loop tick share the simulated batch.

The sim model's answer and the prompt's token count are worked out before the request joins the simulation. For a
light request (``light``: plain text of at most ``LIGHT_OUTPUT_TOKENS`` tokens without logprobs, after a prompt of
at most ``LIGHT_PROMPT_CHARS`` characters of plain strings: well under a millisecond) that happens on the event
loop; every other request's (tools, JSON, logprobs, long answers or prompts: up to tens of milliseconds within the
sim model's budget, more for a prompt of megabytes) in one of the deployment's ``ANSWER_THREADS`` worker threads,
so the loop goes on serving everyone else meanwhile. A request stopped while its answer is being worked out never
runs: its receipt is ``cancelled`` with no compute.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from switchyard.accelerator.pool.dispatcher import Dispatcher, Job
from switchyard.accelerator.pool.embeddings import (
    EMBEDDING_SHAPES,
    EmbeddingRequest,
    Embeddings,
    embedding_vector,
    input_tokens,
)
from switchyard.accelerator.pool.fleet import DeploymentSpec, simulated_deployment
from switchyard.accelerator.pool.prompt_blocks import PROMPT_BLOCK_TOKENS, prompt_block_hashes
from switchyard.accelerator.pool.sim_lm import Completion, complete
from switchyard.accelerator.pool.tokens import count_prompt_tokens
from switchyard.accelerator.pool.types import (
    ComputeReceipt,
    InferenceRequest,
    IssuedReceipts,
    PoolEvent,
    TextDelta,
    ToolCallDelta,
)
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import Deployment
from switchyard.accelerator.sim.engine import EngineConfig
from switchyard.accelerator.sim.point import simulate_point
from switchyard.accelerator.sim.prefix_calibration import prefix_caching_cost
from switchyard.accelerator.sim.requests import FinishedRequest

__all__ = ["BOUNDS_KEPT", "SimulatedDeployment", "compute_bound", "light", "max_chip_us"]

TICK_S = 0.002
ANSWER_THREADS = 4
LIGHT_OUTPUT_TOKENS = 1_000
LIGHT_PROMPT_CHARS = 32_768
LIGHT_PROMPT_MESSAGES = 256
BOUNDS_KEPT = 1_024


def light(request: InferenceRequest) -> bool:
    """Whether the sim model answers ``request`` cheaply enough to do it on the event loop (module docstring)."""
    if request.tools or request.top_logprobs is not None or len(request.messages) > LIGHT_PROMPT_MESSAGES:
        return False
    answer_format = request.response_format
    if answer_format is not None and not (isinstance(answer_format, Mapping) and answer_format.get("type") == "text"):
        return False
    if request.max_tokens is not None and request.max_tokens > LIGHT_OUTPUT_TOKENS:
        return False
    chars = 0
    for message in request.messages:
        if not isinstance(message, Mapping):
            return False
        content = message.get("content")
        if message.get("tool_calls") or not isinstance(content, str | None):
            return False
        chars += len(content or "")
    return chars <= LIGHT_PROMPT_CHARS


def _vectors(model: str, request: EmbeddingRequest, dimensions: int) -> tuple[tuple[float, ...], ...]:
    return tuple(embedding_vector(model, item, dimensions) for item in request.inputs)


def _answer(request: InferenceRequest) -> tuple[Completion, int, tuple[int, ...]]:
    """The sim model's answer, the prompt's tokens and its KV block ids: the request's CPU-heavy part."""
    hashes = prompt_block_hashes(request.tenant, request.messages, request.tools)
    return complete(request), count_prompt_tokens(request.messages, request.tools), hashes


def _session(request: InferenceRequest) -> str | None:
    """The router's session: the request's hint, within its tenant (two tenants' hints never meet)."""
    return None if request.session is None else f"{request.tenant}\x1f{request.session}"


class SimulatedDeployment:
    """One served model on a simulated cluster of ``replicas`` × ``tp`` ranks of an instance type."""

    def __init__(
        self, spec: DeploymentSpec, *, time_scale: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        self.spec = spec
        self.deployment = simulated_deployment(spec)
        self._compute_bound = compute_bound(self.deployment, spec)
        config = EngineConfig(max_batch=spec.max_batch)
        self.cluster = Cluster(self.deployment, spec.replicas, spec.policy, config=config)
        self.dispatcher = Dispatcher(self.cluster, capacity=spec.replicas * spec.max_batch)
        self.time_scale = time_scale
        self._clock = clock
        self._origin = clock()
        self._ids = itertools.count(1)
        self._waiters: dict[int, asyncio.Future[FinishedRequest]] = {}
        self._progress: dict[int, tuple[int, asyncio.Event]] = {}
        self._jobs: dict[str, list[Job]] = {}  # by request id: a request repeated after a crash may overlap itself
        self._driver: asyncio.Task[None] | None = None
        self._drain_scheduled = False
        self._issued = IssuedReceipts()
        self._preparing: dict[str, list[asyncio.Event]] = {}  # by request id: answers being worked out, to stop
        self._answer_threads = ThreadPoolExecutor(max_workers=ANSWER_THREADS, thread_name_prefix="sim-answer")

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def context_window(self) -> int:
        return int(self.deployment.model.max_position_embeddings)

    async def aclose(self) -> None:
        """Let the answer threads go once the answers being worked out are done (in the background)."""
        self._answer_threads.shutdown(wait=False)

    def max_chip_us(self, prompt_tokens: int, output_tokens: int) -> int:
        return self._compute_bound(prompt_tokens, output_tokens)

    def take_receipts(self) -> list[tuple[ComputeReceipt, float]]:
        return self._issued.take()

    def busy_chip_us(self) -> dict[str, tuple[str, int]]:
        """Each replica's busy chip-µs since start (``{replica: (instance type, chip-µs)}``): the engine's
        iteration time × chips, the same quantity its receipts split exactly."""
        return {
            f"{self.spec.name}/{replica.index}": (self.spec.instance, replica.chip_us_total)
            for replica in self.cluster.replicas
        }

    def _sim_now(self) -> float:
        if self.time_scale == 0:
            return self.dispatcher.now
        # The wall clock, never before the time the cluster was last advanced to; not a replica's own clock, which
        # runs ahead of the wall by the iteration that started before it (a replica runs every iteration that starts
        # before the time asked, whole): advanced to each other's clocks, two replicas leapfrogged each other an
        # iteration per tick, and one whose iterations ended at other times than its neighbour's streamed and
        # finished its requests seconds early.
        return max(self.cluster.now, (self._clock() - self._origin) / self.time_scale)

    async def generate(self, request: InferenceRequest) -> AsyncIterator[PoolEvent]:
        """Stream the simulated model's answer, paced by the simulation, then its ``ComputeReceipt``."""
        stopped = asyncio.Event()  # set by cancel() while the answer is worked out in a thread
        if light(request):
            completion, prompt_tokens, block_hashes = _answer(request)
        else:
            preparing = self._preparing.setdefault(request.request_id, [])
            preparing.append(stopped)
            try:
                loop = asyncio.get_running_loop()
                answer = await loop.run_in_executor(self._answer_threads, _answer, request)
                completion, prompt_tokens, block_hashes = answer
            finally:
                preparing.remove(stopped)
                if not preparing:
                    self._preparing.pop(request.request_id, None)
        job = Job(
            job_id=next(self._ids),
            tenant=request.tenant,
            arrival_s=self._sim_now(),
            prompt_tokens=prompt_tokens,
            output_tokens=max(1, completion.completion_tokens),
            priority=int(request.priority),
            weight=request.weight,
            session=_session(request),
            block_hashes=block_hashes,
            hash_block_tokens=PROMPT_BLOCK_TOKENS,
        )
        future: asyncio.Future[FinishedRequest] = asyncio.get_running_loop().create_future()
        self._waiters[job.job_id] = future
        self._jobs.setdefault(request.request_id, []).append(job)
        progressed = asyncio.Event()
        self._progress[job.job_id] = (0, progressed)
        if stopped.is_set():  # stopped before it reached the pool: it ends at once, with no compute
            future.set_result(self._never_ran(job))
        else:
            self.dispatcher.offer(job, job.arrival_s)
            self._wake()
        sent = 0
        try:
            # On a wall clock, text streams as the simulated replica generates it; tool calls come whole at the end.
            while not future.done():
                waiting: asyncio.Future[Any] = asyncio.ensure_future(progressed.wait())
                pending: list[asyncio.Future[Any]] = [future, waiting]
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                progressed.clear()
                generated = self._progress[job.job_id][0]
                while sent < min(generated, len(completion.text_tokens)):
                    yield _text_delta(completion, sent)
                    sent += 1
            result = future.result()
        finally:
            self._waiters.pop(job.job_id, None)
            self._progress.pop(job.job_id, None)
            same = self._jobs.get(request.request_id, [])
            if job in same:
                same.remove(job)
            if not same:
                self._jobs.pop(request.request_id, None)
        if not result.cancelled:
            for event in self._deltas(completion)[sent:]:
                yield event
        receipt = self._receipt(request, job, result, completion)
        self._issued.add(receipt)
        yield receipt

    async def embed(self, request: EmbeddingRequest) -> AsyncIterator[Embeddings | ComputeReceipt]:
        """Encode each input in a prefill-only pass (one job that ends with its first token: no decode) on the
        replicas, queued and batched like any request; then the vectors and the call's ``ComputeReceipt``."""
        loop = asyncio.get_running_loop()
        jobs: list[Job] = []
        futures: list[asyncio.Future[FinishedRequest]] = []
        for tokens in input_tokens(request.inputs):
            job = Job(
                job_id=next(self._ids),
                tenant=request.tenant,
                arrival_s=self._sim_now(),
                prompt_tokens=tokens,
                output_tokens=1,
                priority=int(request.priority),
                weight=request.weight,
                session=request.user,
            )
            futures.append(loop.create_future())
            self._waiters[job.job_id] = futures[-1]
            self._jobs.setdefault(request.request_id, []).append(job)
            self.dispatcher.offer(job, job.arrival_s)
            jobs.append(job)
        self._wake()
        try:
            results = await asyncio.gather(*futures)
        finally:
            same = self._jobs.get(request.request_id, [])
            for job in jobs:
                self._waiters.pop(job.job_id, None)
                if job in same:
                    same.remove(job)
            if not same:
                self._jobs.pop(request.request_id, None)
        cancelled = any(result.cancelled for result in results)
        timed = list(zip(jobs, results, strict=True))
        if not cancelled:
            dimensions = request.dimensions or EMBEDDING_SHAPES[self.spec.model].dimensions
            loop = asyncio.get_running_loop()
            # 2,048 inputs take a quarter of a second and more: never on the loop
            vectors = await loop.run_in_executor(self._answer_threads, _vectors, self.spec.model, request, dimensions)
            yield Embeddings(vectors)
        receipt = ComputeReceipt(
            tenant=request.tenant,
            request_id=request.request_id,
            model=self.spec.name,
            instance_type=self.spec.instance,
            replica=f"{self.spec.name}/" + "+".join(str(index) for index in sorted({r.replica for r in results})),
            chip_us=sum(result.chip_us for result in results),
            prompt_tokens=sum(job.prompt_tokens for job in jobs),
            completion_tokens=0,
            queue_ms=max(max(0.0, (r.scheduled_s - job.arrival_s) * 1e3) for job, r in timed),
            ttft_ms=max((r.finish_s - job.arrival_s) * 1e3 for job, r in timed),  # until the last vector
            decode_ms=0.0,
            finish_reason="cancelled" if cancelled else "stop",
        )
        self._issued.add(receipt)
        yield receipt

    def cancel(self, request_id: str) -> None:
        """Stop a request whose client went away; its receipt then carries the compute used so far (none when its
        answer was still being worked out)."""
        for stopped in self._preparing.get(request_id, ()):
            stopped.set()
        for job in list(self._jobs.get(request_id, ())):
            self._stop(job)

    def _stop(self, job: Job) -> None:
        queued = self.dispatcher.abort(job.job_id)
        if queued is not None:  # never reached the cluster: nothing was computed
            self._resolve([(job, self._never_ran(job))])
        else:
            self._wake()

    def _never_ran(self, job: Job) -> FinishedRequest:
        now = self._sim_now()
        never_ran = FinishedRequest(job.job_id, -1, job.arrival_s, now, now, now, job.prompt_tokens, 0, 0)
        return replace(never_ran, cancelled=True)

    @staticmethod
    def _deltas(completion: Completion) -> list[PoolEvent]:
        events: list[PoolEvent] = [_text_delta(completion, i) for i in range(len(completion.text_tokens))]
        events += [ToolCallDelta(i, call) for i, call in enumerate(completion.tool_calls)]
        return events

    def _receipt(
        self, request: InferenceRequest, job: Job, result: FinishedRequest, completion: Completion
    ) -> ComputeReceipt:
        return ComputeReceipt(
            tenant=request.tenant,
            request_id=request.request_id,
            model=self.spec.name,
            instance_type=self.spec.instance,
            replica=f"{self.spec.name}/{result.replica}",
            chip_us=result.chip_us,
            prompt_tokens=job.prompt_tokens,
            cached_tokens=result.cached_tokens,
            cache_saved_chip_us=result.cache_saved_chip_us,
            completion_tokens=result.output_tokens if result.cancelled else completion.completion_tokens,
            queue_ms=max(0.0, (result.scheduled_s - job.arrival_s) * 1e3),
            ttft_ms=(result.first_token_s - job.arrival_s) * 1e3,
            decode_ms=(result.finish_s - result.first_token_s) * 1e3,
            finish_reason="cancelled" if result.cancelled else completion.finish_reason,
            tool_calls=() if result.cancelled else completion.tool_calls,
        )

    def _wake(self) -> None:
        if self.time_scale == 0:
            if not self._drain_scheduled:
                self._drain_scheduled = True
                asyncio.get_running_loop().call_soon(self._drain)
        elif self._driver is None or self._driver.done():
            self._driver = asyncio.get_running_loop().create_task(self._drive())

    def _resolve(self, finished: list[tuple[Job, FinishedRequest]]) -> None:
        for job, result in finished:
            future = self._waiters.get(job.job_id)
            if future is not None and not future.done():
                future.set_result(result)

    def _drain(self) -> None:
        self._drain_scheduled = False
        self._resolve(self.dispatcher.advance(math.inf))

    async def _drive(self) -> None:
        while not self.dispatcher.idle:
            self._resolve(self.dispatcher.advance(self._sim_now()))
            for job_id, generated in self.cluster.progress().items():
                seen = self._progress.get(job_id)
                if seen is not None and generated > seen[0]:
                    self._progress[job_id] = (generated, seen[1])
                    seen[1].set()
            await asyncio.sleep(TICK_S)

    async def status(self) -> dict[str, Any]:
        """Per-replica utilisation, queue depth and KV usage, for the operator's fleet view."""
        now = max(self.dispatcher.now, 1e-9)
        replicas = []
        for replica in self.cluster.replicas:
            replicas.append(
                {
                    "replica": f"{self.spec.name}/{replica.index}",
                    "busy_fraction": round(min(1.0, replica.busy_s / now), 4),
                    "kv_used_fraction": round(replica.used_blocks / max(1, replica.total_blocks), 4),
                    "queued": replica.queued,
                    "running": replica.running,
                    "chip_us": replica.chip_us_total,
                }
            )
        return {
            "model": self.spec.name,
            "backend": "trainium-sim",
            "instance_type": self.spec.instance,
            "tp": self.spec.tp,
            "chips_per_replica": self.deployment.chips,
            "queued": len(self.dispatcher.queue),
            "running": len(self.dispatcher.running),
            "simulated_time_s": round(self.dispatcher.now, 6),
            "replicas": replicas,
        }


def _text_delta(completion: Completion, index: int) -> TextDelta:
    """The completion's ``index``-th text token, with its logprob when the request asked for logprobs."""
    logprobs = completion.text_logprobs[index : index + 1]
    return TextDelta(completion.text_tokens[index], logprobs)


def max_chip_us(deployment: Deployment, spec: DeploymentSpec, prompt_tokens: int, output_tokens: int) -> int:
    """Upper bound of one request's compute: alone on a replica (batch 1), so nothing is shared, its prefill in the
    prefix cache's block layout (a little slower) and nothing cached (a cached token costs less than a computed one)."""
    point = simulate_point(
        deployment.model,
        deployment.instance,
        spec.tp,
        1,
        max(1, prompt_tokens),
        max(1, output_tokens),
        spec.weights,
        **spec.speculation,  # a draft's steps are part of what the request costs
    )
    return math.ceil(point.chip_seconds * 1e6 * prefix_caching_cost().block_layout_overhead)


def compute_bound(deployment: Deployment, spec: DeploymentSpec) -> Callable[[int, int], int]:
    """:func:`max_chip_us` of one deployment by (prompt tokens, output tokens), remembering the last
    ``BOUNDS_KEPT`` answers: every admitted call asks (its budget hold is priced on it), mostly with the same few
    sizes, and each answer is a cost-model evaluation on the event loop."""
    return functools.lru_cache(maxsize=BOUNDS_KEPT)(functools.partial(max_chip_us, deployment, spec))
