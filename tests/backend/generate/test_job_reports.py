"""A finished generation job read back from the terminal (`optiboard show` and `export`) and the
roofline's peak: one per host, the same for every point of a job, with the CPU's last-level
cache beside every share of it. The job is the real one of tests/backend/jobs (the trained tiny
Llama uploaded as a GenAI folder zip, FP32 and INT4 at 1 and 2 sequences) run by the real worker."""

from __future__ import annotations

import csv
import io
import json
import socket
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from backend.generate import points
from backend.generate.cli_verbs import roofline_notes
from backend.generate.roofline import (
    PeakBandwidth,
    cache_from_sysfs,
    cpu_peak,
    last_level_cache,
    roofline,
)
from backend.host import describe_environment
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.specs import SweepSpec
from storage.repo import serving as point_store
from tests.backend.jobs.test_generation_job import submitted
from tests.backend.test_cli import optiboard
from tests.workers import run_worker_once

pytest.importorskip("onnxruntime_genai")
pytest.importorskip("transformers")


def test_show_and_export_read_a_generation_jobs_points(
    data_dir: Path, tmp_path: Path, mlp_path: Path
) -> None:
    _, job_id = submitted(tmp_path)
    run_worker_once(timeout=600)
    stored = {
        p.point_key: p.payload for p in point_store.list_points([job_id], point_store.GENERATION)
    }
    assert len(stored) == 4 and {p["status"] for p in stored.values()} == {"ok"}

    # one peak for every point of the job (the walkthrough's two points had two)
    peaks = {json.dumps(p["peak_bandwidth"], sort_keys=True) for p in stored.values()}
    assert len(peaks) == 1
    level, size, _ = last_level_cache()
    for payload in stored.values():
        roof = payload["roofline"]
        assert roof["peak"] == payload["peak_bandwidth"]
        assert roof["bytes_per_step"] < 8 * 2**20  # the tiny Llama: a couple of MiB a step
        if size:  # this host says its cache: the note says the bytes sit in it
            assert roof["in_cache"] is (roof["bytes_per_step"] <= size)
            if roof["in_cache"]:
                assert f" MB {level}: this is not a memory-bandwidth figure" in roof["note"]
        else:
            assert roof["in_cache"] is None and "cache size is unknown" in roof["note"]

    shown = optiboard("show", str(job_id))
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "succeeded, 4/4 generation points" in out
    assert "TTFT p50/p99 ms" in out and "of peak" in out and "ppl" in out
    rows = [
        line.split()
        for line in out.splitlines()
        if line.split()[:2] in (["fp32", "ort-genai"], ["int4", "ort-genai"])
    ]
    assert len(rows) == 4
    for row, payload in zip(rows, stored.values(), strict=True):  # in cache: no share printed
        cached = bool(payload["roofline"]["in_cache"])
        assert ("in cache" in " ".join(row)) is cached
        assert any(cell.endswith("%") for cell in row[-6:]) is not cached, row
    assert out.count("peak bandwidth: ") == 1  # the one peak, with where it came from
    genai = metadata.version("onnxruntime-genai")
    assert "FP32 (model " in out and f"onnxruntime-genai {genai}" in out  # what ran
    here = describe_environment()  # the worker's child ran on this host: its CPU and name
    cpu = f"{here['cpu']}, {here['cpu_count_logical']} logical cores"
    assert f"; on {cpu} (host {socket.gethostname()})" in out
    assert all(p["environment"]["device"] == "cpu" for p in stored.values())
    held = [key for key, payload in stored.items() if payload["roofline"]["in_cache"]]
    for key, payload in stored.items():  # a note other than the cache's: beside its point
        note = payload["roofline"]["note"]
        assert (f"of peak, {key}: {note}" in out) is (bool(note) and key not in held), out
        assert f"{payload['perplexity']['perplexity']:.3f}" in out
    # the cache's sentence once, naming the points it covers, as Compare says it under its
    # table (show printed "of peak, KEY: the 1.x MB ... fit in the 32 MB L3" for every point)
    said = [line for line in out.splitlines() if "fit in the " in line]
    assert len(said) == (1 if held else 0), said
    if held:
        who = f"all {len(held)} points" if len(held) == len(stored) else "; ".join(held)
        assert said[0].startswith("No share of peak bandwidth is shown for ") and who in said[0]
        if len(held) == len(stored):  # the page's own sentence, its points named alike
            assert said == points.in_cache_notes(points.generation_frame([job_id]))

    # a point stored before the cache was recorded beside it: said unknown, not left bare
    before = {k: v for k, v in stored[key]["roofline"].items() if k not in ("in_cache", "note")}
    (said,) = roofline_notes([(key, before)])
    assert said.startswith("of peak: 1 point was stored before the CPU's last-level cache")

    csv_path, json_path = tmp_path / "g.csv", tmp_path / "g.json"
    assert optiboard("export", str(job_id), "-o", str(csv_path)).returncode == 0
    table = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert [r["key"] for r in table] == list(stored)
    for row in table:
        payload = stored[row["key"]]
        for column in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "peak_rss_mb"):
            assert float(row[column]) == pytest.approx(payload[column])
        assert float(row["output_tokens_per_s"]) == pytest.approx(payload["output_tokens_per_s"])
        assert float(row["weights_mb"]) + float(row["kv_cache_mb"]) == pytest.approx(
            float(row["memory_mb"])
        )
        if payload["roofline"]["in_cache"]:  # no share of DRAM peak for bytes held in cache
            assert row["bandwidth_fraction"] == "" and row["bandwidth_in_cache"] == "True"
        else:
            assert float(row["bandwidth_fraction"]) == pytest.approx(
                payload["roofline"]["fraction"]
            )
        assert row["bandwidth_note"] == payload["roofline"]["note"]
        assert float(row["perplexity"]) == pytest.approx(payload["perplexity"]["perplexity"])
        assert f"onnxruntime-genai {genai}" in row["runtime_versions"]
        assert (row["hardware"], row["ran_on"]) == (cpu, socket.gethostname())
        assert json.loads(row["facts"]) == payload["facts"]
        assert row["peak_bandwidth"] == payload["peak_bandwidth"]["source"]
    int4 = [r for r in table if r["variant"] == "int4"]
    assert all(0 <= float(r["greedy_agreement"]) <= 1 for r in int4)

    assert (
        optiboard("export", str(job_id), "--format", "json", "-o", str(json_path)).returncode == 0
    )
    records = json.loads(json_path.read_text())
    assert {
        r["key"]: {k: v for k, v in r.items() if k not in ("job_id", "point_id", "key")}
        for r in records
    } == stored

    # a sweep beside it: refused in one sentence, nothing written
    sweep = jobs.submit_sweep(ingest_file(mlp_path, "mlp.onnx").id, SweepSpec())
    mixed = optiboard("export", str(sweep.id), str(job_id), "-o", str(tmp_path / "mixed.csv"))
    assert mixed.returncode == 2 and mixed.stderr.count("\n") == 1
    assert mixed.stderr.strip() == (
        f"error: Job {job_id} is a generation benchmark and job {sweep.id} is not, and their "
        "columns differ; export them separately."
    )
    assert not (tmp_path / "mixed.csv").exists()

    # the concurrency axis ticks at the counts measured, 1 and 2, never at 0.125 or 0.25
    frame = points.generation_frame([job_id])
    # the speed axis says its unit once ("output tokens/s (all sequences) (tokens/s)" lost its
    # ")" at 1100 px), and the Pareto stars at the range's edge are drawn whole
    speed = points.perplexity_vs_speed(frame)
    assert speed.layout.xaxis.title.text == "output tokens, all sequences (tokens/s)"
    assert speed.data and all(trace.cliponaxis is False for trace in speed.data)
    assert points.tokens_vs_memory(frame).layout.yaxis.title.text.count("tokens/s") == 1
    for draw in (points.ttft_vs_sequences, points.itl_vs_sequences):
        axis = draw(frame).layout.xaxis
        assert axis.type == "log" and list(axis.tickvals) == [1, 2]
        assert list(axis.ticktext) == ["1", "2"]


