#!/usr/bin/env bash
# Verify the GPU paths on an NVIDIA host for real: provider detection, a CPU/CUDA/TensorRT sweep
# through the same worker code, and where available the compatibility placement on CUDA.
# Usage (repo root, Python with onnxruntime-gpu importable): bench/gpu_verify.sh OUTDIR
# Every configuration runs in the sandbox (bubblewrap; OPTIBOARD_BWRAP names it when not on PATH).
# Only the CLI's own commands: what a user on a GPU host would type.
set -uo pipefail
out="${1:-gpu-verify}"
mkdir -p "$out"
export OPTIBOARD_DATA_DIR="$(mktemp -d)"
py="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
$py -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())"
$py -m backend.cli providers
$py - <<'PY'
import sys; sys.path.insert(0, ".")
from tests import models
models.save(models.make_cnn(channels=64, blocks=4, image=64, classes=100), "/tmp/cnn.onnx")
models.save(models.make_transformer(d_model=128, heads=4, vocab=1000), "/tmp/transformer.onnx")
models.save(models.make_cuda_fallback_model(), "/tmp/fallback.onnx")
PY
$py -m backend.cli add /tmp/cnn.onnx --name resnet-style
$py -m backend.cli add /tmp/transformer.onnx --name transformer
[ -n "${SKIP_SWEEPS:-}" ] || $py -m backend.cli run 1 --providers cpu,cuda,tensorrt --precisions fp32,fp16,int8_static \
    --batch-sizes 1,16 --max-seconds 5 2>&1 | tee "$out/cnn_sweep.txt"
[ -n "${SKIP_SWEEPS:-}" ] || $py -m backend.cli run 2 --providers cpu,cuda --precisions fp32,fp16 --batch-sizes 1,16 \
    --dim seq=128 --max-seconds 5 2>&1 | tee "$out/transformer_sweep.txt"
$py -m backend.cli export 1 --format json -o "$out/cnn_results.json"
$py -m backend.cli export 2 --format json -o "$out/transformer_results.json"
$py -m backend.cli add /tmp/fallback.onnx --name fallback
for model in 1 2 3; do  # the compatibility matrix of each, placement from real CUDA sessions
    $py -m backend.cli compat "$model" --refresh 2>&1 | tail -15
done
