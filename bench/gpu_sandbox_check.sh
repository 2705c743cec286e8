#!/usr/bin/env bash
# On a lent GPU host without network: unpack the carried onnxruntime-gpu payload
# (bench/ort_gpu_payload.py), bwrap (Debian's bubblewrap binary) and the pure-Python wheels from
# .whl/gsc, then run bench/gpu_sandbox_check.py and leave its JSON under $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
# Into the interpreter's own environment (its torch, onnx, numpy), replacing a CPU onnxruntime:
# the sandbox clears the environment and binds only the interpreter's prefix, so neither
# PYTHONPATH nor a second venv over it would reach the measurement child.
site=$(python3 -c "import sysconfig; print(sysconfig.get_path('purelib'))")
mkdir -p /tmp/gsc-bin
if [ ! -f "$site/onnxruntime/capi/libonnxruntime_providers_cuda.so" ]; then
    rm -rf "$site"/onnxruntime "$site"/onnxruntime-*.dist-info
    xz -dc .whl/gsc/ort_rest.tar.xz | tar x -C "$site"
    xz -dc .whl/gsc/libonnxruntime_providers_cuda.so.xz \
        > "$site/onnxruntime/capi/libonnxruntime_providers_cuda.so"
    python3 -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" \
        "$site" .whl/gsc/*.whl  # pure-Python wheels; the environment may have no pip
fi
install -m 0755 .whl/gsc/bwrap /tmp/gsc-bin/bwrap
export OPTIBOARD_BWRAP=/tmp/gsc-bin/bwrap OPTIBOARD_DATA_DIR=/tmp/gsc-data
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import onnxruntime as o, onnx, numpy; print('ort', o.__version__, o.get_available_providers(), 'onnx', onnx.__version__, 'numpy', numpy.__version__)"
python3 bench/gpu_sandbox_check.py "${OUT:-/tmp}/gpu_sandbox_check.json"
