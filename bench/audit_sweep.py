"""A sweep's stored and printed figures beside the same figures recomputed outside the product.

Run: OPTIBOARD_DATA_DIR=DIR .venv/bin/python bench/audit_sweep.py JOB [JOB ...] [--seconds 0.5]

Reads the data folder's SQLite file with sqlite3 and the stored model files (the upload and each
configuration's optimized graph, by sha256), never the product's reading code; recomputes with
plain onnxruntime and numpy: accuracy against FP32 (accuracy.py's definitions, on the product's
inputs: numpy's default_rng(1234), standard normal, one draw per accuracy sample), p50 from its
own timing loop (the configuration's optimization level and threads, interleaved over rounds),
throughput from the stored raw samples, speedups, sizes, cost; then checks `show`, `compare`
and `export --format csv` print the stored figures. Ratios near 1 agree; FAIL lines are
discrepancies.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import settings  # noqa: E402  (the data folder, read as the product reads it)

LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
failures: list[str] = []


def check(ok: bool, what: str) -> str:
    if not ok:
        failures.append(what)
    return "ok  " if ok else "FAIL"


def load(data: Path, job_ids: list[int]) -> list[dict]:
    """Every result of the jobs, with its job's spec and its model's upload sha256."""
    db = sqlite3.connect(f"file:{data / 'optiboard.db'}?mode=ro", uri=True)
    rows = []
    query = (
        "select r.id, r.job_id, j.spec, m.sha256, m.id, r.payload, s.samples_ms from results r "
        "join jobs j on j.id = r.job_id join models m on m.id = j.model_id "
        "left join result_samples s on s.result_id = r.id where r.job_id = ? order by r.id"
    )
    for job in job_ids:
        for rid, jid, spec, sha, mid, payload, samples in db.execute(query, (job,)):
            result = json.loads(payload)
            result["samples_ms"] = json.loads(samples) if samples else []
            rows.append(
                {
                    "id": rid,
                    "job": jid,
                    "spec": json.loads(spec),
                    "model_sha": sha,
                    "model_id": mid,
                    "r": result,
                }
            )
    return rows


def artifact(data: Path, sha: str) -> Path:
    return data / "artifacts" / sha[:2] / sha


def session(path: Path, conf: dict, facts: dict, level: str | None = None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = LEVELS[level or conf["optimization_level"]]
    options.log_severity_level = 3
    if conf["intra_op_threads"]:
        options.intra_op_num_threads = conf["intra_op_threads"]
    if facts.get("int8_matmul") == "u8u8":
        options.add_session_config_entry("session.x64quantprecision", "1")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def feeds(sess: ort.InferenceSession, batch: int, count: int, seed: int) -> list[dict]:
    """random_inputs' draw for float inputs: one generator, standard normal, input by input."""
    rng = np.random.default_rng(seed)
    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
    out = []
    for _ in range(count):
        feed = {}
        for i in sess.get_inputs():
            shape = [batch if n == 0 else d for n, d in enumerate(i.shape)]
            feed[i.name] = rng.standard_normal(shape).astype(types[i.type])
        out.append(feed)
    return out


def metrics(ref: list[list[np.ndarray]], cand: list[list[np.ndarray]]) -> dict:
    """accuracy.py's figures, written again: max |a-b|, mean |a-b|/(|a|+1e-3 mean|a|+1e-12),
    mean cosine over (sample, output), top-1 agreement over rows of 2-D class scores."""
    max_abs, rel, count, cosines, agree, rows = 0.0, 0.0, 0, [], 0, 0
    for ref_outs, cand_outs in zip(ref, cand, strict=True):
        for a, b in zip(ref_outs, cand_outs, strict=True):
            if a.ndim == 2 and a.shape[1] > 1:
                agree += int((a.argmax(1) == b.argmax(1)).sum())
                rows += a.shape[0]
            a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
            diff = np.abs(a - b)
            max_abs = max(max_abs, float(diff.max()))
            rel += float((diff / (np.abs(a) + 1e-3 * np.abs(a).mean() + 1e-12)).sum())
            count += a.size
            cosines.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
    return {
        "max_abs_error": max_abs,
        "mean_rel_error": rel / count,
        "cosine_similarity": float(np.mean(cosines)),
        "top1_agreement": agree / rows if rows else None,
    }


