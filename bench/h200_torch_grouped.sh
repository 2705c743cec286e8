#!/usr/bin/env bash
# Issue 23's 50%-of-roofline goal on the PyTorch path with the runtime's layer changes for the
# decode step (backend/runtimes/torch_layers.py: grouped-query attention without copies of the
# cache's key/value heads; q, k and v projections as one matmul), in one device call. Carry
# .whl/cli (transformers and its wheels) and .whl/gsc/bwrap (Debian's bwrap, for the sandbox).
# The model is the Llama-3.2-1B shape with random fp16 weights made there
# (bench/torch_hf_shape.py: 32 query heads over 8 key/value heads).
#   1. bench/torch_decode_probe.py graph with the runtime's layers, with its kernels; greedy
#      tokens against the same layers uncompiled and against the model as transformers loads it;
#   2. the product: `optiboard generate --runtimes torch --torch-compile`, 1,024-token prompt, 128
#      new tokens, 1 sequence;
#   3. the probe with the model as loaded (sdpa, its own projections), same card, same call;
#   4. the probe with the grouped attention only (what the fusion adds is 4 against 1), if the
#      call has time left.
# Every step's stderr goes to $out/errors.log (a call brings back only a few files).
set -uo pipefail
source "$(dirname "$0")/device_setup.sh"
python3 bench/torch_hf_shape.py /tmp/llm/hf-1b | tail -1

probe() {  # name, timeout, probe arguments
    echo "== probe $1"
    echo "== probe $1" >>"$out/errors.log"
    timeout "$2" python3 bench/torch_decode_probe.py /tmp/llm/hf-1b graph "${@:3}" \
        > "$out/probe-$1.json" 2>>"$out/errors.log" || tail -n 5 "$out/errors.log"
    cat "$out/probe-$1.json"
}

probe runtime 170 --layers runtime --kernels
echo "== product: optiboard generate /tmp/llm/hf-1b --runtimes torch --torch-compile"
echo "== product" >>"$out/errors.log"
timeout 180 python3 -m backend.cli generate /tmp/llm/hf-1b --runtimes torch --device cuda \
    --torch-compile --prompt-lengths 1024 --new-tokens 128 --sequences 1 --preset quick --json \
    > "$out/product.json" 2>>"$out/errors.log" || tail -n 8 "$out/errors.log"
python3 - "$out/product.json" <<'PY' || true
import json, sys
from backend.generate.benchmark import GenerationReport
from backend.generate.cli_verbs import HEADERS, explain, rows_of
from backend.reporting.text import table
report = GenerationReport.from_dict(json.load(open(sys.argv[1])))
print(table(rows_of(report), HEADERS))
print("\n".join(explain(report)))
PY
probe model 110 --layers model
[ "$SECONDS" -lt 470 ] && probe grouped 100 --layers grouped
echo "== $SECONDS s"
