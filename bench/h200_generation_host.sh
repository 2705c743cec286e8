#!/usr/bin/env bash
# The generation path on a lent GPU after 2026-12-05's changes, in one device call: each point now
# keeps its host's environment (the "ran" lines name the GPU and host) and the roofline's GPU peak
# carries the L2 size from the CUDA driver (a decode whose bytes fit in L2 says so). Carry .whl/cli
# (the CLI's wheels and pytest), .whl/gsc/bwrap (Debian's, for the sandbox) and .whl/tinyllama (a
# copy of tests/llm_models.trained_llama()'s Hugging Face folder, 1.8 MB).
#   1. tests/backend/generate/test_roofline.py on the GPU (skipped on a host without one);
#   2. the tiny trained Llama through `optiboard generate --runtimes torch --device cuda`: its
#      weights + KV fit in L2, so its share of peak must carry the note;
#   3. bench/h200_llm.sh's torch stage again (Llama-3.2-1B shape, random fp16 weights, eager, and
#      compiled with COMPILE=1; 1 and 64 sequences), to compare with bench/results/h200_llm_torch.txt.
set -euo pipefail
source "$(dirname "$0")/device_setup.sh"

show() {  # a generate JSON as the CLI prints it: the table, then what ran and the notes
    python3 - "$1" <<'EOF'
import json, sys
from backend.generate.benchmark import GenerationReport
from backend.generate.cli_verbs import HEADERS, explain, rows_of
from backend.reporting.text import table
report = GenerationReport.from_dict(json.load(open(sys.argv[1])))
print(table(rows_of(report), HEADERS))
print("\n".join(explain(report)))
EOF
}

echo "== 1. the roofline's GPU peak"
python3 -m pytest -q -p no:cacheprovider --noconftest tests/backend/generate/test_roofline.py -rs
python3 -c "from backend.generate.roofline import device_peak; print(device_peak('cuda'))"

echo "== 2. the tiny trained Llama on the GPU (bytes per step fit in L2)"
python3 -m backend.cli generate .whl/tinyllama --runtimes torch --device cuda --prompt-lengths 16 \
    --new-tokens 32 --sequences 1,8 --preset quick --json > "$out/tiny.json" 2> "$out/tiny.err" \
    || tail -n 6 "$out/tiny.err"
show "$out/tiny.json" || true

echo "== 3. the Llama-3.2-1B shape (bytes per step far beyond L2)"
python3 bench/torch_hf_shape.py /tmp/llm/hf-1b
for compile in "" ${COMPILE:+--torch-compile}; do  # COMPILE=1: compiled too (270 s more)
    name="torch-fp16${compile:+-compiled}"
    echo "== optiboard generate /tmp/llm/hf-1b --runtimes torch $compile"
    timeout "$([ -n "$compile" ] && echo 270 || echo 150)" python3 -m backend.cli generate \
        /tmp/llm/hf-1b --runtimes torch --device cuda $compile --prompt-lengths 1024 \
        --new-tokens 128 --sequences 1,64 --preset quick --json > "$out/$name.json" \
        2> "$out/$name.err" || tail -n 6 "$out/$name.err"
    show "$out/$name.json" || true
done
