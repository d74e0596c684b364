#!/usr/bin/env bash
# The one command for the GPU machine: every GPU check, then the benchmarks.
#
# Here (compiler installed):  PYTHONPATH=src python tests/gpu/prebuild.py --out .gpu --nvcc
# There (device tool, one call, carry [".gpu"]):  bash bench/gpu_all.sh [--quick]
# A previous build beside it: prebuild it into .gpu-base from that commit, carry it too, and set
# TILEC_BASELINE=.gpu-base: bench/run.py then times each variant beside its previous build (new,
# previous, previous, new; each the mean of its two), in the same process.
#
# Needs python3 with torch and nvcc; imports nothing of the compiler (tilec.runtime is stdlib-only).
# Logs go to $OUT (files that come back) or /tmp/tilec-out. Exit status: 0 only if every check
# passed and every benchmarked tilec kernel was correct. Budget: checks <= 4 min (cases get --total
# 200 s), bench <= 4.5 min (--total 250 s; later workloads are skipped, not cut off mid-table).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export TILEC_PREBUILT="${TILEC_PREBUILT:-.gpu}"
export TILEC_CACHE="${TILEC_CACHE:-/tmp/tilec-cache}"
export OUT="${OUT:-/tmp/tilec-out}"
mkdir -p "$OUT"

if [ ! -f "$TILEC_PREBUILT/manifest.json" ]; then
    echo "no $TILEC_PREBUILT/manifest.json: run tests/gpu/prebuild.py here first and carry $TILEC_PREBUILT" >&2
    exit 2
fi

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)'; } 2>&1 | tee "$OUT/gpu.txt"

start=$(date +%s)
timeout -k 10 240 python3 tests/gpu/run_all.py 2>&1 | tee "$OUT/gpu_checks.txt"
checks_rc=${PIPESTATUS[0]}
mid=$(date +%s)
timeout -k 10 270 python3 bench/run.py "$@" 2>&1 | tee "$OUT/bench.txt"
bench_rc=${PIPESTATUS[0]}
end=$(date +%s)

echo
echo "==================== summary (checks $((mid - start))s, bench $((end - mid))s) ===================="
sed -n '/^## tilec GPU checks/,$p' "$OUT/gpu_checks.txt"
echo
sed -n '/^## tilec vs torch/,$p' "$OUT/bench.txt"
echo
echo "gpu checks exit $checks_rc, bench exit $bench_rc"
[ "$checks_rc" = 0 ] && [ "$bench_rc" = 0 ]
