"""A serving study's stored figures beside the same figures measured and recomputed outside it.

Run: OPTIBOARD_DATA_DIR=DIR OPTIBOARD_TRITON_VENV=VENV .venv/bin/python bench/audit_serving.py JOB \
        [--repeats 3] [--duration 5]

For each configuration of serving study JOB (variant x batching policy, concurrency loads only):
- gets the model repository with `optiboard serve export` (its local-python-backend folder: the
  repository the study's server ran) and starts tritonserver itself (the serving venv's binary,
  found by server.find_environment; no sandbox), never through the product's serve();
- drives it with its own closed loop: N threads, each with tritonclient's synchronous HTTP client,
  every request timed around client.infer; then the product's load generator (run_load_in_child)
  against the same server, alternating which goes first, `--repeats` times;
- reads Triton's /v2/models/NAME/stats itself before and after each run: requests, queue ns /
  requests, compute ns / requests, inferences / executions (mean batch);
- from its own raw samples: req/s = completed / (last answer - first send), p50/p99 by
  np.percentile, and the stability rule (stability.py's docstring) recomputed;
- checks the stored points' own arithmetic (count, req/s x duration, histogram, Prometheus
  counters, verdict against the tolerance) and that `show`, `export` csv/json and the Serve page's
  table (view.measured_table) carry the same figures.
Ratios near 1 agree; FAIL lines are discrepancies. Every server it starts is stopped.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import settings  # noqa: E402  (the data folder, read as the product reads it)

PYTHON = sys.executable
failures: list[str] = []


def check(ok: bool, what: str) -> str:
    if not ok:
        failures.append(what)
    return "ok  " if ok else "FAIL"


def cli(*args: str) -> str:
    done = subprocess.run(
        [PYTHON, "-m", "backend.cli", *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def stored(data: Path, job: int) -> tuple[dict, list[dict], int]:
    """The study's spec, its stored rows and its model id, read with sqlite3."""
    db = sqlite3.connect(f"file:{data / 'optiboard.db'}?mode=ro", uri=True)
    spec, model = db.execute("select spec, model_id from jobs where id = ?", (job,)).fetchone()
    rows = [
        {"kind": k, "key": key, "configuration": c, "p": json.loads(p)}
        for k, key, c, p in db.execute(
            "select kind, point_key, configuration, payload from serving_points "
            "where job_id = ? order by id",
            (job,),
        )
    ]
    return json.loads(spec), rows, model


# ---- a tritonserver of our own -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


class Server:
    """tritonserver on the exported local repository, started and stopped here."""

    def __init__(self, repository: Path, name: str, workdir: Path) -> None:
        from backend.serving.server import find_environment  # where the binary is, nothing else

        env = find_environment()
        self.name, self.http, self.metrics = name, free_port(), free_port()
        self.log = workdir / f"{name}-{self.http}.log"
        argv = [
            str(env.binary),
            f"--model-repository={repository}",
            f"--backend-directory={env.backends}",
            "--allow-grpc=false",
            "--http-address=127.0.0.1",
            f"--http-port={self.http}",
            "--metrics-address=127.0.0.1",
            f"--metrics-port={self.metrics}",
            "--allow-cpu-metrics=false",
            "--disable-auto-complete-config",
            "--log-verbose=0",
            f"--backend-config=python,shm-region-prefix-name=audit_serve_{os.getpid()}_",
        ]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                argv, env=env.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited: {self.log.read_text()[-2000:]}")
            try:
                get_json(f"{self.base}/models/{name}/stats")
                urllib.request.urlopen(f"{self.base}/models/{name}/ready", timeout=1)
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("tritonserver was not ready in 60 s")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.http}/v2"

    def stats(self) -> dict:
        return get_json(f"{self.base}/models/{self.name}/stats")["model_stats"][0]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # stubs left by a server that died
        except ProcessLookupError:
            pass
        self.process.wait()


