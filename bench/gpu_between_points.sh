#!/usr/bin/env bash
# The torch runtime's between_points on CUDA (drops the last point's StaticCache and CUDA graphs,
# returns freed host memory, empties the caching allocator), in one device call: the product's
# `generate` on the Llama-3.2-1B shape (random fp16 weights, bench/torch_hf_shape.py) with
# torch.compile, a 1,024-token prompt and 128 new tokens, at 1 sequence alone, then at 16 and 1
# (the 1-sequence point after the larger one, its graphs recorded again). Carry .whl/cli and
# .whl/gsc as bench/h200_torch_grouped.sh does (results: bench/results/h100_between_points.txt).
# Every step's stderr goes to $out/errors.log.
set -uo pipefail
source "$(dirname "$0")/device_setup.sh"
python3 bench/torch_hf_shape.py /tmp/llm/hf-1b | tail -1

run() {  # name, timeout, --sequences value
    echo "== $1: --sequences $3" | tee -a "$out/errors.log"
    timeout "$2" python3 -m backend.cli generate /tmp/llm/hf-1b --runtimes torch --device cuda \
        --torch-compile --prompt-lengths 1024 --new-tokens 128 --sequences "$3" --preset quick \
        --json > "$out/$1.json" 2>>"$out/errors.log" || tail -n 8 "$out/errors.log"
    python3 - "$out/$1.json" <<'PY' || true
import json, sys
from backend.generate.benchmark import GenerationReport
from backend.generate.cli_verbs import HEADERS, rows_of
from backend.reporting.text import table
report = GenerationReport.from_dict(json.load(open(sys.argv[1])))
print(table(rows_of(report), HEADERS))
for r in report.results:
    print(r.runtime, r.sequences, r.status, "agreement", r.agreement, "peak RSS MB", r.peak_rss_mb)
PY
}

run alone 200 1
run after 330 16,1
