"""One line per configuration of an `optiboard generate --json` report (for logs of GPU runs).

python bench/llm_report.py REPORT.json [...]
"""

from __future__ import annotations

import json
import sys


def lines(report: dict) -> list[str]:
    rows = []
    for r in report["results"]:
        if r["status"] != "ok":
            rows.append(
                f"{r['runtime']} {r['prompt_tokens']}+{r['new_tokens']} x{r['sequences']}: "
                f"{r['status']}: {r['error']}"
            )
            continue
        roof = r.get("roofline") or {}
        peak_gbs = roof.get("peak", {}).get("bytes_per_s", 0) / 1e9
        agree = r.get("agreement") or []
        rows.append(
            f"{r['runtime']} {r['precision']} "
            f"graph={r['facts'].get('cuda_graph', r['facts'].get('cuda_graphs'))} "
            + (f"{r['facts']['compiled']} " if "compiled" in r["facts"] else "")
            + f"{r['prompt_tokens']}+{r['new_tokens']} x{r['sequences']}: "
            f"TTFT {r['ttft_p50_ms']:.2f}/{r['ttft_p99_ms']:.2f} ms, "
            f"ITL {r['itl_p50_ms']:.3f}/{r['itl_p99_ms']:.3f} ms, "
            f"decode {r['decode_tokens_per_s']:.0f} tok/s, "
            f"out {r['output_tokens_per_s']:.0f} tok/s, "
            f"weights {r['weights_mb']:.0f} MB, KV {r['kv_cache_mb']:.0f} MB, "
            f"peak RSS {r['peak_rss_mb']:.0f} MB, "
            f"{roof.get('fraction', float('nan')):.1%} of {peak_gbs:.0f} GB/s, "
            f"stable={r['stable']} ({r['stop_reason']}), agreement={agree}"
            + (
                f", engine: {r['facts']['engine']} ({r['facts'].get('sequences_together')} "
                "together)"
                if "sequences_together" in r["facts"]
                else ""
            )
        )
    return rows


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print("\n".join(lines(json.load(open(path)))))
