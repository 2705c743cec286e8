"""A generation job run by the real worker process: the trained tiny Llama uploaded as a GenAI
folder zip, FP32 and INT4 (quantized by the job, stored as a library model), two concurrency
points, perplexity on the fixture's held-out text; every point stored with its figures, the
verdict and the events, and the Compare frame and charts built from what was stored.

The upload is the GenAI folder tests/llm_models.py converts once per machine: the job reads only
that folder, so an HF zip would pay the sandboxed conversion again at every ingest. The
openvino-genai test alone uploads the HF zip, since its export is made from the HF weights."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from sqlalchemy import text as sql

from backend.errors import UserError
from backend.generate import jobreport, jobspec, points
from backend.generate import library as generative
from backend.generate.results import FIGURES
from backend.jobs.generation import judge
from backend.models import library, origin
from backend.models.ingest import ingest_file
from backend.queue import jobs
from storage.db import get_engine
from storage.repo import jobs as job_store
from storage.repo import serving as point_store
from storage.states import JobState
from tests import llm_models
from tests.backend.test_cli import optiboard
from tests.pages import seed
from tests.workers import run_worker_once

ROOT = Path(__file__).resolve().parents[3]
SPEC = jobspec.GenerationJobSpec(
    variants=("int4", "fp32"),  # stored in this order; the job runs FP32 first
    prompt_lengths=(16,),
    new_tokens=(8,),
    sequences=(1, 2),
    perplexity_tokens=256,
)


def submitted(tmp_path: Path) -> tuple[int, int]:
    """The cached GenAI folder uploaded and a generation job of SPEC queued on it (not run)."""
    upload = llm_models.genai_zip(tmp_path)
    model = seed.add_model(upload)
    text = llm_models.trained_llama().eval_text.encode()
    job = jobspec.submit_generation(model.id, SPEC, text, "held-out.txt", label="fp32 vs int4")
    return model.id, job.id


def run_to_success(job_id: int) -> dict[str, dict]:
    """The queued job run by a real worker to success; its stored points' payloads by key."""
    run_worker_once(timeout=600)
    assert job_store.get_job(job_id).state == JobState.SUCCEEDED
    stored = point_store.list_points([job_id], kind=point_store.GENERATION)
    return {p.point_key: p.payload for p in stored}


def test_worker_runs_fp32_and_int4_and_stores_every_point(data_dir: Path, tmp_path: Path) -> None:
    model_id, job_id = submitted(tmp_path)
    job = job_store.get_job(job_id)
    assert job.progress_total == 4 and job.spec["kind"] == "generation"
    assert job.spec["perplexity_window"] == 256  # the model's context caps the window

    run_worker_once(timeout=600)

    job = job_store.get_job(job_id)
    assert job.state == JobState.SUCCEEDED, job.error
    assert job.progress_done == 4
    stored = point_store.list_points([job_id], kind=point_store.GENERATION)
    assert [p.point_key for p in stored] == [
        "fp32|ort-genai|16,8,1",
        "fp32|ort-genai|16,8,2",
        "int4|ort-genai|16,8,1",
        "int4|ort-genai|16,8,2",
    ]
    by_key = {p.point_key: p.payload for p in stored}
    for payload in by_key.values():
        assert payload["status"] == "ok", payload
        assert 0 < payload["ttft_p50_ms"] <= payload["e2e_p50_ms"]
        assert payload["itl_p50_ms"] > 0 and payload["output_tokens_per_s"] > 0
        assert payload["perplexity"]["perplexity"] > 1 and payload["perplexity"]["tokens"] == 256
    fp32, int4 = by_key["fp32|ort-genai|16,8,1"], by_key["int4|ort-genai|16,8,1"]
    assert int4["weights_mb"] < fp32["weights_mb"] / 2  # MatMulNBits weights, stated
    assert by_key["fp32|ort-genai|16,8,2"]["kv_cache_mb"] == pytest.approx(2 * fp32["kv_cache_mb"])
    assert not fp32["agreement"] and len(int4["agreement"]) == 1  # against FP32's tokens
    ratio = int4["perplexity"]["perplexity"] / fp32["perplexity"]["perplexity"]
    assert 0.9 < ratio < 1.1  # INT4 RTN on the trained model: within the 10% bound

    # the INT4 copy is a library model of its own, made once and named by every INT4 point
    int4_model = library.get_model(int4["model_id"])
    assert generative.is_generative(int4_model) and int4_model.id != model_id
    # ... that names the model and the job that made it, and with which settings
    source = library.get_model(model_id)
    assert (int4_model.source_model_id, int4_model.source_job_id) == (model_id, job_id)
    assert origin.origin_sentence(int4_model) == (
        f"Made by job #{job_id} from model #{model_id} ({source.name}), INT4 RTN block 32 "
        "symmetric."
    )
    events = [e.message for e in jobs.job_events(job_id)]
    assert any("quantizing the model to int4 rtn b32 sym" in m for m in events)
    assert any(m.startswith("int4|ort-genai|16,8,2: TTFT p50") for m in events)

    frame = points.generation_frame([job_id])
    assert len(frame) == 4 and frame["perplexity"].notna().all()
    assert (frame["memory_mb"] > frame["weights_mb"]).all()
    assert set(frame["greedy_agreement"].dropna()) <= {x / 8 for x in range(9)}
    for _, (_, draw) in points.CHARTS.items():
        figure = draw(frame)
        assert sum(len(trace.x) for trace in figure.data) >= 4
    # a point judged wrong is still drawn, but never on the perplexity/speed Pareto front
    fastest = frame["output_tokens_per_s"].idxmax()
    judged = frame.assign(  # all stable, as a quiet host measures them: the front is not empty
        status=["wrong outputs" if i == fastest else "ok" for i in frame.index], stable=True
    )
    front = next(t for t in points.perplexity_vs_speed(judged).data if t.name == "Pareto front")
    assert frame.at[fastest, "output_tokens_per_s"] not in list(front.x)


