#!/usr/bin/env bash
# Issue 23's 50%-of-roofline goal on the PyTorch path: the compiled decode step's attention as
# FlexAttention (backend/runtimes/torch_layers.flex_decode_attention, one fused kernel a layer)
# against the grouped path (two matmuls and a softmax a layer), in one device call. Carry .whl/cli
# (transformers and its wheels) and .whl/gsc/bwrap (Debian's bwrap, for the sandbox). The model is
# the Llama-3.2-1B shape with random fp16 weights made there (bench/torch_hf_shape.py).
#   1. bench/torch_decode_probe.py graph --layers flex, with its kernels and greedy tokens
#      against the same layers uncompiled and the model as transformers loads it;
#   2. the product: `optiboard generate --runtimes torch --torch-compile` (FlexAttention), 1,024-token
#      prompt, 128 new tokens, 1 sequence;
#   3. the probe with the grouped path (--layers runtime), same card, same call, if time is left.
# Every step's stderr goes to $out/errors.log.
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

probe flex 170 --layers flex --kernels
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
[ "$SECONDS" -lt 430 ] && probe runtime 150 --layers runtime --kernels
echo "== $SECONDS s"