def server_side(before: dict, after: dict) -> dict:
    """Triton's own statistics between two reads: requests, queue and compute ms per request,
    inferences per execution."""

    def delta(key: str, field: str) -> int:
        return int(after["inference_stats"][key][field]) - int(
            before["inference_stats"][key][field]
        )

    requests = delta("success", "count")
    executions = int(after["execution_count"]) - int(before["execution_count"])
    inferences = int(after["inference_count"]) - int(before["inference_count"])
    return {
        "requests": requests,
        "queue_ms": delta("queue", "ns") / max(delta("queue", "count"), 1) / 1e6,
        "compute_ms": delta("compute_infer", "ns") / max(delta("compute_infer", "count"), 1) / 1e6,
        "mean_batch": inferences / executions if executions else 0.0,
    }


# ---- our own closed loop ---------------------------------------------------------------------


def closed_loop(server: Server, config: dict, in_flight: int, duration: float) -> np.ndarray:
    """N threads, each sending the next request when its last returns, for `duration` s after
    a barrier; rows of (sent, done) in seconds from the barrier."""
    import tritonclient.http as httpclient

    tensor = config["input"][0]
    dims = [int(d) for d in tensor["dims"]]
    shape = [1, *dims] if config.get("max_batch_size", 0) else dims
    dtype = tensor["data_type"].removeprefix("TYPE_")
    data = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    barrier, rows, lock = threading.Barrier(in_flight + 1), [], threading.Lock()
    start: list[float] = []

    def client() -> None:
        http = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}", concurrency=1)
        item = httpclient.InferInput(tensor["name"], shape, dtype)
        item.set_data_from_numpy(data, binary_data=True)
        for _ in range(3):
            http.infer(server.name, [item])
        barrier.wait()
        mine = []
        while (sent := time.perf_counter()) - start[0] < duration:
            http.infer(server.name, [item])
            mine.append((sent, time.perf_counter()))
        with lock:
            rows.extend(mine)
        http.close()

    threads = [threading.Thread(target=client) for _ in range(in_flight)]
    for t in threads:
        t.start()
    start.append(time.perf_counter() + 0.05)
    time.sleep(0.05)
    barrier.wait()
    for t in threads:
        t.join()
    return np.array(sorted(rows)) - start[0]


def stability_of(sent: np.ndarray, done: np.ndarray, window: float, needed: int, tol: float):
    """stability.py's rule recomputed: windows of `window` s by answer time (at least
    `window`, a whole number of them), the last `needed` each within tol of their mean, in
    throughput and mean latency. Returns (stable, rate spread, latency spread)."""
    first, total = sent.min(), done.max() - sent.min()
    width = min(window, total / needed)
    count = max(int(total / width), 1)
    width = total / count
    rates, means = [], []
    for i in range(count):
        low, high = first + i * width, first + (i + 1) * width
        inside = (done >= low) & ((done < high) | ((i == count - 1) & (done == high)))
        rates.append(inside.sum() / width)
        means.append(float(np.mean((done - sent)[inside])) if inside.any() else float("nan"))
    spread = [
        max(abs(v - np.mean(vals)) for v in vals) / np.mean(vals)
        for vals in (rates[-needed:], means[-needed:])
    ]
    return spread[0] <= tol and spread[1] <= tol, spread[0], spread[1]


def mean_batch(histogram: dict) -> float:
    return sum(int(k) * v for k, v in histogram.items()) / sum(histogram.values())


def summary(rows: np.ndarray) -> dict:
    sent, done = rows[:, 0], rows[:, 1]
    ms = 1000 * (done - sent)
    return {
        "count": len(rows),
        "rps": len(rows) / (done.max() - sent.min()),
        "p50": float(np.percentile(ms, 50)),
        "p99": float(np.percentile(ms, 99)),
    }


# ---- the product's load generator against our server ---------------------------------------


