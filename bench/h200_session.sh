#!/usr/bin/env bash
# How this session's GPU-host runs were made (issues 12 and 14), one stage per device call.
# The host has no network: onnxruntime-gpu 1.31.1 (xz tar of the unpacked wheel), Ray 2.60.0 (xz tar
# of the unpacked wheel without ray/jars and the dashboard's source maps) and the pure-Python/cp312
# wheels the code imports (sqlalchemy, alembic, mako, onnxconverter-common, onnxslim, jsonschema
# and its deps) travel as one tar split into .whl/gd/part.0N (61 MB each, one per call), gathered
# in /tmp/p while the machine stays warm, then unpacked into /tmp/site (first on PYTHONPATH, so
# it shadows the image's CPU-only onnxruntime 1.30).
#   (each call: unpack .whl/gd/tree.tar, this worktree, into /tmp/wt and run there with ROOT=the repo)
#   bench/h200_session.sh carry N     keep part N in /tmp/p (part 0 also prints the host)
#   bench/h200_session.sh install     reassemble, check sha256, unpack, pip install --no-index
#   bench/h200_session.sh cluster     issue 12: cluster_gpu_check + pinned cluster_sweep
#   bench/h200_session.sh depth       issue 14: kernels, graphcheck, push (ResNet-50 FP16)
#   bench/h200_session.sh graphs      issue 22: the CUDA-graph rows again, each with its accuracy
# (issue 22's payload carries no Ray: ray.tar.xz is unpacked only where it travelled)
set -uo pipefail
stage="$1"
OUT="${OUT:-/tmp/out}"
ROOT="${ROOT:-$PWD}"  # the repository copy the device call ran in (holds .whl/gd)
mkdir -p "$OUT" /tmp/p
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
case "$stage" in
carry)
    cp "$ROOT/.whl/gd/part.0$2" /tmp/p/ && ls -la /tmp/p
    if [ "$2" = 0 ]; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
        nproc; lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node"
        for c in 0 1 8 15; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"; done
        python3 -m pip list 2>/dev/null | grep -i -E "^(protobuf|psutil|click|filelock|msgpack|pyyaml|requests|aiohttp|prometheus|nvidia-ml|onnx|numpy|torch|pandas) "
        df -h /tmp /dev/shm | cat
    fi
    ;;
install)
    cat /tmp/p/part.0* > /tmp/payload.tar && sha256sum /tmp/payload.tar
    grep -q "$(sha256sum /tmp/payload.tar | cut -d' ' -f1)" $ROOT/.whl/gd/payload.sha256 || { echo "payload sha256 mismatch"; exit 1; }
    mkdir -p /tmp/b /tmp/site && tar xf /tmp/payload.tar -C /tmp/b && (cd /tmp/b && sha256sum -c --quiet SHA256SUMS) || exit 1
    for t in /tmp/b/*.tar.xz; do tar xJf "$t" -C /tmp/site & done; wait
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/b/*.whl 2>&1 | grep -v -i warning
    python3 -c "import onnxruntime as o, sqlalchemy, alembic; print('onnxruntime', o.__version__, o.__file__, o.get_available_providers()); print('sqlalchemy', sqlalchemy.__version__)"
    ;;
cluster)
    timeout 200 python3 bench/cluster_gpu_check.py --out "$OUT/cluster_gpu_check.json" 2>&1 | tail -60
    timeout 360 python3 bench/cluster_sweep.py --pin-cores 5 --threads 4 --repeat-one \
        --out "$OUT/cluster_sweep_h200host.txt" 2>&1 | grep -v -E "^\(raylet|INFO|^$" | tail -40
    timeout 120 python3 bench/gpu_depth.py export /tmp/models --only resnet50 2>&1 | tail -3
    ;;
depth)
    m=/tmp/models/resnet50.onnx
    [ -f $m ] || timeout 120 python3 bench/gpu_depth.py export /tmp/models --only resnet50 2>&1 | tail -3
    timeout 90 python3 bench/gpu_depth.py kernels $m "$OUT/h200_kernels_nhwc_b256.json" --batch 256 2>&1 | tail -25
    timeout 90 python3 bench/gpu_depth.py graphcheck $m "$OUT/h200_graphcheck.json" 2>&1 | tail -80
    timeout 400 python3 bench/gpu_depth.py push $m "$OUT/h200_push.json" --batch 1024 --budget-s "${PUSH_S:-300}" 2>&1 | grep -v -E "^\s*$" | tail -40
    ;;
graphs)
    m=/tmp/models/resnet50.onnx
    [ -f $m ] || timeout 120 python3 bench/gpu_depth.py export /tmp/models --only resnet50 2>&1 | tail -3
    timeout 400 python3 bench/gpu_depth.py graphs $m "$OUT/h200_gpu_depth_graphs_issue22.json" --budget-s 360 2>&1 | tail -40
    ;;
esac
