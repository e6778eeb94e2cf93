from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from switchyard.accelerator.errors import ConfigurationError, DoesNotFitError, UnknownNameError
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.costmodel import bucket, forward_time_s
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.point import PromptEncoding, point_features, prompt_encoding, simulate_point


def _decode_time(model: str, instance: str, tp: int, batch: int, ctx: int, weights: str = "bf16") -> float:
    dep = make_deployment(model, instance, tp, weights)
    _, coeffs = coefficients_for(dep.instance)
    return float(forward_time_s(dep, coeffs.decode, batch, batch * ctx, batch * ctx))


def test_decode_time_is_monotone_in_batch_and_context() -> None:
    dep = make_deployment("meta-llama/Llama-3.1-70B", "trn2.48xlarge", 64)
    _, c = coefficients_for(dep.instance)
    batch = np.arange(1, 65, dtype=np.float64)
    by_batch = forward_time_s(dep, c.decode, batch, batch * 2048, batch * 2048)
    assert np.all(np.diff(by_batch) > 0)
    ctx = np.arange(128, 32768, 512, dtype=np.float64)
    by_ctx = forward_time_s(dep, c.decode, 8.0, 8 * ctx, 8 * ctx)
    assert np.all(np.diff(by_ctx) > 0)


def test_prefill_time_grows_superlinearly_with_prompt_length() -> None:
    dep = make_deployment("meta-llama/Llama-3.1-8B", "trn1.32xlarge", 32)
    _, c = coefficients_for(dep.instance)
    n = np.array([1024.0, 2048.0, 4096.0, 8192.0])
    t = forward_time_s(dep, c.prefill, n, n * n, 0.0)
    assert np.all(np.diff(t) > 0)
    # attention makes each token dearer as the prompt grows (beyond the fixed per-pass overheads)
    fixed = float(forward_time_s(dep, c.prefill, 0.0, 0.0, 0.0))
    assert np.all(np.diff((t - fixed) / n) > 0)


def test_more_tp_is_faster_with_diminishing_returns() -> None:
    times = [_decode_time("meta-llama/Meta-Llama-3-8B", "trn1.32xlarge", tp, 1, 2048) for tp in (2, 4, 8, 16, 32)]
    assert times[0] > times[1] > times[2]
    gains = [a / b for a, b in itertools.pairwise(times)]
    assert gains[-1] < gains[0]  # collectives and fixed overheads set a floor
    assert gains[-1] < 1.5


def test_fp8_and_int8_weights_are_faster_than_bf16() -> None:
    bf16 = simulate_point("meta-llama/Llama-3.1-70B", "trn2.48xlarge", 64, 8, 2048, 256, "bf16")
    fp8 = simulate_point("meta-llama/Llama-3.1-70B", "trn2.48xlarge", 64, 8, 2048, 256, "fp8")
    int8 = simulate_point("meta-llama/Llama-3.1-70B", "trn2.48xlarge", 64, 8, 2048, 256, "int8")
    assert fp8.ttft_ms < bf16.ttft_ms  # FP8 matmuls run at twice the BF16 rate on Trainium2
    assert fp8.tpot_ms < bf16.tpot_ms
    assert int8.tpot_ms < bf16.tpot_ms
    assert int8.ttft_ms == pytest.approx(bf16.ttft_ms, rel=0.1)  # weight-only int8 computes in BF16


def test_model_that_does_not_fit_says_what_would() -> None:
    with pytest.raises(DoesNotFitError, match=r"tp >= (\d+)") as exc:
        make_deployment("meta-llama/Llama-2-70b-hf", "trn1.32xlarge", 4)
    suggested = int(str(exc.value).rsplit("tp >= ", 1)[1].split()[0])
    make_deployment("meta-llama/Llama-2-70b-hf", "trn1.32xlarge", suggested)
    with pytest.raises(DoesNotFitError, match=r"does not fit on one inf2\.xlarge"):
        make_deployment("meta-llama/Llama-3.1-405B", "inf2.xlarge", 2)


def test_tp_must_divide_heads_on_gpus_and_is_padded_on_neuron() -> None:
    with pytest.raises(ConfigurationError, match=r"valid TP degrees on p5\.48xlarge: \[1, 2, 4, 8\]"):
        make_deployment("meta-llama/Llama-3.1-8B", "p5.48xlarge", 3)
    dep = make_deployment("meta-llama/Llama-2-13b-hf", "trn1.32xlarge", 32)
    assert dep.heads == 64  # 40 heads padded to 2 per NeuronCore
    with pytest.raises(ConfigurationError, match="outside"):
        make_deployment("meta-llama/Llama-3.1-8B", "trn1.32xlarge", 64)


