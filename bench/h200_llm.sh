#!/usr/bin/env bash
# Issue 23 on a lent H200 without network, in two device calls (the payload is over one call's
# 64 MiB): `ort` unpacks onnxruntime-gpu (carry .whl/gsc, bench/ort_gpu_payload.py) and bwrap into
# the interpreter's environment; `run` (carry .whl/genai .whl/llm1b .whl/cliwheels, within 30 s of
# the first, while the machine is warm) adds onnxruntime-genai-cuda with its libonnxruntime.so and
# the CLI's missing wheels, writes the Llama-3.2-1B-shaped models' random weights
# (bench/llm_shape.py fill), then measures decode with the standalone probe (PROBE=1) and through
# the product: `optiboard generate` (python -m backend.cli generate), its JSON under $OUT.
# `kernels` instead of `run`: the same set-up, then bench/llm_kernels.py (GPU time per kernel).
# `engine` instead of `run` (also carry .whl/llm1b's -paged folders, bench/llm_shape.py build
# --paged): 64 sequences beside 1 through onnxruntime-genai's Engine, one Request per sequence.
# PagedAttention models get its continuous (dynamic) batching; STATIC=1 adds the plain models at
# 64 sequences (the Engine's static scheduler: 4 at a time), GRAPH=1 the paged FP16 with CUDA
# graphs asked for (whatever the Engine does with them is what the point reports).
# `torch` (after `ort`, which installs bwrap; carry .whl/cliwheels): the torch runtime
# (transformers + PyTorch, the device's own torch/transformers) on a Llama-3.2-1B-shaped HF folder
# with random fp16 weights made there (bench/torch_hf_shape.py, /tmp/llm/hf-1b), through
# `optiboard generate --runtimes torch`, eager then --torch-compile; POINTS=1 runs one sequence
# only (fewer compiles when the call's time is short).
set -euo pipefail
cd "$(dirname "$0")/.."
site=$(python3 -c "import sysconfig; print(sysconfig.get_path('purelib'))")
out="${OUT:-/tmp}"
case "$1" in
ort)
    rm -rf "$site"/onnxruntime "$site"/onnxruntime-*.dist-info
    xz -dc .whl/gsc/ort_rest.tar.xz | tar x -C "$site"
    xz -dc .whl/gsc/libonnxruntime_providers_cuda.so.xz \
        > "$site/onnxruntime/capi/libonnxruntime_providers_cuda.so"
    mkdir -p /tmp/gsc-bin && install -m 0755 .whl/gsc/bwrap /tmp/gsc-bin/bwrap
    python3 -c "import onnxruntime as o; print('ort', o.__version__, o.get_available_providers())"
    ;;
torch)
    python3 -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" \
        "$site" .whl/cliwheels/*.whl
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader
    python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
    python3 bench/torch_hf_shape.py /tmp/llm/hf-1b
    [ -x /tmp/gsc-bin/bwrap ] || echo "no /tmp/gsc-bin/bwrap: run the ort stage first, same machine"
    # inductor's compile workers are processes: room for them under the child's process cap
    export OPTIBOARD_BWRAP=/tmp/gsc-bin/bwrap OPTIBOARD_DATA_DIR=/tmp/llm-data
    export OPTIBOARD_CHILD_PROCS=4096
    sequences=1,64; [ "${POINTS:-0}" = 1 ] && sequences=1
    for compile in "" "--torch-compile"; do
        name="torch-fp16${compile:+-compiled}"
        echo "== optiboard generate /tmp/llm/hf-1b --runtimes torch $compile"
        timeout "$([ -n "$compile" ] && echo 270 || echo 150)" python3 -m backend.cli generate /tmp/llm/hf-1b --runtimes torch --device cuda \
            $compile --prompt-lengths 1024 --new-tokens 128 --sequences "$sequences" \
            --preset quick --json > "$out/$name.json" 2> "$out/$name.err" \
            || tail -n 6 "$out/$name.err"
        python3 bench/llm_report.py "$out/$name.json" || true
    done
    ;;
