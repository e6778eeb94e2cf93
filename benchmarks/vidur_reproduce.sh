#!/usr/bin/env bash
# Reproduce Vidur 0.0.26's A100 figures that benchmarks/vidur_compare.py compares against, and write them to
# benchmarks/data/vidur_a100_reference.json. Recipe of the project's Vidur notes: PyPI vidur==0.0.26 in its own
# virtual environment (outside the repository), offline profiling data taken from a git checkout of
# microsoft/vidur (data files only, nothing of its code is used here).
#
#   VIDUR_GIT=/path/to/microsoft/vidur/.git [WORK=/tmp/vidur] benchmarks/vidur_reproduce.sh
#
# About 3 minutes on a 2-core machine (1 minute to train Vidur's predictor on first use).
set -euo pipefail
: "${VIDUR_GIT:?set VIDUR_GIT to a git directory of github.com/microsoft/vidur}"
WORK=${WORK:-/tmp/vidur}
OUT_JSON=${OUT_JSON:-$(cd "$(dirname "$0")" && pwd)/data/vidur_a100_reference.json}
mkdir -p "$WORK"
[ -x "$WORK/vidur-venv/bin/python" ] || { python3 -m venv "$WORK/vidur-venv" && "$WORK/vidur-venv/bin/pip" install -q vidur==0.0.26; }

# Offline HF-hub-style cache of the profiling data, and the conversation trace.
R=$WORK/vidur026-run; C=$R/.vidur_cache/profiling_data; SHA=0000000000000000000000000000000000000001
mk() { d=$C/$1/datasets--local--$2; mkdir -p "$d/refs" "$d/snapshots/$SHA"; printf $SHA > "$d/refs/main"; echo "$d/snapshots/$SHA"; }
CD=$(mk compute a100-llama-2-70b-hf); ND=$(mk network a100-dgx)
git -C "$VIDUR_GIT" show HEAD:data/profiling/compute/a100/meta-llama/Llama-2-70b-hf/mlp.csv | xz -1 > "$CD/mlp.csv.xz"
git -C "$VIDUR_GIT" show ee3dec76948e46c3f686a111198e9c5703908553 | xz -1 > "$CD/attention.csv.xz"  # old attention.csv
printf '{"model": "meta-llama/Llama-2-70b-hf", "device_sku": "a100"}' > "$CD/config.json"
git -C "$VIDUR_GIT" show HEAD:data/profiling/network/a100_dgx/all_reduce.csv | xz -1 > "$ND/all_reduce.csv.xz"
git -C "$VIDUR_GIT" show HEAD:data/profiling/network/a100_dgx/send_recv.csv | xz -1 > "$ND/send_recv.csv.xz"
printf '{"sku": "a100_dgx"}' > "$ND/config.json"
mkdir -p "$R/data/processed_traces"
git -C "$VIDUR_GIT" show HEAD:data/processed_traces/splitwise_conv.csv > "$R/data/processed_traces/splitwise_conv.csv"