def test_a_job_queued_from_the_cli_reuses_int4_and_quantizes_hqq_b64_once(
    data_dir: Path, tmp_path: Path
) -> None:
    """`optiboard generate ID --submit --variants int4,int4-hqq-b64` queues the job; the
    stored INT4 copy of the first job is reused, the HQQ block-64 copy is quantized once and
    its graph holds block-64 MatMulNBits with zero points. A folder path cannot be queued."""
    model_id, _ = submitted(tmp_path)
    run_worker_once(timeout=600)
    models_before = len(library.list_models())
    refused = optiboard("generate", str(tmp_path), "--submit")
    assert refused.returncode != 0 and "--submit queues a library model by its id" in (
        refused.stdout + refused.stderr
    )
    queued = optiboard(
        "generate",
        str(model_id),
        "--submit",
        "--variants",
        "int4,int4-HQQ-b64",  # no FP32 this time: the HQQ copy costs what it would
        "--prompt-lengths",
        "16",
        "--new-tokens",
        "8",
        "--preset",
        "quick",
        "--label",
        "cli",
    )
    assert queued.returncode == 0, queued.stdout + queued.stderr
    assert "with 2 generation points" in queued.stdout
    again = job_store.list_jobs()[0]
    assert again.label == "cli" and again.spec["variants"] == ["int4", "int4-hqq-b64"]
    run_worker_once(timeout=600)
    assert job_store.get_job(again.id).state == JobState.SUCCEEDED
    assert len(library.list_models()) == models_before + 1  # the HQQ copy, not INT4 again
    events = [e.message for e in jobs.job_events(again.id)]
    assert [m for m in events if "quantizing" in m] == [
        "quantizing the model to int4 hqq b64 asym (weight-only, in a child)"
    ]
    by_key = {
        p.point_key: p.payload
        for p in point_store.list_points([again.id], kind=point_store.GENERATION)
    }
    hqq = by_key["int4-hqq-b64|ort-genai|16,8,1"]
    assert hqq["status"] == "ok" and hqq["variant_label"] == "INT4 HQQ b64 asym"
    hqq_model = library.get_model(hqq["model_id"])  # made by this job; INT4 by the first
    assert (hqq_model.source_model_id, hqq_model.source_job_id) == (model_id, again.id)
    assert origin.origin_short(hqq_model) == f"job #{again.id} from #{model_id}"
    made = generative.folder_artifacts(hqq["model_id"])[0].meta
    assert made["variant"]["algorithm"] == "hqq" and made["variant"]["block_size"] == 64
    assert made["facts"]["block_sizes"] == [64] and made["facts"]["bits"] == [4]
    assert made["facts"]["quantized"] and all(
        q["has_zero_points"] for q in made["facts"]["quantized"]
    )  # what the graph holds: asymmetric blocks of 64
    assert "(4-bit, block 64)" in made["statement"]