def test_the_cpu_peak_is_measured_once_per_host_and_kept(data_dir: Path) -> None:
    first = cpu_peak()
    kept = next((data_dir / "cache").glob("copy-bandwidth-*.json"))
    written = kept.read_text()
    assert first.bytes_per_s > 1e9 and "kept for every job on this host" in first.source
    assert cpu_peak() == first  # not measured again: the same figure for every later point
    assert kept.read_text() == written
    kept.write_text(json.dumps({**json.loads(written), "cpu": "another CPU"}))
    again = cpu_peak()  # another CPU's figure (a moved data folder) is measured anew
    assert json.loads(kept.read_text())["cpu"] == first.device
    assert again.bytes_per_s > 1e9
    kept.write_text("{not json")
    assert cpu_peak().bytes_per_s > 1e9  # a damaged file too


def _lscpu_cache() -> tuple[str, int] | None:
    """lscpu's highest-level data or unified cache, per instance, as ("L3", bytes)."""
    try:
        listed = subprocess.run(
            ["lscpu", "-B", "-C=LEVEL,TYPE,ONE-SIZE"], capture_output=True, text=True, timeout=30
        ).stdout
    except OSError:
        return None
    rows = [line.split() for line in listed.splitlines()[1:]]
    sizes = [(int(r[0]), int(r[2])) for r in rows if len(r) == 3 and r[1] != "Instruction"]
    return (f"L{max(sizes)[0]}", max(sizes)[1]) if sizes else None


