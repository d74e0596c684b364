#!/usr/bin/env bash
# The corpus GPU table in one device call: every corpus program through tilec and TileLang 0.1.15.
#
# Here (compiler installed):  PYTHONPATH=src python bench/corpus_prebuild.py --out .corpus
#                             bash /work/shared/anchors/pack-tilelang.sh .tilelang   (once; 52 MB, git-ignored)
# There (device tool, one call, carry [".corpus", ".tilelang"]):  bash bench/corpus_gpu.sh [--only gemm,topk]
#
# Needs python3 with torch and nvcc; TileLang comes from the carried archive (unpacked into
# /tmp/tilec-tilelang, as bench/gemm_table.py does). Logs, the workers' output, corpus.json and
# TileLang's generated CUDA (tilelang-src.tgz) go to $OUT (files that come back) or /tmp/tilec-out.
# Budget: the table stops starting programs after --total 480 s (the rest are listed as skipped);
# the whole call stays under 10 minutes.
# Exit status 0 only if tilec got every program right.
set -u
cd "$(dirname "$0")/.."
export OUT="${OUT:-/tmp/tilec-out}"
export TILEC_CACHE="${TILEC_CACHE:-/tmp/tilec-cache}"
export TILELANG_CACHE_DIR="${TILELANG_CACHE_DIR:-/tmp/tilec-tilelang-cache}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
archive="${TILELANG_ARCHIVE:-.tilelang/tilelang-site312.tar.xz}"
site=/tmp/tilec-tilelang/site312

if [ ! -f .corpus/manifest.json ]; then
    echo "no .corpus/manifest.json: run bench/corpus_prebuild.py here first and carry .corpus" >&2
    exit 2
fi
if [ ! -d "$site/tilelang" ]; then
    if [ -f "$archive" ]; then
        mkdir -p /tmp/tilec-tilelang && tar xJf "$archive" -C /tmp/tilec-tilelang \
            || echo "could not unpack $archive: TileLang's columns will say why" >&2
    else
        echo "no $archive (make it with /work/shared/anchors/pack-tilelang.sh .tilelang and carry it):" \
             "the TileLang columns will be empty" >&2
    fi
fi
export PYTHONPATH="$PWD/src:$site${PYTHONPATH:+:$PYTHONPATH}"

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__)'
  timeout 120 python3 -c 'import tilelang; print("tilelang", tilelang.__version__, tilelang.__file__)'; } 2>&1 \
  | tee "$OUT/corpus_env.txt"

timeout -k 10 550 python3 bench/corpus_gpu.py --dir .corpus "$@" 2>&1 | tee "$OUT/corpus_gpu.txt"
rc=${PIPESTATUS[0]}
# TileLang's generated CUDA, one file per kernel, in one archive: the device tool brings back at
# most 8 files from $OUT (tar xzf tilelang-src.tgz here, then read beside .corpus/*.cu)
if [ -d "$OUT/tilelang-src" ]; then
    tar czf "$OUT/tilelang-src.tgz" -C "$OUT" tilelang-src && rm -rf "$OUT/tilelang-src"
fi
echo
echo "==================== summary ===================="
sed -n '/^## corpus: tilec against TileLang/,$p' "$OUT/corpus_gpu.txt"
echo "corpus_gpu.py exit $rc"
exit "$rc"
