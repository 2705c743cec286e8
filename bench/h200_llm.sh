#!/usr/bin/env bash
# Issue 23 on a lent H200 without network, in two device calls (the payload is over one call's
# 64 MiB): `ort` unpacks onnxruntime-gpu (carry .whl/gsc, bench/ort_gpu_payload.py) into the
# interpreter's environment; `run` (carry .whl/genai .whl/llm1b, within 30 s of the first, while
# the machine is warm) adds onnxruntime-genai-cuda and its libonnxruntime.so, writes the
# Llama-3.2-1B-shaped models' random weights (bench/llm_shape.py fill) and measures decode.
set -euo pipefail
cd "$(dirname "$0")/.."
site=$(python3 -c "import sysconfig; print(sysconfig.get_path('purelib'))")
case "$1" in
ort)
    rm -rf "$site"/onnxruntime "$site"/onnxruntime-*.dist-info
    xz -dc .whl/gsc/ort_rest.tar.xz | tar x -C "$site"
    xz -dc .whl/gsc/libonnxruntime_providers_cuda.so.xz \
        > "$site/onnxruntime/capi/libonnxruntime_providers_cuda.so"
    python3 -c "import onnxruntime as o; print('ort', o.__version__, o.get_available_providers())"
    ;;
run)
    rm -rf "$site"/onnxruntime_genai*
    python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[2]).extractall(sys.argv[1])" \
        "$site" .whl/genai/onnxruntime_genai_cuda-*.whl
    xz -dc .whl/genai/libonnxruntime.so.1.31.1.xz > "$site/onnxruntime/capi/libonnxruntime.so.1.31.1"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader
    mkdir -p /tmp/llm
    for precision in fp16 int4; do
        folder=/tmp/llm/llama-3.2-1b-shape-$precision-cuda
        [ -d "$folder" ] || cp -r ".whl/llm1b/$(basename "$folder")" "$folder"
        python3 bench/llm_shape.py fill "$folder"
        python3 bench/llm_decode_probe.py "$folder" --prompt 1024 --new 128 --batch 1,32 \
            --json "${OUT:-/tmp}/probe-$precision.json"
        python3 bench/llm_decode_probe.py "$folder" --prompt 1024 --new 128 --batch 1,32 \
            --cuda-graph --json "${OUT:-/tmp}/probe-$precision-graph.json" || echo "graph run failed"
    done
    shift
    [ $# -eq 0 ] || "$@"  # what the product runs next (optiboard generate ...)
    ;;
esac
