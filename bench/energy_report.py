"""Issue 24's energy table from `optiboard export JOB... --format json` (bench/h200_energy.sh).

Reads the stored results back as types (ConfigurationResult) and prints, per configuration:
samples/s, J per inference (median of the kept timed windows, with min-max), power while timed,
idle power (measured apart before the loop), J per inference above idle, cosine and top-1 against
the FP32 reference, what measured the energy (or why it could not be), and the versions that ran.

  python bench/energy_report.py RESULTS.json [--json SUMMARY.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.reporting.text import table  # noqa: E402
from backend.results import ConfigurationResult  # noqa: E402


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else f"{value:{spec}}"


def _spread(row: dict) -> str:
    """'0.0123 (0.0120-0.0125)': the median of the windows and their least and most."""
    if row["j_per_inference_p50"] is None:
        return "-"
    low, high = row["j_per_inference_min"], row["j_per_inference_max"]
    return f"{row['j_per_inference_p50']:.4g} ({low:.4g}-{high:.4g})"


def row_of(result: ConfigurationResult) -> dict:
    """One configuration's figures, as printed and as written to the summary JSON."""
    energy, acc = result.energy, result.accuracy
    measured = energy is not None and energy.measured
    return {
        "configuration": result.config_key,
        "status": result.status.value,
        "samples_per_s": result.throughput,
        "p50_ms": result.latency.p50 if result.latency else None,
        "j_per_inference_p50": energy.j_p50 if measured else None,
        "j_per_inference_min": energy.j_min if measured else None,
        "j_per_inference_max": energy.j_max if measured else None,
        "j_per_inference_windows": energy.j_per_item if measured else [],
        "j_per_inference_above_idle": energy.j_above_idle_p50 if measured else None,
        "watts_timed": energy.active_w if measured else None,
        "idle_watts": energy.idle_w if measured else None,
        "idle_seconds": energy.idle_seconds if measured else None,
        "shortest_window_s": energy.window_seconds_min if measured else None,
        "energy_source": energy.source if energy else "not recorded",
        "cosine_vs_fp32": acc.cosine_similarity if acc else None,
        "top1_vs_fp32": acc.top1_agreement if acc else None,
        "providers_used": result.providers_used,
        "error": result.error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", type=Path)
    parser.add_argument("--json", type=Path, help="write the summary here")
    args = parser.parse_args()
    results = [ConfigurationResult.from_dict(r) for r in json.loads(args.results.read_text())]
    rows = [row_of(r) for r in results]
    headers = ["configuration", "status", "samples/s", "J/inference (min-max)", "W timed",
               "idle W", "J above idle", "shortest window s", "cosine", "top-1"]  # fmt: skip
    cells = [
        [
            r["configuration"],
            r["status"],
            _num(r["samples_per_s"], ",.0f"),
            _spread(r),
            _num(r["watts_timed"], ".1f"),
            _num(r["idle_watts"], ".1f"),
            _num(r["j_per_inference_above_idle"], ".4g"),
            _num(r["shortest_window_s"], ".2f"),
            _num(r["cosine_vs_fp32"], ".6f"),
            _num(r["top1_vs_fp32"], ".1%"),
        ]
        for r in rows
    ]
    print(table(cells, headers))
    for source in sorted({r["energy_source"] for r in rows}):
        print(f"energy: {source}")
    for r in rows:
        if r["error"]:
            print(f"  {r['configuration']}: {r['error'].splitlines()[-1][:200]}")
    environment = results[0].environment if results else {}
    versions = {
        "python": environment.get("python"),
        "packages": environment.get("packages"),
        "gpus": environment.get("gpus"),
        "cpu": environment.get("cpu"),
        "backend_version": environment.get("backend_version"),
    }
    print("versions:", json.dumps(versions))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "versions": versions}, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