def test_submit_refuses_in_one_sentence_and_stores_nothing(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlp_path: Path
) -> None:
    upload = llm_models.genai_zip(tmp_path)
    model = seed.add_model(upload)
    artifacts = len(library.list_artifacts(model.id))
    monkeypatch.setenv("OPTIBOARD_PERPLEXITY_TEXT_MB", "0.001")
    with pytest.raises(UserError, match=r"over the 0.001 MB cap"):
        jobspec.submit_generation(model.id, SPEC, b"x" * 4096, "big.txt")
    with pytest.raises(UserError, match="is not UTF-8 text"):
        jobspec.submit_generation(model.id, SPEC, b"\xff\xfe", "bad.txt")
    long = jobspec.GenerationJobSpec(prompt_lengths=(250,), new_tokens=(64,))
    with pytest.raises(UserError, match="beyond .* context of 256"):
        jobspec.submit_generation(model.id, long)
    single = ingest_file(mlp_path, "mlp.onnx")
    with pytest.raises(UserError, match="single-pass ONNX model, not a generative one"):
        jobspec.submit_generation(single.id, SPEC)
    assert len(library.list_artifacts(model.id)) == artifacts
    assert job_store.list_jobs() == []


def test_the_verdict_reads_perplexity_and_first_token_agreement() -> None:
    ok = {"status": "ok", "perplexity": {"perplexity": 10.5}, "agreement": [3, 0]}
    assert judge(dict(ok), 10.0, 0.10) == "ok"
    worse = {**ok, "perplexity": {"perplexity": 11.5}}
    assert judge(worse, 10.0, 0.10) == "wrong outputs" and "15.0% above FP32" in worse["verdict"]
    diverged = {"status": "ok", "agreement": [0, 0]}
    assert judge(diverged, None, 0.10) == "wrong outputs"
    assert judge({"status": "failed"}, 10.0, 0.1) == "failed"


def test_openvino_genai_runs_beside_ort_genai_on_its_own_export(
    data_dir: Path, tmp_path: Path
) -> None:
    """openvino-genai measures the HF upload's OpenVINO export (NNCF INT4 for the INT4
    variant), its greedy tokens compared with ONNX Runtime GenAI's FP32 on the same prompts."""
    upload = llm_models.hf_zip(tmp_path)
    model = seed.add_model(upload)
    spec = jobspec.GenerationJobSpec(
        runtimes=("ort-genai", "openvino-genai"),
        prompt_lengths=(16,),
        new_tokens=(8,),
        perplexity_tokens=256,
    )
    text = llm_models.trained_llama().eval_text.encode()
    job = jobspec.submit_generation(model.id, spec, text, "held-out.txt")
    by_key = run_to_success(job.id)
    fp32, int4 = by_key["fp32|openvino-genai|16,8,1"], by_key["int4|openvino-genai|16,8,1"]
    assert fp32["status"] == int4["status"] == "ok"
    assert "INT4_SYM" in int4["statement"] or "int4" in int4["statement"].lower()
    assert int4["weights_mb"] < fp32["weights_mb"] / 2
    assert len(fp32["agreement"]) == 1  # against ONNX Runtime GenAI's FP32 tokens
    ort = by_key["fp32|ort-genai|16,8,1"]["perplexity"]["perplexity"]
    assert abs(fp32["perplexity"]["perplexity"] / ort - 1) < 0.01  # the same model, two runtimes


