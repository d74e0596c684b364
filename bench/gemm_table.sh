#!/usr/bin/env bash
# The GEMM table in one device call: the GPU checks of the table's builds, then bench/gemm_table.py.
#
# Here (compiler installed):  PYTHONPATH=src python tests/gpu/prebuild.py --out .gpu --nvcc
#                             bash /work/shared/anchors/pack-tilelang.sh .tilelang   (optional: TileLang rows)
# There (device tool, one call, carry [".gpu", ".tilelang"]):  bash bench/gemm_table.sh [--quick]
#
# Needs python3 with torch and nvcc (TileLang only from the carried archive). Logs go to $OUT (files
# that come back) or /tmp/tilec-out. Exit status 0 only if every check passed and every tilec cell
# was correct. Budget: checks <= 2.5 min, table <= 6.5 min.
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
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1 | tee "$OUT/gpu.txt"

timeout -k 10 150 python3 tests/gpu/run_all.py --total 130 \
    --only gemm-sm90a,gemm-sm90a-skinny,gemm-sm90a-skinny-n64,gemm-sm90a-p10,gemm_tn,gemm_nt,bmm_bias 2>&1 | tee "$OUT/table_checks.txt"
checks_rc=${PIPESTATUS[0]}
timeout -k 10 390 python3 bench/gemm_table.py --total 370 "$@" 2>&1 | tee "$OUT/gemm_table.txt"
table_rc=${PIPESTATUS[0]}

echo
echo "==================== summary ===================="
sed -n '/^## tilec GPU checks/,$p' "$OUT/table_checks.txt"
echo
sed -n '/^## tilec GEMM table/,$p' "$OUT/gemm_table.txt"
echo "table checks exit $checks_rc, table exit $table_rc"
[ "$checks_rc" = 0 ] && [ "$table_rc" = 0 ]
