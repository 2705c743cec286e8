# Sourced by the device-call scripts (bench/h200_generation_host.sh, bench/h200_torch_graph.sh):
# the CLI's wheels (carry .whl/cli) unpacked into the device interpreter, Debian's bwrap (carry
# .whl/gsc/bwrap) for the sandbox, the settings a generation child needs there, and what ran.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
site=$(python3 -c "import sysconfig; print(sysconfig.get_path('purelib'))")
out="${OUT:-/tmp}"
python3 -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" \
    "$site" .whl/cli/*.whl
mkdir -p /tmp/gsc-bin && install -m 0755 .whl/gsc/bwrap /tmp/gsc-bin/bwrap
export PYTHONPATH=.  # bench scripts import the product's own code (backend/)
export OPTIBOARD_BWRAP=/tmp/gsc-bin/bwrap OPTIBOARD_DATA_DIR=/tmp/llm-data OPTIBOARD_CHILD_PROCS=4096
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
