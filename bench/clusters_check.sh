#!/usr/bin/env bash
# The clusters of two (plan_pipeline.cluster_pairs, built with CLUSTER_PAIRS = True) on the GPU in
# one device call: SASS, an error map of the example GEMM, the GPU checks of every sm_90a GEMM
# variant the clusters change, the sanitizers, an interleaved A/B against the build without
# clusters, then the GEMM table.
#
# Here:   PYTHONPATH=src python tests/gpu/prebuild.py --out .gpu-base      (CLUSTER_PAIRS = False)
#         PYTHONPATH=src python tests/gpu/prebuild.py --out .gpu           (CLUSTER_PAIRS = True)
#         bash /work/shared/anchors/pack-tilelang.sh .tilelang              (optional: TileLang)
#         then a trimmed folder of the variants that differ (the carry limit is 64 MiB with
#         .tilelang), e.g. .gpu-c/ with its manifest.json, and .gpu-c/base/gemm-sm90a-before.cu
# There:  TILEC_PREBUILT=.gpu-c bash bench/clusters_check.sh [VARIANTS]   (carry .gpu-c, .tilelang)
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1 TILEC_CACHE=/tmp/tilec-cache OUT="${OUT:-/tmp/tilec-out}"
export TILEC_PREBUILT="${TILEC_PREBUILT:-.gpu}"
mkdir -p "$OUT"
T0=$SECONDS
CHANGED="${1:-gemm-sm90a,gemm-sm90a-128x128,gemm-sm90a-k32,gemm-sm90a-p10,gemm-sm90a-skinny,gemm-sm90a-skinny-n64,gemm_bf16-sm90a,gemm_fp8-sm90a,gemm_fp8_e5m2-sm90a,gemm_int8-sm90a,gemm_uint8-sm90a,gemm_nt-sm90a,gemm_tn-sm90a,gemm_relu-sm90a,gemm_persistent-sm90a-waves,strided_views-sm90a}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
echo "== SASS of the example GEMM (HGMMA, multicast TMA loads, cluster barriers)"
nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -c "$TILEC_PREBUILT/gemm-sm90a.cu" -o /tmp/g.o -Xptxas -v 2>&1 \
    | grep -A3 "'gemm_kernel'"
cuobjdump --dump-sass /tmp/g.o > "$OUT/sass.txt"
grep -oE "HGMMA\.[A-Z0-9x]+|HMMA|UTMALDG[.A-Z0-9_]*|UTMASTG[.A-Z0-9_]*|UCGABAR_[A-Z]*" "$OUT/sass.txt" | sort | uniq -c
echo "== error map"
timeout 60 python3 bench/gemm_error_map.py "$TILEC_PREBUILT/gemm-sm90a.cu" 2>&1 | tail -24
echo "== checks ($((SECONDS - T0)) s)"
timeout -k 5 200 python3 tests/gpu/run_all.py --total 180 --only "$CHANGED" > "$OUT/checks.txt" 2>&1
checks=$?
sed -n '/^## tilec GPU checks/,$p' "$OUT/checks.txt" | grep -vE "\| ok" | tail -30
echo "checks rc=$checks, $(grep -cE '\| ok' "$OUT/checks.txt") ok"
[ "$checks" = 0 ] || exit 1
echo "== sanitizers ($((SECONDS - T0)) s)"
for tool in memcheck racecheck synccheck; do
    TILEC_SANITIZE_SPLITK=0 timeout -k 5 60 compute-sanitizer --tool $tool python3 bench/sanitize_sm90a.py \
        > "$OUT/san-$tool.txt" 2>&1
    echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san-$tool.txt" | tail -1)"
done
echo "== A/B ($((SECONDS - T0)) s)"
timeout -k 5 170 python3 bench/ab_gemm.py "$TILEC_PREBUILT/base/gemm-sm90a-before.cu,$TILEC_PREBUILT/gemm-sm90a.cu" \
    --rounds 20 --sizes 8192,4096 2>&1 | tee "$OUT/ab.txt" | tail -16
left=$((560 - (SECONDS - T0)))
echo "== GEMM table ($((SECONDS - T0)) s, $left s left)"
if [ $left -gt 60 ]; then
    timeout -k 5 $((left - 5)) python3 bench/gemm_table.py --total $((left - 15)) > "$OUT/gemm_table.txt" 2>&1
    sed -n '/^## tilec GEMM table/,$p' "$OUT/gemm_table.txt" | head -40
fi
