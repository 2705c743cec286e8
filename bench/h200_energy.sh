#!/usr/bin/env bash
# Issue 24 on a lent H200 without network: J per inference of ResNet-50 (torchvision resnet50,
# random weights, batch 64) FP32 vs FP16 vs the best device-resident configuration, with the idle
# baseline, measured through the product's CLI (python -m backend.cli run), the path a user runs.
# Every configuration's energy is NVML's total energy counter of its GPU read at the edges of each
# timed window (backend/energy); idle power is a 1 s window before the loop, kept apart.
# Two device calls, the second within the warm period of the first:
#   bash bench/h200_energy.sh ort    carry .whl/gsc: onnxruntime-gpu 1.31.1 + bwrap (as
#                                    bench/h200_llm.sh ort) and onnxconverter-common, onnxslim
#   bash bench/h200_energy.sh run    carry .whl/cliwheels .whl/energywheels: the CLI's wheels
#                                    (sqlalchemy...; alembic, mako, markupsafe), export, 3 jobs,
#                                    bench/energy_report.py's table; JSON under $OUT
# On a CPU host (checks the path and the "not measurable" reason; no wheels needed):
#   ENERGY_PROVIDER=cpu ENERGY_MODEL=small.onnx ENERGY_BATCH=2 ENERGY_PRESET=quick \
#       PYTHON=.venv/bin/python bash bench/h200_energy.sh run
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
out="${OUT:-/tmp/energy-out}"
mkdir -p "$out"
site=$($PY -c "import sysconfig; print(sysconfig.get_path('purelib'))")
provider="${ENERGY_PROVIDER:-cuda}"
batch="${ENERGY_BATCH:-64}"
preset="${ENERGY_PRESET:-standard}"
unpack() {  # wheels are zips: extract into the interpreter's site-packages (no pip, no network)
    $PY -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" "$site" "$@"
}
case "${1:-}" in
ort)
    bash bench/h200_llm.sh ort
    unpack .whl/gsc/*.whl  # onnxconverter-common (FP16 conversion), onnxslim
    ;;
run)
    for dir in .whl/cliwheels .whl/energywheels; do
        [ -d "$dir" ] && unpack "$dir"/*.whl
    done
    missing=$($PY -c "import importlib.util as u; print(' '.join(m for m in ('sqlalchemy', 'alembic', 'mako', 'onnx', 'onnxconverter_common', 'onnxslim', 'pandas', 'psutil', 'pynvml') if u.find_spec(m) is None))")
    [ -z "$missing" ] || { echo "missing here: $missing (carry the wheel dirs named above)"; exit 2; }
    if [ "$provider" = cuda ]; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv,noheader
        export OPTIBOARD_BWRAP="${OPTIBOARD_BWRAP:-/tmp/gsc-bin/bwrap}"
    fi
    $PY -c "import onnxruntime as o, numpy, sys; print('python', sys.version.split()[0], 'onnxruntime', o.__version__, o.get_available_providers(), 'numpy', numpy.__version__)"
    $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>/dev/null || true
    model="${ENERGY_MODEL:-}"
    if [ -z "$model" ]; then
        timeout 150 $PY bench/gpu_depth.py export /tmp/energy-models --only resnet50 2>&1 | tail -2
        model=/tmp/energy-models/resnet50.onnx
    fi
    export OPTIBOARD_DATA_DIR="${OPTIBOARD_DATA_DIR:-/tmp/energy-data}"
    rm -rf "$OPTIBOARD_DATA_DIR"
    cli() { $PY -m backend.cli "$@"; }
    cli add "$model" --name resnet50 | tail -1
    common=(--providers "$provider" --batch-sizes "$batch" --preset "$preset" --max-seconds 12)
    jobs=(1)
    if [ "$provider" = cuda ]; then
        echo "== job 1: FP32 and FP16, end to end (host arrays) and device-resident (IOBinding)"
        timeout 240 $PY -m backend.cli run 1 "${common[@]}" --precisions fp32,fp16 \
            --timing end_to_end,device --label "energy: fp32 vs fp16" | tee "$out/job1.txt"
        echo "== job 2: the best device-resident configuration of bench/results/h200_gpu_depth.txt"
        timeout 90 $PY -m backend.cli run 1 "${common[@]}" --precisions fp16 --timing device \
            --nhwc --fuse-conv-bias --label "energy: best device-resident" | tee "$out/job2.txt"
        echo "== job 3: the same with CUDA graphs and float16 inputs/outputs"
        timeout 90 $PY -m backend.cli run 1 "${common[@]}" --precisions fp16 --timing device \
            --nhwc --fuse-conv-bias --cuda-graph --fp16-io --label "energy: + CUDA graph" \
            | tee "$out/job3.txt"
        jobs=(1 2 3)
    else
        echo "== job 1: FP32 and FP16 on $provider"
        cli run 1 "${common[@]}" --precisions fp32,fp16 --label "energy: fp32 vs fp16" \
            | tee "$out/job1.txt"
    fi
    cli export "${jobs[@]}" --format json -o "$out/energy_results.json"
    $PY bench/energy_report.py "$out/energy_results.json" --json "$out/h200_energy.json" \
        | tee "$out/h200_energy.txt"
    ;;
*)
    echo "usage: bash bench/h200_energy.sh ort|run"; exit 2
    ;;
esac