run|kernels|engine)
    rm -rf "$site"/onnxruntime_genai*
    python3 -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" \
        "$site" .whl/genai/onnxruntime_genai_cuda-*.whl .whl/cliwheels/*.whl
    xz -dc .whl/genai/libonnxruntime.so.1.31.1.xz > "$site/onnxruntime/capi/libonnxruntime.so.1.31.1"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader
    mkdir -p /tmp/llm
    for precision in fp16 int4; do
        [ "$1" = engine ] && [ "${STATIC:-0}" != 1 ] && continue  # engine: the -paged folders
        folder=/tmp/llm/llama-3.2-1b-shape-$precision-cuda
        [ -d "$folder" ] || { cp -r ".whl/llm1b/$(basename "$folder")" "$folder";
                              python3 bench/llm_shape.py fill "$folder"; }
        if [ "${PROBE:-0}" = 1 ]; then
            python3 bench/llm_decode_probe.py "$folder" --prompt 1024 --new 128 --batch 1,32 \
                --json "$out/probe-$precision.json"
        fi
    done
    if [ "$1" = engine ]; then
        export OPTIBOARD_BWRAP=/tmp/gsc-bin/bwrap OPTIBOARD_DATA_DIR=/tmp/llm-data
        engine_run() {  # name, folder, then generate's own flags
            local name=$1 folder=$2; shift 2
            echo "== optiboard generate $name $*"
            python3 -m backend.cli generate "$folder" --device cuda --prompt-lengths 1024 \
                --new-tokens 128 "$@" --json > "$out/$name.json" 2> "$out/$name.err" \
                || tail -n 4 "$out/$name.err"
            python3 bench/llm_report.py "$out/$name.json" || true
        }
        for precision in fp16 int4; do
            folder=/tmp/llm/llama-3.2-1b-shape-$precision-cuda-paged
            if [ ! -d "$folder" ]; then
                [ -d ".whl/llm1b/$(basename "$folder")" ] || {
                    echo "no .whl/llm1b/$(basename "$folder"): build it with bench/llm_shape.py build --paged"
                    continue; }
                cp -r ".whl/llm1b/$(basename "$folder")" "$folder"
                python3 bench/llm_shape.py fill "$folder"
            fi
            engine_run "engine-$precision-paged" "$folder" --sequences 1,64
        done
        if [ "${STATIC:-0}" = 1 ]; then
            for precision in fp16 int4; do
                engine_run "engine-$precision-static" "/tmp/llm/llama-3.2-1b-shape-$precision-cuda" \
                    --sequences 64 --preset quick
            done
        fi
        if [ "${GRAPH:-0}" = 1 ]; then
            engine_run engine-fp16-paged-graph /tmp/llm/llama-3.2-1b-shape-fp16-cuda-paged \
                --sequences 1,64 --cuda-graph --preset quick
        fi
        python3 -c "import onnxruntime_genai as g, onnxruntime as o; print('genai', g.__version__, 'ort', o.__version__)"
        exit 0
    fi
    if [ "$1" = kernels ]; then  # where a decode step's time goes (bench/llm_kernels.py)
        for precision in fp16 int4; do
            for graph in "" "--cuda-graph"; do
                python3 bench/llm_kernels.py "/tmp/llm/llama-3.2-1b-shape-$precision-cuda" \
                    $graph --json "$out/kernels-$precision${graph:+-graph}.json" || true
            done
        done
        exit 0
    fi
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; ldconfig -p | grep -c cublasLt || true
    export OPTIBOARD_BWRAP=/tmp/gsc-bin/bwrap OPTIBOARD_DATA_DIR=/tmp/llm-data
    fp16=/tmp/llm/llama-3.2-1b-shape-fp16-cuda
    for precision in fp16 int4; do
        for graph in "" "--cuda-graph"; do
            name="gen-$precision${graph:+-graph}"
            echo "== optiboard generate $precision $graph"
            python3 -m backend.cli generate "/tmp/llm/llama-3.2-1b-shape-$precision-cuda" \
                --device cuda $graph --prompt-lengths 1024 --new-tokens 128 --sequences 1,32 \
                --reference "$fp16" --json > "$out/$name.json" 2> "$out/$name.err" \
                || tail -n 4 "$out/$name.err"
            python3 bench/llm_report.py "$out/$name.json" || true
        done
    done
    ;;
esac
