#!/usr/bin/env bash
# Issue 23's 50%-of-roofline goal on the PyTorch path, after the decode step's grouped-query
# attention stopped copying the cache's key/value heads (backend/runtimes/genai_torch.py
# grouped_decode_attention), in one device call. Carry .whl/cli (transformers and its wheels),
# .whl/gsc/bwrap (Debian's bwrap, for the sandbox) and .whl/tinyllama (the tests' trained
# grouped-query tiny Llama). The model is the Llama-3.2-1B shape with random fp16 weights made
# there (bench/torch_hf_shape.py: 32 query heads over 8 key/value heads).
#   1. bench/torch_decode_probe.py graph, grouped attention, with its kernels; greedy tokens against
#      the uncompiled step with either attention;
#   2. the product: `optiboard generate --runtimes torch --torch-compile`, 1,024-token prompt, 128
#      new tokens, 1 sequence;
#   3. the probe with sdpa's attention, same card, same call (the step before this change);
#   4. the tiny grouped-query Llama through the product, eager then compiled: greedy tokens.
set -uo pipefail
source "$(dirname "$0")/device_setup.sh"
export PYTHONPATH=.
python3 bench/torch_hf_shape.py /tmp/llm/hf-1b | tail -1

show() {  # a generate JSON as the CLI prints it
    python3 - "$1" <<'PY'
import json, sys
from backend.generate.benchmark import GenerationReport
from backend.generate.cli_verbs import HEADERS, explain, rows_of
from backend.reporting.text import table
report = GenerationReport.from_dict(json.load(open(sys.argv[1])))
print(table(rows_of(report), HEADERS))
print("\n".join(explain(report)))
PY
}

probe() {  # name, timeout, probe arguments
    echo "== probe $1"
    timeout "$2" python3 bench/torch_decode_probe.py /tmp/llm/hf-1b "${@:3}" \
        > "$out/probe-$1.json" 2> "$out/probe-$1.err" || tail -n 5 "$out/probe-$1.err"
    cat "$out/probe-$1.json"
}

probe grouped 170 graph --attention grouped --kernels
echo "== product: optiboard generate /tmp/llm/hf-1b --runtimes torch --torch-compile"
timeout 200 python3 -m backend.cli generate /tmp/llm/hf-1b --runtimes torch --device cuda \
    --torch-compile --prompt-lengths 1024 --new-tokens 128 --sequences 1 --preset quick --json \
    > "$out/torch-fp16-grouped.json" 2> "$out/torch-fp16-grouped.err" \
    || tail -n 8 "$out/torch-fp16-grouped.err"
show "$out/torch-fp16-grouped.json" || true
probe sdpa 120 graph
echo "== the tiny grouped-query Llama through the product, eager then compiled: greedy tokens"
for compile in "" "--torch-compile"; do
    name="tiny${compile:+-compiled}"
    timeout 90 python3 -m backend.cli generate .whl/tinyllama --runtimes torch --device cuda \
        $compile --prompt-lengths 16 --new-tokens 32 --sequences 1,8 --preset quick --json \
        > "$out/$name.json" 2> "$out/$name.err" || tail -n 6 "$out/$name.err"
done
python3 - "$out/tiny.json" "$out/tiny-compiled.json" <<'PY'
import json, sys
eager, compiled = (json.load(open(p))["results"] for p in sys.argv[1:])
for e, c in zip(eager, compiled):
    same = sum(a == b for x, y in zip(e["tokens"], c["tokens"]) for a, b in zip(x, y))
    total = sum(len(x) for x in e["tokens"])
    print(f"{e['sequences']} seq: compiled tokens equal eager {same}/{total}; ITL p50 eager "
          f"{e['itl_p50_ms']:.3f} ms, compiled {c['itl_p50_ms']:.3f} ms; {e['facts']['attention']}")
PY
