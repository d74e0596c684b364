#!/usr/bin/env bash
# The GPU checks on an AMD GPU (MI250: gfx90a, MI300: gfx942), for a user who has one: we do not.
#
#   bash bench/amd_check.sh [--only rmsnorm,gemm] [--sanitize ...]     (run_all.py's options)
#
# Needs ROCm's hipcc on PATH and a Python ($PYTHON, else python3) with a ROCm build of torch and
# tilec's requirements (`pip install -e .` from this checkout into it). Every portable variant of tests/gpu/variants.py is compiled here for this GPU's
# gfx target (HIP, as `tilec build --arch gfxNNN` writes it: examples whose default tiles exceed
# 64 KB of LDS take the nearest point of their candidate sets, -Wconfig-fit), built by hipcc and
# checked against torch at tile-multiple and ragged sizes with poisoned outputs; the variants pinned
# to sm_90a are reported as not built. The table comes last; send it to us with `rocminfo | grep gfx`.
#
# What has been run where: on our build machine every example and golden compiles for gfx90a with
# Debian's ROCm 5.2 hipcc -Werror, and the GEMM's code object shows v_mfma and no scratch
# (tests/test_toolchain_hip.py). gfx942 output is emitted but not compiled there (that hipcc rejects
# the target). Nothing HIP has run on an AMD GPU yet.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
command -v hipcc >/dev/null || { echo "amd_check: hipcc not found (install ROCm)"; exit 2; }
"$py" -c 'import torch, sys; sys.exit(0 if torch.version.hip else 1)' \
  || { echo "amd_check: $py's torch is not a ROCm build"; exit 2; }
arch=$("$py" -c 'from tilec import runtime; print(runtime.gpu_arch())')
echo "amd_check: the GPU is $arch"
export TILEC_GPU_ARCH="$arch" HIP_PLATFORM=amd
unset TILEC_PREBUILT
exec "$py" tests/gpu/run_all.py "$@"