def test_a_torch_job_is_judged_against_its_own_weights_and_shows_a_failed_point(
    data_dir: Path, tmp_path: Path
) -> None:
    """Torch's points are compared with the uploaded Hugging Face folder in fp32 (until
    2026-12-07 with the GenAI FP32 folder run by ONNX Runtime GenAI on the job's device, so a
    CUDA job on a host whose onnxruntime-genai has no CUDA failed every torch point with
    ort-genai's error), and `show` of a job with a failed point (INT4 is not torch's) printed a
    KeyError traceback."""
    model = seed.add_model(llm_models.hf_zip(tmp_path))
    spec = jobspec.GenerationJobSpec(
        variants=("fp32", "int4"), runtimes=("torch",), prompt_lengths=(16,), new_tokens=(8,)
    )
    job = jobspec.submit_generation(model.id, spec, None, None)
    by_key = run_to_success(job.id)
    fp32, int4 = by_key["fp32|torch|16,8,1"], by_key["int4|torch|16,8,1"]
    assert fp32["status"] == "ok" and fp32["agreement"] == [8]  # its own weights, all 8 tokens
    assert any("against the Hugging Face folder" in n for n in fp32["notes"])
    assert int4["status"] == "failed" and "measure torch on fp32" in int4["error"]
    shown = optiboard("show", str(job.id))
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "int4|torch|16,8,1 failed: The torch runtime runs the uploaded" in shown.stdout
    assert (int4["prompt_tokens"], int4["new_tokens"], int4["sequences"]) == (16, 8, 1)
    frame = points.generation_frame([job.id])
    failed = frame[frame["status"] == "failed"].iloc[0]  # its label said "prompt None" before
    # no text, no perplexity: Compare says so instead of drawing empty axes from -1 to 4
    assert points.nothing_to_draw("perplexity", frame).startswith(
        "Perplexity against speed: no measured point has a perplexity, as no perplexity text"
    )
    assert points.nothing_to_draw("ttft", frame) == ""
    assert failed["label"].endswith("prompt 16, 8 new, 1 seq") and failed["ran"] == ""
    # no figure for a point that did not run, on the page and in the CSV export: never a 0.0
    # that reads as measured (GB/s and the share of peak, as the CLI report's frame gave them)
    figures = [*points.FIGURES, "peak_rss_mb", "bandwidth_gb_s", "j_per_token"]
    assert failed[figures].isna().all(), failed[figures]
    exported, _ = jobreport.export_generation([job.id], "csv")
    [row] = [r for r in csv.DictReader(io.StringIO(exported.decode())) if r["status"] == "failed"]
    assert [row[f] for f in figures] == [""] * len(figures), row
    _a_failed_point_exports_no_figures(job.id, int4["prompt_tokens"])
    # `generate ID` with torch: every runtime judged against those weights (it had no reference)
    argv = ["generate", str(model.id), "--runtimes", "ort-genai,torch", "--prompt-lengths", "16"]
    ran = optiboard(*argv, "--new-tokens", "8", "--preset", "quick", "--json")
    assert ran.returncode == 0, ran.stderr
    assert "measuring the reference's greedy tokens (" in ran.stderr  # each child, as it starts
    assert "measuring torch: 1 point in a sandboxed child (at most " in ran.stderr
    report = json.loads(ran.stdout)
    assert [(r["runtime"], r["agreement"]) for r in report["results"]] == [
        ("ort-genai", [8]),
        ("torch", [8]),
    ]
    assert any("against the Hugging Face folder" in n for n in report["notes"])


def _a_failed_point_exports_no_figures(job_id: int, prompt: int) -> None:
    """`export --format json` gives the job's failed point null figures (it had none: the key
    was missing), and so do the JSON, the frame and the CSV once it is stored as a failed point
    was before 2026-12-08 (a 0.0 in every figure, stable false, which read as measured)."""
    exported, _ = jobreport.export_generation([job_id], "json")
    [failed] = [p for p in json.loads(exported) if p["status"] == "failed"]
    assert [failed[f] for f in FIGURES] == [None] * len(FIGURES), failed
    old = {**failed, **dict.fromkeys(FIGURES, 0.0), "runs": 0, "stable": False}
    with get_engine().begin() as connection:
        connection.execute(
            sql("UPDATE serving_points SET payload = :p WHERE id = :id"),
            {"p": json.dumps(old), "id": failed["point_id"]},
        )
    exported, _ = jobreport.export_generation([job_id], "json")
    [again] = [p for p in json.loads(exported) if p["status"] == "failed"]
    assert [again[f] for f in FIGURES] == [None] * len(FIGURES), again
    assert again["prompt_tokens"] == prompt  # the rest as stored
    frame = points.generation_frame([job_id]).set_index("status")
    figures = [*points.FIGURES, "peak_rss_mb", "bandwidth_gb_s", "stable"]
    assert frame.loc["failed", figures].isna().all(), frame.loc["failed", figures]
    exported, _ = jobreport.export_generation([job_id], "csv")
    [row] = [r for r in csv.DictReader(io.StringIO(exported.decode())) if r["status"] == "failed"]
    assert [row[f] for f in figures] == [""] * len(figures), row