def audit_accuracy(data: Path, row: dict) -> None:
    r, conf = row["r"], row["r"]["configuration"]
    batch, samples = conf["batch_size"], row["spec"]["measure"]["accuracy_samples"]
    source = session(artifact(data, row["model_sha"]), conf, {}, level="basic")
    cand = session(artifact(data, r["optimized_sha256"]), conf, r["runtime_facts"])
    inputs = feeds(cand, batch, samples, 1234)
    ref_out = [source.run(None, {k: v.astype(np.float32) for k, v in f.items()}) for f in inputs]
    mine = metrics(ref_out, [cand.run(None, f) for f in inputs])
    stored = r["accuracy"]
    for key, value in mine.items():
        theirs = stored[key]
        if value is None or theirs is None:
            same = value is theirs
        else:
            same = abs(value - theirs) <= 1e-6 + 1e-3 * abs(theirs)
        print(
            f"  {check(same, r['config_key'] + ' ' + key)} {key:18} stored {theirs!s:>12.10} "
            f"mine {value!s:>12.10}"
        )
    bound = row["spec"].get("min_cosine", 0.9)
    wrong = mine["cosine_similarity"] < bound
    verdict_ok = (r["status"] == "wrong_outputs") == wrong
    print(
        f"  {check(verdict_ok, r['config_key'] + ' verdict')} status {r['status']} with "
        f"cosine {mine['cosine_similarity']:.5f} against bound {bound}"
    )


def my_p50(data: Path, rows: list[dict], seconds: float, rounds: int) -> dict[int, float]:
    """Each configuration timed in turn, round after round (drift hits all alike): the median
    of its rounds' medians, on the product's timing feed (default_rng(0))."""
    sessions = {}
    for row in rows:
        r = row["r"]
        sess = session(
            artifact(data, r["optimized_sha256"]), r["configuration"], r["runtime_facts"]
        )
        feed = feeds(sess, r["configuration"]["batch_size"], 1, 0)[0]
        for _ in range(3):
            sess.run(None, feed)
        sessions[row["id"]] = (sess, feed)
    medians: dict[int, list[float]] = {rid: [] for rid in sessions}
    for _ in range(rounds):
        for rid, (sess, feed) in sessions.items():
            times, start = [], time.perf_counter()
            while time.perf_counter() - start < seconds or len(times) < 3:
                t0 = time.perf_counter_ns()
                sess.run(None, feed)
                times.append((time.perf_counter_ns() - t0) / 1e6)
            medians[rid].append(float(np.median(times)))
    return {rid: float(np.median(values)) for rid, values in medians.items()}


def cli(*args: str) -> str:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "backend.cli", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True).stdout


def parse_table(text: str) -> list[dict[str, str]]:
    """The CLI's left-aligned table: columns are the dashed rule's runs."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("--"))
    spans, pos = [], 0
    for run in lines[rule].split("  "):
        spans.append((pos, pos + len(run)))
        pos += len(run) + 2
    cut = [[line[a:b].strip() for a, b in spans] for line in lines[rule - 1 : rule]]
    out = []
    for line in lines[rule + 1 :]:
        if not line.strip() or len(line) < spans[-1][0]:
            break
        out.append(dict(zip(cut[0], (line[a:b].strip() for a, b in spans), strict=True)))
    return out


def near(text: str, value: float | None) -> bool:
    """A printed figure against the stored one: '-' for None, else within its last digit."""
    if value is None or text in ("-", ""):
        return value is None and text in ("-", "")
    number = text.rstrip("%").replace(",", "")
    places = len(number.split(".")[1]) if "." in number else 0
    scale = 100 if text.endswith("%") else 1
    return abs(float(number) - value * scale) <= 0.5 * 10**-places + 1e-12


RSS_CHILD = """
import sys, time, numpy as np, onnxruntime as ort
def read(key):
    return next(int(l.split()[1]) / 1024 for l in open('/proc/self/status') if l.startswith(key))
