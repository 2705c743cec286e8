#!/usr/bin/env bash
# Issue 9's GPU half on the H200 host: the real tritonserver (nvidia-pytriton 0.7.0) serving a
# small CNN with ONNX Runtime's CUDA provider (KIND_GPU), driven by bench/serving_gpu.py, and the
# same on the host's CPU. The host has no network, so everything travels as one payload split into
# .whl/tg/cN/part.0N (<= 62.5 MB each, one per device call) and gathered in /tmp/p while the
# machine stays warm. Payload (built here by `pack`): ort.tar.xz (onnxruntime-gpu 1.31.1, the
# unpacked CUDA 13 wheel), tv.tar.xz (pytriton's tritonserver, its Python backend, the 3.12 stub
# and the bundled libraries they need, numpy 1.26.4 for the stub) and the driver's wheels
# (tritonclient[http] and its deps, onnxconverter-common). CUDA 13/cuDNN 9 come from the image's
# pip nvidia-* packages (torch's), put on LD_LIBRARY_PATH; tritonserver keeps its own CUDA 12.6
# runtime (its symbols are versioned libcudart.so.12, ORT's libcudart.so.13: no clash).
#   bench/h200_triton.sh pack DIR   (here) build DIR/cN/part.0N, DIR/c3/tree.tar, payload.sha256
#   bench/h200_triton.sh carry N    (device, REPO=the call's repo) keep part N in /tmp/p
#   bench/h200_triton.sh all        (device) install, check, run serving_gpu.py (INSTALL_ONLY=1: no run)
#   bench/h200_triton.sh prediction (device, after all) bench/serving_prediction.py on the host's
#                                   16 CPU cores: the predictor judged where the load generator and
#                                   the server do not share two cores
set -uo pipefail
stage="$1"
OUT="${OUT:-/tmp/out}"
REPO="${REPO:-$PWD}"
TV=/tmp/tv
SITE=$TV/lib/python3.12/site-packages
mkdir -p "$OUT" /tmp/p

cuda_libs() {  # the folders of the CUDA 13 / cuDNN 9 libraries ORT's CUDA provider loads
    local sp
    sp=$(python3 -c 'import site; print(site.getsitepackages()[0])')
    for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libcufft.so.12 \
        libcurand.so.10 libnvrtc.so.13 libnvJitLink.so.13; do
        find "$sp/nvidia" /usr/local/cuda/lib64 -name "$lib" -printf '%h\n' 2>/dev/null | head -1
    done | sort -u | paste -sd:
}