def product_point(server: Server, config: dict, policy: dict, in_flight: int, duration: float):
    """run_load_in_child (the study's generator) against our server: its LoadPoint."""
    from backend.serving.loadgen import run_load_in_child
    from backend.serving.repository import TensorSpec
    from backend.serving.server import ServerEndpoint
    from backend.serving.types import BatchingPolicy, LoadSpec, Scenario
    from backend.specs import MEASURE_PRESETS

    batched = int(config.get("max_batch_size", 0)) > 0
    tensors = tuple(
        TensorSpec(t["name"], "float32", tuple(int(d) for d in t["dims"])) for t in config["input"]
    )
    endpoint = ServerEndpoint(
        http_url=f"127.0.0.1:{server.http}",
        metrics_url=f"http://127.0.0.1:{server.metrics}/metrics",
        model=server.name,
        inputs=tensors,
        outputs=tuple(t["name"] for t in config["output"]),
        max_batch_size=int(config.get("max_batch_size", 0)),
        policy=BatchingPolicy(**{**policy, "preferred_batch_sizes": ()}),
        intra_op_threads=2 if batched else 2,
    )
    spec = LoadSpec(Scenario.CONCURRENCY, duration_s=duration, concurrency=in_flight)
    return run_load_in_child(endpoint, spec, MEASURE_PRESETS["quick"])


# ---- the stored study's own arithmetic and its three displays ---------------------------------


def check_stored(rows: list[dict], tolerance: float) -> None:
    print("stored points, their own arithmetic:")
    for row in (r for r in rows if r["kind"] == "point"):
        p, m = row["p"], row["p"]["server_metrics"]
        lat, hist = p["latency"], {int(k): v for k, v in p["batch_histogram"].items()}
        n, dur = lat["count"], p["spec"]["duration_s"]
        spread = [float(x) / 100 for x in re.findall(r"±([\d.]+)%", p["stability_note"])]
        inferences = sum(k * v for k, v in hist.items())
        print(f" {row['key']}")
        print(
            f"  {check(n == m['nv_inference_request_success'], 'count vs Triton')} requests {n} = "
            f"Triton successes {m['nv_inference_request_success']:.0f}; errors {p['errors']}"
        )
        print(
            f"  {check(abs(p['achieved_rps'] * dur / n - 1) < 0.02, 'req/s x duration')} "
            f"req/s {p['achieved_rps']:.1f} x {dur:g} s = {p['achieved_rps'] * dur:.0f} "
            f"(span {n / p['achieved_rps']:.4f} s: completed / (last answer - first send))"
        )
        batch = inferences / sum(hist.values())
        print(
            f"  {check(inferences == m['nv_inference_count'], 'histogram')} histogram "
            f"{sum(hist.values())} executions, {inferences} inferences = nv_inference_count "
            f"{m['nv_inference_count']:.0f}, exec {m['nv_inference_exec_count']:.0f}; mean batch "
            f"{batch:.3f}"
        )
        q_prom = m["nv_inference_queue_duration_us"] / n / 1000
        c_prom = m["nv_inference_compute_infer_duration_us"] / n / 1000
        print(
            f"  {check(abs(q_prom - p['queue_ms']) < 0.02 + 0.02 * q_prom, 'queue')} queue "
            f"{p['queue_ms']:.4f} ms (stats API) vs Prometheus {q_prom:.4f}; "
            f"{check(abs(c_prom - p['compute_ms']) < 0.02 + 0.02 * c_prom, 'compute')} compute "
            f"{p['compute_ms']:.4f} vs {c_prom:.4f}"
        )
        rule = bool(spread) and max(spread) <= tolerance and not p["generator_saturated"]
        print(
            f"  {check(rule == p['stable'], 'verdict')} stable={p['stable']}: spreads "
            f"{spread} against {tolerance:g}; saturated={p['generator_saturated']}; "
            f"energy: {p['energy']['source'] if p['energy'] else None}"
        )