before = read('VmRSS:'); open('/proc/self/clear_refs', 'w').write('5')
o = ort.SessionOptions(); o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])
i = s.get_inputs()[0]; shape = [int(sys.argv[2]) if n == 0 else d for n, d in enumerate(i.shape)]
x = np.random.default_rng(0).standard_normal(shape).astype(np.float32); t = time.time()
while time.time() - t < 0.3: s.run(None, {i.name: x})
print(before, read('VmHWM:'))
"""


def audit_row(data: Path, row: dict, p50: dict[int, float], base: dict) -> None:
    """Raw samples -> stats and throughput; own p50; speedup; size; memory; cost."""
    r, conf, rid = row["r"], row["r"]["configuration"], row["id"]
    batch, lat, samples = conf["batch_size"], r["latency"], np.asarray(row["r"]["samples_ms"])
    print(f"{r['config_key']} (result {rid}, job {row['job']}, {r['status']})")
    stats = {
        "p50": np.percentile(samples, 50),
        "p99": np.percentile(samples, 99),
        "mean": samples.mean(),
        "count": samples.size,
    }
    same = all(abs(stats[k] - lat[k]) <= 1e-9 * max(1, abs(lat[k])) for k in stats)
    print(
        f"  {check(same, f'{rid} stats')} stats from {samples.size} raw samples: p50 "
        f"{stats['p50']:.5f} ms (stored {lat['p50']:.5f}), mean {stats['mean']:.5f} ms"
    )
    tp = batch * 1000.0 / samples.mean()
    print(
        f"  {check(abs(tp / r['throughput'] - 1) < 1e-9, f'{rid} throughput')} samples/s "
        f"{r['throughput']:.1f} = batch {batch} x 1000 / mean {tp:.1f}; batch/p50 gives "
        f"{batch * 1000 / lat['p50']:.1f} ({batch * 1000 / lat['p50'] / r['throughput']:.2f}x)"
    )
    if rid in p50:
        ratio = p50[rid] / lat["p50"]
        print(
            f"  {check(0.8 <= ratio <= 1.25, f'{rid} p50 mine/stored {ratio:.2f}')} own p50 "
            f"{p50[rid]:.5f} ms vs stored {lat['p50']:.5f}: {ratio:.2f}x (threads "
            f"{conf['intra_op_threads'] or 'ORT default'}, level {conf['optimization_level']})"
        )
    fp32 = base.get((row["model_id"], batch))
    if fp32 is not None and r["status"] == "ok":
        speed, tput = fp32["latency"]["p50"] / lat["p50"], r["throughput"] / fp32["throughput"]
        opposite = speed > 1.1 and tput < 0.9 or speed < 0.9 and tput > 1.1
        agree = not opposite and max(speed, tput) <= 1.25 * min(speed, tput)
        row["firm"] = bool(agree and r["stable"] and fp32["stable"])
        print(
            f"       speedup p50 {speed:.2f}x, throughput {tput:.2f}x "
            f"({'one speed' if agree else 'TWO SPEEDS'}), stable {r['stable']} / FP32 "
            f"{fp32['stable']}: firm {row['firm']}"
        )
    size = artifact(data, r["optimized_sha256"]).stat().st_size
    print(
        f"  {check(size == r['model_size_bytes'], f'{rid} size')} model_size_bytes "
        f"{r['model_size_bytes']:,} vs optimized file {size:,} B"
    )
    out = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, str(artifact(data, r["optimized_sha256"])), str(batch)],
        capture_output=True,
        text=True,
    ).stdout.split()
    before, hwm = (float(v) for v in out)
    theirs = r["peak_rss_mb"] - r["telemetry"]["rss_before_session_mb"]
    print(
        f"       peak RSS {r['peak_rss_mb']:.1f} MB (growth over session+loop "
        f"{theirs:.1f} MB); a bare onnxruntime process: {hwm:.1f} MB (growth {hwm - before:.1f})"
    )
    price = row["spec"]["prices"].get(conf["provider"])
    if price is not None and r["status"] == "ok":
        cost = price / (r["throughput"] * 3600) * 1e6
        print(f"       $/M at ${price}/h = {cost:.6g} (from samples/s {r['throughput']:.1f})")
        row["cost"] = cost


def audit_cli(rows: list[dict], base: dict, job_ids: list[int]) -> None:
    """show / compare / export csv against the stored figures and each other."""
    by_key = {(row["job"], row["r"]["config_key"]): row for row in rows}
    fields = (("p50 ms", "p50"), ("p99 ms", "p99"))
    for job in job_ids:
        for line in parse_table(cli("show", str(job))):
            row = by_key[(job, line["configuration"])]
            r = row["r"]
            lat = r["latency"] or {}
            wanted = {name: lat.get(key) for name, key in fields}
            wanted |= {
                "samples/s": r["throughput"],
                "$/M inf": row.get("cost"),
                "cosine": (r["accuracy"] or {}).get("cosine_similarity"),
            }
            bad = [f"{n} {line[n]} vs {v}" for n, v in wanted.items() if not near(line[n], v)]
            check(
                not bad and line["status"] == r["status"],
                f"show {job} {line['configuration']}: {bad}",
            )
    ids = ",".join(map(str, job_ids))
    compared = parse_table(cli("compare", *map(str, job_ids)))
    for line in compared:
        match = [
            row
            for row in rows
            if row["job"] == int(line["job"])
            and row["r"]["configuration"]["precision"] == line["precision"]
            and str(row["r"]["configuration"]["batch_size"]) == line["batch"]
        ]
        row = match[0]
        r, fp32 = row["r"], base.get((row["model_id"], row["r"]["configuration"]["batch_size"]))
        speed = (
            fp32["latency"]["p50"] / r["latency"]["p50"] if fp32 and r["status"] == "ok" else None
        )
        costs = row.get("cost")
        bad = [
            f"{n} {line[n]} vs {v}"
            for n, v in (("speedup (p50)", speed), ("$/M inf", costs))
            if not near(line[n], v)
        ]
        check(not bad, f"compare {line['label']}: {bad}")
    exported = list(
        csv.DictReader(io.StringIO(cli("export", *map(str, job_ids), "--format", "csv")))
    )
    for line in exported:
        row = by_key[(int(line["job_id"]), line["config_key"])]
        r = row["r"]
        for name, value in (
            ("throughput", r["throughput"]),
            ("cost_per_million", row.get("cost")),
            ("model_size_bytes", r["model_size_bytes"]),
        ):
            shown = float(line[name]) if line[name] else None
            same = (shown is None) == (value is None) and (
                value is None or abs(shown - value) <= 1e-9 * abs(value)
            )
            check(same, f"export {line['config_key']} {name} {line[name]} vs {value}")
    said = f"cli: show {ids}: {len(rows)} rows, compare: {len(compared)} rows, export: "
    print(f"{said}{len(exported)} rows checked")
    firm_verdicts(rows, job_ids)


def firm_verdicts(rows: list[dict], job_ids: list[int]) -> None:
    """The Compare page's "Speedup firm" (the product's frame) against this script's rule."""
    from backend.reporting import comparison, frames

    frame = frames.results_frame(job_ids=job_ids)
    for _, part in frame.groupby("model_id"):
        view = frames.add_speedups(part, comparison.baseline_of(part))
        for result_id, firm in zip(view["result_id"], view["speedup_firm"], strict=True):
            row = next(row for row in rows if row["id"] == result_id)
            if "firm" in row:
                mine = row["firm"]
                print(
                    f"  {check(bool(firm) == mine, f'{result_id} firm')} "
                    f"{row['r']['config_key']} (job {row['job']}): page firm {bool(firm)}, "
                    f"mine {mine}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int, nargs="+")
    parser.add_argument("--seconds", type=float, default=0.3, help="per configuration per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    data = settings.data_dir()
    rows = load(data, args.jobs)
    measured = [row for row in rows if row["r"]["status"] in ("ok", "wrong_outputs")]
    base = {
        (row["model_id"], row["r"]["configuration"]["batch_size"]): row["r"]
        for row in measured
        if row["r"]["configuration"]["precision"] == "fp32" and row["r"]["status"] == "ok"
    }
    print(
        f"onnxruntime {ort.__version__}, {os.cpu_count()} logical cores; timing {args.rounds} "
        f"rounds x {args.seconds} s per configuration, interleaved"
    )
    p50 = my_p50(data, measured, args.seconds, args.rounds)
    for row in measured:
        audit_row(data, row, p50, base)
        audit_accuracy(data, row)
    audit_cli(rows, base, args.jobs)
    print(f"\n{len(failures)} discrepancies" + "".join(f"\n  {f}" for f in failures))


if __name__ == "__main__":
    main()