def test_the_last_level_cache_read_from_sysfs_is_lscpus(tmp_path: Path) -> None:
    sysfs, lscpu = cache_from_sysfs(), _lscpu_cache()
    if sysfs is None or lscpu is None:
        pytest.skip("this host lists its caches in only one of sysfs and lscpu")
    assert sysfs == lscpu  # two sources, one answer: e.g. ("L3", 33554432)
    assert sysfs[0] in ("L2", "L3", "L4") and sysfs[1] >= 2**20
    assert cache_from_sysfs(tmp_path / "no-such-cache-folder") is None


def test_the_roofline_says_when_its_share_is_not_of_dram() -> None:
    level, size = cache_from_sysfs() or ("L3", 32 * 2**20)
    peak = PeakBandwidth("cpu", 25e9, "copy", level, size, "sysfs")
    inside = roofline(size // 20, 0.05, peak).to_dict()
    assert inside["in_cache"] is True
    assert inside["note"] == (
        f"the {size / 20 / 2**20:.3g} MB a decode step reads (weights less the lookup tables, "
        f"+ KV cache) fit in the {size / 2**20:.3g} MB {level}: this is not a memory-bandwidth "
        "figure"
    )
    outside = roofline(size * 4, 5.0, peak).to_dict()
    assert outside["in_cache"] is False and outside["note"] == ""
    unknown = PeakBandwidth("cpu", 25e9, "copy", "unknown", 0, "neither lists it")
    said = roofline(size // 20, 0.05, unknown).to_dict()
    assert said["in_cache"] is None and "cache size is unknown (neither lists it)" in said["note"]
    unrecorded = PeakBandwidth("H100", 3.35e12, "datasheet")  # stored before caches were kept
    assert roofline(1e6, 0.01, unrecorded).to_dict()["note"] == ""
    gpu = PeakBandwidth("H100", 3.35e12, "datasheet", "L2", 50 * 2**20, "CUDA driver")
    assert roofline(2**20, 0.01, gpu).to_dict()["note"] == (
        "the 1 MB a decode step reads (weights less the lookup tables, + KV cache) fit in the "
        "50 MB L2: this is not a memory-bandwidth figure"
    )
    assert roofline(2**30, 0.5, gpu).to_dict()["note"] == ""