# usage: run OUTDIR REPLICAS REQUESTS QPS [extra flags, later ones override]
run() {
  local out=$1; shift
  ( cd "$R" && P=random_forrest_execution_time_predictor_config && \
    WANDB_MODE=disabled HF_HUB_OFFLINE=1 "$WORK/vidur-venv/bin/python" -m vidur.main \
    --replica_config_device a100 --replica_config_network_device a100_dgx \
    --replica_config_model_name meta-llama/Llama-2-70b-hf \
    --replica_config_tensor_parallel_size 2 --replica_config_num_pipeline_stages 1 \
    --cluster_config_num_replicas "$1" \
    --request_generator_config_type synthetic --synthetic_request_generator_config_num_requests "$2" \
    --length_generator_config_type trace \
    --trace_request_length_generator_config_trace_file ./data/processed_traces/splitwise_conv.csv \
    --trace_request_length_generator_config_max_tokens 4096 \
    --interval_generator_config_type poisson --poisson_request_interval_generator_config_qps "$3" \
    --replica_scheduler_config_type sarathi --sarathi_scheduler_config_chunk_size 512 \
    --sarathi_scheduler_config_batch_size_cap 128 \
    --execution_time_predictor_config_type random_forrest \
    --${P}_model_profiling_dataset local/a100-llama-2-70b-hf --${P}_network_profiling_dataset local/a100-dgx \
    --${P}_prediction_max_tokens_per_request 4096 --${P}_prediction_max_prefill_chunk_size 4096 \
    --${P}_prediction_max_batch_size 128 \
    --${P}_num_estimators 250 --${P}_max_depth 16 --${P}_min_samples_split 2 --${P}_k_fold_cv_splits 3 \
    --no-metrics_config_store_plots --no-metrics_config_enable_chrome_trace \
    --metrics_config_output_dir "$out" "${@:4}" ) > "$out.log" 2>&1
}
rm -rf "$WORK"/out-*
run "$WORK/out-fleet" 4 10000 4.0  # the workload of data/traces/conv_10k_poisson4.csv
for spec in "512 4096" "2048 4096" "2048 512"; do
  set -- $spec
  run "$WORK/out-single-$1-$2" 1 1 1.0 --length_generator_config_type fixed \
    --fixed_request_length_generator_config_prefill_tokens "$1" --fixed_request_length_generator_config_decode_tokens 3 \
    --sarathi_scheduler_config_chunk_size "$2"
done

"$WORK/vidur-venv/bin/python" - "$WORK" "$OUT_JSON" <<'PY'
import csv, glob, json, sys
import numpy as np

work, out = sys.argv[1], sys.argv[2]

def metrics(name):
    return list(csv.DictReader(open(glob.glob(f"{work}/{name}/*/request_metrics.csv")[0])))

rows = metrics("out-fleet")
ttft = np.array([float(r["prefill_e2e_time"]) for r in rows]) * 1e3  # first token - arrival
e2e = np.array([float(r["request_e2e_time"]) for r in rows]) * 1e3
n_out = np.array([int(r["request_num_decode_tokens"]) for r in rows])
many = n_out > 1
tpot = (e2e[many] - ttft[many]) / (n_out[many] - 1)  # (finish - first token) / (output - 1)
fleet = {k: {f"p{q}": round(float(np.percentile(v, q)), 1) for q in (50, 90, 99)}
         for k, v in (("ttft_ms", ttft), ("tpot_ms", tpot), ("e2e_ms", e2e))}
single = {}
for n, chunk in ((512, 4096), (2048, 4096), (2048, 512)):
    r = metrics(f"out-single-{n}-{chunk}")[0]
    p, e, d = float(r["prefill_e2e_time"]) * 1e3, float(r["request_e2e_time"]) * 1e3, int(r["request_num_decode_tokens"])
    single[f"prefill_{n}_chunk_{chunk}"] = round(p, 1)
    if chunk == 4096:
        single[f"decode_ctx_{n}"] = round((e - p) / (d - 1), 1)
json.dump({
    "_about": "Vidur 0.0.26 (PyPI) on A100 80GB, Llama-2-70B TP2, Sarathi chunk 512 / batch cap 128, round robin; "
              "written by benchmarks/vidur_reproduce.sh. fleet: 4 replicas, 10,000 requests (Poisson 4 req/s, Azure "
              "2023 conversation lengths, clipped to 4,096; the same requests as data/traces/conv_10k_poisson4.csv); "
              "single_request_ms: one request on one replica (fixed lengths, 3 output tokens), prefill = first-token "
              "time, decode = time per output token after the first.",
    "fleet": fleet, "single_request_ms": single,
}, open(out, "w"), indent=2)
open(out, "a").write("\n")
print(json.dumps({"fleet": fleet, "single_request_ms": single}))
PY