case "$stage" in
pack)
    dir="$2" src=/tmp/sg
    rm -rf "$dir" && mkdir -p "$dir" /tmp/sg/b
    cp "$src/ort.tar.xz" "$src/tv.tar.xz" "$src"/w/{tritonclient,gevent,geventhttpclient,greenlet,brotli,python_rapidjson,zope,onnxconverter}*.whl /tmp/sg/b/
    (cd /tmp/sg/b && sha256sum ./* > SHA256SUMS && tar cf - ./*) > /tmp/sg/payload.tar
    sha256sum /tmp/sg/payload.tar | cut -d' ' -f1 > "$dir/payload.sha256"
    split -b 62500000 -d -a 2 /tmp/sg/payload.tar "$dir/part."
    for f in "$dir"/part.*; do n=${f##*.}; n=${n#0}; mkdir -p "$dir/c$n" && mv "$f" "$dir/c$n/"; done
    git ls-files --cached --others --exclude-standard | tar cf "$dir/c$n/tree.tar" -T -
    cp "$dir/payload.sha256" "$dir/c$n/"
    ls -la "$dir"/c*
    ;;
carry)
    cp "$REPO/.whl/tg/c$2/part.0$2" /tmp/p/ && ls -la /tmp/p
    if [ "$2" = 0 ]; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
        nproc; ls -la /usr/bin/python3.12 /usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0; which python3
        echo "CUDA libs: $(cuda_libs)"; ldconfig -p | grep -m2 libcuda.so
    fi
    ;;
all)
    t0=$(date +%s)
    ls /tmp/p; cat /tmp/p/part.0* > /tmp/payload.tar
    grep -q "$(sha256sum /tmp/payload.tar | cut -d' ' -f1)" "$REPO"/.whl/tg/c*/payload.sha256 || {
        echo "payload sha256 mismatch (a part is missing: the machine went cold between calls?)"
        exit 1
    }
    mkdir -p /tmp/b && tar xf /tmp/payload.tar -C /tmp/b && (cd /tmp/b && sha256sum -c --quiet SHA256SUMS) || exit 1
    /usr/bin/python3.12 -m venv --without-pip $TV && mkdir -p $SITE
    (tar xJf /tmp/b/ort.tar.xz -C $SITE & tar xJf /tmp/b/tv.tar.xz -C $SITE & wait)
    mkdir -p $TV/backends && cp -r $SITE/pytriton/tritonserver/backends/python $TV/backends/
    cp $SITE/pytriton/tritonserver/python_backend_stubs/3.12/triton_python_backend_stub $TV/backends/python/
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/b/*.whl 2>&1 | grep -v -i warning
    libs=$(cuda_libs)
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "install: $(($(date +%s) - t0)) s; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OPTIBOARD_DATA_DIR=/tmp/obdata
    export OPTIBOARD_TRITON_START_TIMEOUT_S=120
    python3 -c 'from pathlib import Path; from tests import models as m; m.save(m.make_cnn(64, 2, 32), Path("/tmp/cnn.onnx"))'
    # the stub's interpreter and packages, outside Triton: does ORT's CUDA provider open there?
    env -u PYTHONPATH $TV/bin/python -c '
import numpy, onnxruntime as o
print("stub env: python", __import__("sys").version.split()[0], "numpy", numpy.__version__, "onnxruntime", o.__version__, o.get_available_providers())
s = o.InferenceSession("/tmp/cnn.onnx", providers=["CUDAExecutionProvider"])
print("stub env: CUDA session providers", s.get_providers())' 2>&1 | grep -v "^$" | tail -8
    python3 -c 'import tritonclient, gevent, onnx, numpy; print("driver: tritonclient", tritonclient.__version__ if hasattr(tritonclient, "__version__") else "2.73.0", "onnx", onnx.__version__, "numpy", numpy.__version__)'
    [ "${INSTALL_ONLY:-0}" = 1 ] && { echo "installed: $(($(date +%s) - t0)) s"; exit 0; }
    timeout "${RUN_S:-420}" python3 bench/serving_gpu.py --venv $TV --out "$OUT" \
        --configs "${CONFIGS:-cuda:fp32,cuda:fp32:EXHAUSTIVE,cpu:fp32,cuda:fp16}" --duration "${DUR:-3}" 2>&1 | tee "$OUT/run.log"
    grep -h -E "optiboard session providers|server_version|CUDA memory|Failed|error" "$OUT"/triton_*.log "$OUT"/failed_*.log 2>/dev/null | sort | uniq -c | head -20
    echo "total: $(($(date +%s) - t0)) s"
    ;;
prediction)
    t0=$(date +%s)
    [ -x $SITE/pytriton/tritonserver/bin/tritonserver ] || {
        echo "no serving environment in $TV: run 'all' first, on the same warm machine"; exit 1; }
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 OPTIBOARD_DATA_DIR=/tmp/obdata
    export OPTIBOARD_TRITON_VENV=$TV OPTIBOARD_TRITON_START_TIMEOUT_S=120
    echo "host: $(nproc) cores, $(uptime)"
    timeout "${RUN_S:-570}" python3 bench/serving_prediction.py --repeat "${REPEAT:-2}" \
        --duration "${DUR:-3}" --save "$OUT/prediction.json" 2>&1 | tee "$OUT/prediction.txt"
    echo "host after: $(uptime); total: $(($(date +%s) - t0)) s"
    ;;
esac