def check_displays(job: int, rows: list[dict]) -> None:
    """`show`, `export` csv and json, and view.measured_table carry the same figures."""
    from backend.serving.view import measured_table, study_view

    print("displays:")
    table = measured_table(study_view(job))
    shown = cli("show", str(job))
    exported = list(csv.DictReader(io.StringIO(cli("export", str(job), "--format", "csv"))))
    dumped = [
        r for r in json.loads(cli("export", str(job), "--format", "json")) if r["kind"] == "point"
    ]
    points = [r["p"] for r in rows if r["kind"] == "point"]
    lines = [ln for ln in shown.splitlines() if " in flight " in ln]
    together = zip(table.to_dict("records"), exported, dumped, points, strict=True)
    for i, (page, exp, dump, point) in enumerate(together):
        figures = {
            "req/s": (point["achieved_rps"], 1),
            "p50 (ms)": (point["latency"]["p50"], 2),
            "p99 (ms)": (point["latency"]["p99"], 2),
            "queue (ms)": (point["queue_ms"], 2),
            "compute (ms)": (point["compute_ms"], 2),
        }
        bad = [k for k, (v, d) in figures.items() if not (round(v, d) == page[k] == float(exp[k]))]
        same_json = (
            dump["latency"] == point["latency"] and dump["achieved_rps"] == point["achieved_rps"]
        )
        row = lines[i].split() if i < len(lines) else []
        numbers = {float(t) for t in row if re.fullmatch(r"[\d.]+", t)}
        in_show = all(float(page[k]) in numbers for k in figures)
        print(
            f"  {check(not bad and same_json and in_show, f'display {i}')} "
            f"{page['configuration'][:40]} "
            f"| {page['load']}: page {page['req/s']} req/s p50 {page['p50 (ms)']} p99 "
            f"{page['p99 (ms)']} queue {page['queue (ms)']} compute {page['compute (ms)']} batch "
            f"{page['mean batch']} verdict {page['verdict']}; csv {exp['req/s']}/{exp['p50 (ms)']}/"
            f"{exp['p99 (ms)']}; json same={same_json}; show row has them={in_show}"
            + (f" MISMATCH {bad}" if bad else "")
        )
    sources = [ln for ln in shown.splitlines() if ln.startswith("J/request")]
    cells = [(e["J/request"], e.get("energy source", "(no such column)")) for e in exported]
    said = [p["energy"]["source"] if p["energy"] else None for p in points]
    ok = [c[1] for c in cells] == said
    print(f"  energy line in show: {sources}")
    print(f"  {check(ok, 'csv energy source')} csv (J/request, energy source) cells: {cells}")


def repository(model: int, data: Path, variant: dict, policy: dict, workdir: Path) -> Path:
    """`optiboard serve export` of the variant under the policy; its local-python-backend folder."""
    sha = variant["sha256"]
    out = workdir / f"{sha[:12] or 'original'}.zip"
    args = ["serve", "export", str(model), "--max-batch-size", str(policy["max_batch_size"])]
    args += ["--delay-us", str(policy["max_queue_delay_us"]), "--instances"]
    args += [str(policy["instance_count"]), "-o", str(out)]
    if not policy["dynamic_batching"]:
        args.append("--no-dynamic-batching")
    if sha:
        args += ["--onnx", str(data / "artifacts" / sha[:2] / sha)]
    cli(*args)
    folder = workdir / out.stem
    with zipfile.ZipFile(out) as archive:
        archive.extractall(folder)
    return folder / "local-python-backend"