def test_batch_beyond_kv_capacity_reports_the_largest_that_fits() -> None:
    with pytest.raises(DoesNotFitError, match=r"at most batch (\d+) fits") as exc:
        simulate_point("meta-llama/Llama-2-70b-hf", "inf2.48xlarge", 24, 4096, 4096, 4096)
    fits = int(str(exc.value).rsplit("at most batch ", 1)[1].split()[0])
    assert fits >= 1
    simulate_point("meta-llama/Llama-2-70b-hf", "inf2.48xlarge", 24, int(bucket(fits, 1)[()]) // 2, 4096, 4096)


def test_switched_fabric_has_lower_collective_latency_than_a_torus() -> None:
    torus = make_deployment("meta-llama/Llama-3.1-405B", "trn2u.48xlarge", 128)
    switched = make_deployment("meta-llama/Llama-3.1-405B", "trn3-gen1-ultraserver", 128)
    assert torus.chips == switched.chips == 32
    assert switched.collective_latency_s_per_layer < torus.collective_latency_s_per_layer


def test_point_results_are_consistent() -> None:
    r = simulate_point("meta-llama/Llama-2-70b-hf", "trn1.32xlarge", 32, 4, 1024, 512)
    assert r.chips == 16
    assert r.e2e_ms > r.ttft_ms + 510 * r.tpot_ms * 0.9
    assert r.chip_seconds == pytest.approx(16 * r.e2e_ms / 1000)
    assert r.output_tokens_per_s == pytest.approx(4 * 512 / (r.e2e_ms / 1000))
    longer = simulate_point("meta-llama/Llama-2-70b-hf", "trn1.32xlarge", 32, 4, 2048, 512)
    assert longer.ttft_ms > r.ttft_ms
    bigger = simulate_point("meta-llama/Llama-2-70b-hf", "trn1.32xlarge", 32, 8, 1024, 512)
    assert bigger.output_tokens_per_s > r.output_tokens_per_s


def test_a_batch_encoded_prompt_by_prompt_pays_per_prompt_passes_and_batch_squared_attention() -> None:
    dep = make_deployment("meta-llama/Llama-2-13b-hf", "inf2.48xlarge", 24)
    one, _, _ = point_features(dep, 1, 4096, 16)
    matmul, attention, memory, _, layers, step, prompts = range(7)
    batched, _, _ = point_features(dep, 8, 4096, 16, PromptEncoding.BATCHED)
    per_prompt, _, _ = point_features(dep, 8, 4096, 16, PromptEncoding.PER_PROMPT)
    assert batched[matmul] == pytest.approx(8 * one[matmul])
    assert batched[attention] == pytest.approx(8 * one[attention])
    assert batched[memory] == pytest.approx(one[memory])  # one pass reads the weights once
    assert batched[layers] == one[layers]
    assert per_prompt[matmul] == pytest.approx(8 * one[matmul])
    assert per_prompt[attention] == pytest.approx(64 * one[attention])  # each pass attends over the batch
    assert per_prompt[memory] == pytest.approx(8 * one[memory])
    assert per_prompt[layers] == 8 * one[layers]
    assert per_prompt[step] == batched[step] == 1.0  # the host step is paid once for the batch
    assert per_prompt[prompts] == batched[prompts] == 8 * one[prompts] == 8.0  # and a per-prompt cost


def test_point_mode_reproduces_an_older_stack_on_request() -> None:
    args = ("meta-llama/Llama-2-13b-hf", "inf2.48xlarge", 24, 8, 4096, 256)
    newest = simulate_point(*args)
    newer = simulate_point(*args, stack="transformers-neuronx 2.18.1")
    old = simulate_point(*args, stack="transformers-neuronx 2.18.0")
    assert newest.coefficients_group == "inf2"  # NxD Inference, the newest stack measured on inf2
    assert old.coefficients_group == "inf2/transformers-neuronx 2.18.0"
    assert old.ttft_ms > 2 * newer.ttft_ms  # 2.18.0's prompt-by-prompt encoding of a long batch
    assert prompt_encoding("transformers-neuronx 2.18.0") is PromptEncoding.PER_PROMPT
    assert prompt_encoding("transformers-neuronx 2.18.1") is prompt_encoding(None) is PromptEncoding.BATCHED
    with pytest.raises(UnknownNameError, match=re.escape("Did you mean: transformers-neuronx 2.18.1")):
        simulate_point(*args, stack="transformers-neuronx 2.18.2")
    with pytest.raises(UnknownNameError, match="NxD Inference"):
        simulate_point("meta-llama/Llama-2-13b-hf", "trn2.48xlarge", 8, 1, 128, 16, stack="transformers-neuronx 2.18.0")
    with pytest.raises(ConfigurationError, match="no calibrated software stacks"):
        simulate_point("meta-llama/Llama-3.1-8B", "cs-3", 1, 1, 128, 16, stack="transformers-neuronx 2.18.0")


def test_moe_decode_reads_fewer_weights_than_a_dense_model_of_the_same_size() -> None:
    moe = simulate_point("Qwen/Qwen3-235B-A22B", "trn2.48xlarge", 64, 1, 512, 64)
    dense = simulate_point("meta-llama/Llama-3.1-405B", "trn2.48xlarge", 64, 1, 512, 64)
    assert moe.tpot_ms < dense.tpot_ms / 2


def test_expert_parallelism_trades_narrow_expert_shards_for_all_to_alls() -> None:
    model = "Qwen/Qwen3-235B-A22B"  # experts 1,536 wide: sliced 64 ways they under-fill a 128-wide PE array
    sliced = make_deployment(model, "trn2.48xlarge", 64)
    ep = make_deployment(model, "trn2.48xlarge", 64, expert_parallel=True)
    assert ep.linear_flops_per_token < sliced.linear_flops_per_token
    assert ep.collective_s_per_layer_token > sliced.collective_s_per_layer_token  # k copies of each token move
    slow = simulate_point(model, "trn2.48xlarge", 64, 8, 2048, 64)
    fast = simulate_point(model, "trn2.48xlarge", 64, 8, 2048, 64, expert_parallel=True)
    assert fast.ttft_ms < slow.ttft_ms
    with pytest.raises(ConfigurationError, match="mixture-of-experts"):
        make_deployment("meta-llama/Llama-3.1-8B", "trn2.48xlarge", 8, expert_parallel=True)


def test_all_to_all_is_cheaper_on_a_switched_fabric_than_on_a_torus() -> None:
    model = "deepseek-ai/DeepSeek-V3"
    torus = make_deployment(model, "trn2u.48xlarge", 128, "fp8", expert_parallel=True)
    switched = make_deployment(model, "trn3-gen1-ultraserver", 128, "fp8", expert_parallel=True)
    assert torus.chips == switched.chips == 32
    assert switched.collective_latency_s_per_layer < torus.collective_latency_s_per_layer / 4
