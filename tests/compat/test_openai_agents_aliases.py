"""openai-agents' default model provider against a real Switchyard server: it reads a ``/`` in a model id as a
provider prefix, so Switchyard's alias without one is what an ``Agent(model=...)`` names.

Tracing is off in every run here, as the README tells users to do: left on, the SDK would export the run's traces
to OpenAI's servers with the client's key, which is a Switchyard key.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents.tracing.provider import DefaultTraceProvider
from agents.tracing.traces import NoOpTrace

from agents import Agent, MultiProvider, RunConfig, Runner, UserError, set_tracing_disabled

README = Path(__file__).parents[2] / "README.md"
ALIAS = "llama-3.1-8b-instruct"
SERVED = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
async def provider(live_server: Any) -> AsyncIterator[MultiProvider]:
    """The provider the SDK uses by default, given the Switchyard client (Chat Completions: no Responses API yet)."""
    async with openai.AsyncOpenAI(base_url=live_server.base_url, api_key=live_server.tenant_key, max_retries=0) as sdk:
        yield MultiProvider(openai_client=sdk, openai_use_responses=False)


def test_the_default_provider_refuses_a_served_name_with_a_slash(provider: MultiProvider) -> None:
    with pytest.raises(UserError, match="Unknown prefix: meta-llama"):
        provider.get_model(SERVED)


async def test_an_agent_on_the_alias_runs_through_the_default_provider(provider: MultiProvider) -> None:
    agent = Agent(name="assistant", instructions="Answer briefly.", model=ALIAS)
    result = await Runner.run(
        agent, "Say something", run_config=RunConfig(model_provider=provider, tracing_disabled=True)
    )
    assert isinstance(result.final_output, str)
    assert result.final_output
    assert result.raw_responses[-1].usage.output_tokens > 0


def test_the_names_the_readme_gives_turn_tracing_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    assert isinstance(DefaultTraceProvider().create_trace("run"), NoOpTrace)
    monkeypatch.delenv("OPENAI_AGENTS_DISABLE_TRACING")
    provider = DefaultTraceProvider()
    assert not isinstance(provider.create_trace("run"), NoOpTrace)
    provider.set_disabled(True)  # what set_tracing_disabled(True) does to the SDK's global provider
    assert isinstance(provider.create_trace("run"), NoOpTrace)
    assert callable(set_tracing_disabled)


@pytest.mark.slow  # starts a process
def test_the_readmes_openai_agents_example_runs_unchanged_against_the_server(live_server: Any) -> None:
    """The README's example, with only the address and the key of this server, in a fresh interpreter (it sets
    the SDK's process-wide defaults)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    (example,) = [b for b in blocks if "from agents import" in b]
    example = "\n".join(line.removeprefix("  ") for line in example.splitlines())
    assert "set_tracing_disabled(True)" in example
    assert 'base_url="http://127.0.0.1:8000/v1"' in example
    assert 'api_key="sy_..."' in example
    script = example.replace("http://127.0.0.1:8000/v1", live_server.base_url).replace("sy_...", live_server.tenant_key)
    env = {"PATH": "/usr/bin:/bin"}  # no OPENAI_API_KEY or other key the SDK could pick up
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip()
