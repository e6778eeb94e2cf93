"""The accelerator pool: served models on simulated Trainium fleets or real upstreams, metered per request."""

from __future__ import annotations

from switchyard.accelerator.pool.embeddings import (
    EMBEDDING_SHAPES,
    EmbeddingInput,
    EmbeddingRequest,
    Embeddings,
    EmbeddingShape,
    embedding_vector,
    input_tokens,
)
from switchyard.accelerator.pool.fair_queue import FairQueue
from switchyard.accelerator.pool.fleet import DEFAULT_FLEET, DeploymentSpec, load_fleet, model_aliases, parse_fleet
from switchyard.accelerator.pool.fleet_server import FleetServer
from switchyard.accelerator.pool.pool import AcceleratorPool, Backend
from switchyard.accelerator.pool.remote_backend import RemoteSimulatedDeployment, reload_fleet_process
from switchyard.accelerator.pool.sim_backend import SimulatedDeployment
from switchyard.accelerator.pool.sim_lm import Completion, complete
from switchyard.accelerator.pool.tokens import count_prompt_tokens, count_prompt_tokens_off_loop, count_tokens
from switchyard.accelerator.pool.types import (
    ComputeReceipt,
    InferenceRequest,
    PoolEvent,
    Priority,
    TextDelta,
    TokenLogprob,
    ToolCall,
    ToolCallDelta,
)
from switchyard.accelerator.pool.upstream_backend import UpstreamDeployment, UpstreamError

__all__ = [
    "DEFAULT_FLEET",
    "EMBEDDING_SHAPES",
    "AcceleratorPool",
    "Backend",
    "Completion",
    "ComputeReceipt",
    "DeploymentSpec",
    "EmbeddingInput",
    "EmbeddingRequest",
    "EmbeddingShape",
    "Embeddings",
    "FairQueue",
    "FleetServer",
    "InferenceRequest",
    "PoolEvent",
    "Priority",
    "RemoteSimulatedDeployment",
    "SimulatedDeployment",
    "TextDelta",
    "TokenLogprob",
    "ToolCall",
    "ToolCallDelta",
    "UpstreamDeployment",
    "UpstreamError",
    "complete",
    "count_prompt_tokens",
    "count_prompt_tokens_off_loop",
    "count_tokens",
    "embedding_vector",
    "input_tokens",
    "load_fleet",
    "model_aliases",
    "parse_fleet",
    "reload_fleet_process",
]