def compare(server: Server, config: dict, policy: dict, point: dict, repeats: int, dur: float):
    n = point["spec"]["concurrency"]
    lat = point["latency"]
    print(
        f"  stored by the study: {point['achieved_rps']:.1f} req/s, p50 {lat['p50']:.3f} ms, p99 "
        f"{lat['p99']:.3f} ms, queue {point['queue_ms']:.3f}, compute {point['compute_ms']:.3f}, "
        f"mean batch {mean_batch(point['batch_histogram']):.2f}"
    )
    ratios = {"mine": [], "product": []}
    for rep in range(repeats):
        order = ("mine", "product") if rep % 2 == 0 else ("product", "mine")
        for who in order:
            load = os.getloadavg()[0]
            before = server.stats()
            if who == "mine":
                rows = closed_loop(server, config, n, dur)
                after = server.stats()
                s, side = summary(rows), server_side(before, after)
                stable, rs, ls = stability_of(rows[:, 0], rows[:, 1], 0.1, 2, 0.25)
                whole = stability_of(rows[:, 0], rows[:, 1], dur / 2, 2, 0.25)
                print(
                    f"  [{rep}] mine    {s['rps']:7.1f} req/s p50 {s['p50']:.3f} p99 "
                    f"{s['p99']:.3f} | Triton: {side['requests']} req (mine {s['count']}+"
                    f"{3 * n} warm-up), queue {side['queue_ms']:.3f} compute "
                    f"{side['compute_ms']:.3f} batch {side['mean_batch']:.2f} | verdict on the "
                    f"last 2 x 0.1 s (before the fix): {stable} (±{100 * rs:.1f}%, "
                    f"±{100 * ls:.1f}%); "
                    f"on halves (the fix): {whole[0]} "
                    f"(±{100 * whole[1]:.1f}%, ±{100 * whole[2]:.1f}%) | load {load:.2f}"
                )
                ratios["mine"].append((s["rps"], s["p50"], s["p99"]))
            else:
                p = product_point(server, config, policy, n, dur)
                after = server.stats()
                side = server_side(before, after)
                extra = side["requests"] - p.latency.count
                print(
                    f"  [{rep}] product {p.achieved_rps:7.1f} req/s p50 {p.latency.p50:.3f} p99 "
                    f"{p.latency.p99:.3f} | queue {p.queue_ms:.3f} vs Triton {side['queue_ms']:.3f}"
                    f", compute {p.compute_ms:.3f} vs {side['compute_ms']:.3f}, batch "
                    f"{p.mean_batch:.2f} vs {side['mean_batch']:.2f} ({extra} warm-up requests in "
                    f"our diff) | {p.stability_note[:60]} | load {load:.2f}"
                )
                ok = (
                    abs(p.queue_ms - side["queue_ms"]) <= 0.05 + 0.05 * side["queue_ms"]
                    and abs(p.compute_ms - side["compute_ms"]) <= 0.02 + 0.05 * side["compute_ms"]
                    and abs(p.mean_batch - side["mean_batch"]) <= 0.05 * side["mean_batch"]
                )
                print(f"        {check(ok, 'server side')} queue/compute/batch vs Triton's")
                ratios["product"].append((p.achieved_rps, p.latency.p50, p.latency.p99))
    mine, product = np.median(ratios["mine"], axis=0), np.median(ratios["product"], axis=0)
    s = (point["achieved_rps"], lat["p50"], lat["p99"])
    print(
        "  medians: mine {:.1f} req/s p50 {:.3f} p99 {:.3f}; product here {:.1f}/{:.3f}/{:.3f}; "
        "stored/mine req/s {:.2f}x p50 {:.2f}x p99 {:.2f}x; product-here/mine {:.2f}x {:.2f}x "
        "{:.2f}x".format(
            *mine,
            *product,
            s[0] / mine[0],
            s[1] / mine[1],
            s[2] / mine[2],
            product[0] / mine[0],
            product[1] / mine[1],
            product[2] / mine[2],
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", type=int)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--duration", type=float, default=0.0, help="default: the study's")
    args = parser.parse_args()
    from backend.serving.types import BatchingPolicy

    data = Path(settings.DATA_DIR.get())
    spec, rows, model = stored(data, args.job)
    check_stored(rows, 0.25 if spec["measure"] == "quick" else 0.10)
    check_displays(args.job, rows)
    points = {r["key"]: r["p"] for r in rows if r["kind"] == "point"}
    with tempfile.TemporaryDirectory(prefix="audit-serving-") as tmp:
        for variant in spec["variants"]:
            for policy in spec["policies"]:
                label = BatchingPolicy(**{**policy, "preferred_batch_sizes": ()}).label
                prefix = f"{variant['sha256'][:12] or 'original'}|{label}|"
                mine = [k for k in points if k.startswith(prefix)]
                if not mine:
                    continue
                served = points[mine[0]]["policy"]  # a fixed-batch file's differs from the ask
                folder = repository(model, data, variant, served, Path(tmp))
                name = next(p.name for p in folder.iterdir() if p.is_dir())
                server = Server(folder, name, Path(tmp))
                try:
                    config = get_json(f"{server.base}/models/{name}/config")
                    print(
                        f"{variant['name']} · max batch {config.get('max_batch_size')}, "
                        f"dynamic batching {'dynamic_batching' in config} (own tritonserver pid "
                        f"{server.process.pid})"
                    )
                    for key in mine:
                        if points[key]["spec"]["scenario"] != "concurrency":
                            continue
                        print(f" {key}")
                        dur = args.duration or points[key]["spec"]["duration_s"]
                        point = points[key]
                        compare(server, config, point["policy"], point, args.repeats, dur)
                finally:
                    server.stop()
    print(f"{len(failures)} discrepancies" + (": " + "; ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