def test_two_models_picked_together_get_a_perplexity_front_each(
    data_dir: Path, tmp_path: Path
) -> None:
    """Two jobs of two models (the tiny Llama and its grouped-query sibling), as Compare's
    generation view holds them when both are picked: one front spanned both models, so the
    model with the better figures starred alone; each model's points are now their own front,
    named by the model, the front its own points alone make."""
    from backend.reporting import front

    spec = jobspec.GenerationJobSpec(
        variants=("fp32",), prompt_lengths=(16,), new_tokens=(8,), sequences=(1, 2)
    )
    text = llm_models.trained_llama().eval_text.encode()
    job_ids = []
    for llama in (llm_models.TINY, llm_models.TINY_GQA):
        model = seed.add_model(llm_models.genai_zip(tmp_path, llama), name=f"llama{llama.seed}")
        job_ids.append(jobspec.submit_generation(model.id, spec, text, "held-out.txt").id)
    run_worker_once(timeout=600)
    assert [job_store.get_job(i).state for i in job_ids] == [JobState.SUCCEEDED] * 2
    frame = points.generation_frame(job_ids).assign(stable=True)  # as a quiet host measures
    assert frame["perplexity"].notna().all() and frame["model"].nunique() == 2
    fronts = {
        t.name: sorted(t.x)
        for t in points.perplexity_vs_speed(frame).data
        if t.name and "Pareto" in t.name
    }
    assert set(fronts) == {"Pareto front (llama0)", "Pareto front (llama1)"}, fronts
    keys = points.PPL_FRONT
    for name, rows in frame.groupby("model"):
        own = rows[front.front_mask(rows, keys)]["output_tokens_per_s"]
        assert fronts[f"Pareto front ({name})"] == sorted(own)
    # said under the chart as the sweep view says its fronts (it said nothing), and an unstable
    # point that measured beyond its model's front named with its figures
    spans = "Starred: each model's own Pareto front, not one across models: one model's variant"
    assert points.chart_captions(frame) == {"perplexity": front.span_sentence(frame, keys)}
    assert points.chart_captions(frame)["perplexity"].startswith(spans)
    fastest = frame["output_tokens_per_s"].idxmax()  # on its model's front: nothing beats it
    shaky = frame.assign(stable=frame.index != fastest)
    said = points.chart_captions(shaky)["perplexity"]
    row = shaky.loc[fastest]
    beyond = f" {row['label']} measured beyond the Pareto front ({front.figures_text(row, keys)})"
    assert said.startswith(spans) and beyond in said, said
    assert said.endswith("so it is drawn hollow and left off the front: re-run it on a quiet host.")


def test_a_sweep_or_regression_check_of_a_generative_model_is_refused_and_queues_nothing(
    data_dir: Path, tmp_path: Path
) -> None:
    """Both were queued until 2026-12-07 and failed in the worker: a generative upload is a
    folder of files, not the one ONNX file a sweep or a check measures."""
    from backend.jobs.regressspec import RegressionSpec, submit_regression
    from backend.specs import SweepSpec

    model = seed.add_model(llm_models.genai_zip(tmp_path))
    said = "is a folder of files, not one ONNX file; use it with the generation benchmark."
    with pytest.raises(UserError, match=said):
        jobs.submit_sweep(model.id, SweepSpec())
    with pytest.raises(UserError, match=said):
        submit_regression(model.id, RegressionSpec(env_b="default"))
    assert jobs.list_jobs() == []
