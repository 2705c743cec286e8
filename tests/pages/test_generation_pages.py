"""The generation benchmark on the pages: Optimize offers it for a generative model and queues
the chosen variants x points; Compare draws a generation job's points, stored by the real
worker, as four charts and a table, its view kept in the URL. The model is the GenAI folder
tests/llm_models.py converts once per machine: none of this depends on an HF upload."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime_genai
import streamlit as st
from sqlalchemy import text as sql

from backend.generate import jobspec
from backend.generate import points as generation_points
from backend.host import describe_environment
from backend.models.ingest import ingest_file
from backend.reporting import metrics
from pages.components.formatting import plain
from storage.db import get_engine
from storage.repo import jobs as job_store
from storage.repo import serving as point_store
from tests import llm_models
from tests.backend.jobs.test_generation_job import SPEC
from tests.pages.seed import add_model, open_page, texts
from tests.workers import run_worker_once


def test_optimize_offers_the_generation_benchmark_for_a_generative_model(
    data_dir: Path, tmp_path: Path, mlp_path: Path
) -> None:
    upload = llm_models.genai_zip(tmp_path)
    model = ingest_file(upload, upload.name)
    at = open_page("optimize", model=model.id)
    assert not at.exception, at.exception
    assert "is a generative model (context 256 tokens)" in texts(at)
    # the subtitle says what the generation form does, not only a sweep's configurations
    assert "for a generative model, one point of a generation benchmark" in texts(at)
    assert at.multiselect(key="url_g_variants").value == ["fp32", "int4"]
    assert 256 not in at.multiselect(key="url_g_prompts").options  # past the context
    # nor new tokens that no picked prompt leaves room for (128 + 256 > 256)
    assert at.multiselect(key="url_g_new").options[-1] == "128"
    assert not at.get("multiselect") or "url_precisions" not in [
        m.key for m in at.multiselect
    ]  # the sweep's form is not drawn for a decoder model
    at.multiselect(key="url_g_prompts").set_value([16, 64])
    at.multiselect(key="url_g_new").set_value([8])
    at.multiselect(key="url_g_seqs").set_value([1, 4])
    # the pickers build a weight-only name, and the button adds it to the variants
    at.selectbox(key="url_g_algo").set_value("hqq").run()
    at.selectbox(key="url_g_block").set_value(64).run()
    assert "These build `int4-hqq-b64`: INT4 HQQ b64 asym." in texts(at)
    at.button(key="g_add_variant").click().run()
    assert at.multiselect(key="url_g_variants").value == ["fp32", "int4", "int4-hqq-b64"]
    assert at.query_params["g_variants"] in ("fp32,int4,int4-hqq-b64", ["fp32,int4,int4-hqq-b64"])
    assert "Points in this generation benchmark=12" in texts(at)  # 3 variants x 2 x 1 x 2
    at.button(key="submit_generation").click().run()
    assert not at.exception and not at.error, texts(at)
    assert "Queued job 1 with 12 generation points" in texts(at)
    job = job_store.get_job(1)
    assert job.spec["kind"] == "generation" and job.spec["sequences"] == [1, 4]
    assert job.spec["variants"] == ["fp32", "int4", "int4-hqq-b64"]

    # a shared link carries the names; GPTQ without a perplexity text is one sentence
    linked = open_page("optimize", model=model.id, g_variants="fp32,int4-gptq-b128-asym-acc4")
    chosen = linked.multiselect(key="url_g_variants")
    assert chosen.value == ["fp32", "int4-gptq-b128-asym-acc4"]
    assert "INT4 GPTQ b128 asym acc4 (int4-gptq-b128-asym-acc4)" in chosen.format_func(
        "int4-gptq-b128-asym-acc4"
    )
    linked.button(key="submit_generation").click().run()
    assert "INT4 GPTQ b128 asym acc4 calibrates on the perplexity text" in texts(linked)
    assert len(job_store.list_jobs()) == 1
    viewer = open_page("optimize", role="viewer", model=model.id)
    assert viewer.button(key="submit_generation").disabled
    said = "Your role (viewer) cannot submit a generation benchmark; editors and admins can."
    assert said in [c.value for c in viewer.caption]

    at.multiselect(key="url_g_variants").set_value([]).run()
    assert "Pick at least one variant and one runtime" in texts(at)
    assert at.button(key="submit_generation").disabled

    single = add_model(mlp_path, "mlp")  # a single-pass model still gets the sweep's form
    sweep = open_page("optimize", model=single.id)
    assert sweep.multiselect(key="url_precisions").value


def test_compare_draws_a_generation_job_stored_by_the_worker(
    data_dir: Path, tmp_path: Path
) -> None:
    upload = llm_models.genai_zip(tmp_path)
    model = ingest_file(upload, upload.name)
    text = llm_models.trained_llama().eval_text.encode()
    job = jobspec.submit_generation(model.id, SPEC, text, "held-out.txt", label="fp32 vs int4")
    run_worker_once(timeout=600)

    home = open_page("home")  # its link opens Compare's generation view, not the sweep one
    [link] = [e.proto for e in home.get("page_link") if "the results of job" in e.proto.label]
    assert link.label == f"Compare the results of job {job.id}", link
    assert "view=generation" in link.query_string and f"jobs={job.id}" in link.query_string

    at = open_page("compare", view="generation", jobs=job.id)
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) == 4
    assert "4 measured points in 2 series" in texts(at)
    # under the table: the peak the bandwidth shares are of, and the versions that ran them
    assert "Peak bandwidth, which each share of peak is of: numpy copy of" in texts(at)
    # its points download as `optiboard export` writes them: the CSV's rows, the JSON's points
    csv, points_json = (at.get("download_button")[i].proto for i in (0, 1))
    assert [csv.label, points_json.label] == ["CSV", "JSON"]
    assert plain(f"onnxruntime-genai {onnxruntime_genai.__version__}") in texts(at)
    here = describe_environment()  # and the hardware and host that ran them
    cpu = f"{here['cpu']}, {here['cpu_count_logical']} logical cores"
    assert plain(f" on {cpu} (host {here['hostname']})") in texts(at)
    # the CLI's own line: providers, the device the runtime placed the model on, its environment,
    # and what the variants' graphs compute and cache in
    said = "; providers cpu; environment default; computes in fp32, KV cache in fp32 (the "
    assert plain(said + "graph's logits and past key/value types); on ") in texts(at)
    table = at.dataframe[0].value
    assert len(table) == 4 and set(table["status"]) == {"ok"}
    # the label column is wide enough for the sequences at its end, and a verdict column
    # empty in every row is left out
    assert json.loads(at.dataframe[0].proto.columns)["label"]["width"] == "large"
    verdicts = any(p.payload.get("verdict") for p in point_store.list_points([job.id]))
    assert ("verdict" in table.columns) is verdicts
    # a step whose bytes fit in the cache shows no share of the DRAM peak (it showed 82%
    # beside a note saying it is not a memory-bandwidth figure)
    stored = point_store.list_points([job.id], point_store.GENERATION)
    cached = sum(bool(p.payload["roofline"]["in_cache"]) for p in stored)
    assert table["bandwidth_fraction"].isna().sum() == cached
    # and why, said once for all of them, as a sentence (it was one lower-case line a point)
    said = [line for line in texts(at).splitlines() if "fit in the " in line]
    if cached:
        assert len(said) == 1, said
        assert said[0].startswith(f"No share of peak bandwidth is shown for all {cached} points")
    # a point whose tokens left FP32's says where and by what margin, under the table
    left = table[table["greedy_agreement"] < 1]["label"].tolist()
    said = [line for line in texts(at).splitlines() if "left the reference" in line]
    assert len(said) == len(left), (left, said)
    for label in left:
        assert any(line.startswith(plain(f"{label}: ")) for line in said), (label, said)
    assert table["perplexity"].notna().all() and (table["ttft_p50_ms"] > 0).all()
    int4 = table[table["label"].str.contains("INT4")]
    fp32 = table[table["label"].str.contains("FP32")]
    assert int4["weights_mb"].max() < fp32["weights_mb"].min() / 2

    _an_unstable_point_beyond_the_front_is_named_under_the_chart(job.id)

    # the chart choice lives in the URL, and the link reopens the same view
    at.pills(key="url_g_charts").set_value(["ttft", "perplexity"]).run()
    assert len(at.get("plotly_chart")) == 2
    query = {k: at.query_params[k] for k in at.query_params}
    again = open_page(
        "compare", **{k: v[0] if isinstance(v, list) else v for k, v in query.items()}
    )
    assert len(again.get("plotly_chart")) == 2
    assert again.pills(key="url_g_charts").value == ["ttft", "perplexity"]

    detail = open_page("jobs", job=job.id)  # one row per planned point, with its figures
    assert not detail.exception, detail.exception
    assert "4 of 4 points" in [p.proto.text for p in detail.get("progress")][0]
    points = next(d.value for d in detail.dataframe if "ttft_p50_ms" in d.value.columns)
    assert list(points["status"]) == ["ok"] * 4
    assert points["bandwidth_fraction"].isna().sum() == cached  # the Jobs page alike
    assert "why / error" not in points.columns  # every point ran, none has a why
    for key in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "output_tokens_per_s"):
        assert (points[key] > 0).all(), key
    assert points["perplexity"].notna().all() and (points["memory_mb"] > 0).all()
    int4_points = points[points["configuration"].str.contains("INT4")]
    assert len(int4_points) == 2 and int4_points["greedy_agreement"].notna().all()  # vs FP32
    links = [link.proto for link in detail.get("page_link")]
    assert any("view=generation" in str(link.query_string) for link in links)

    sweeps = open_page("compare")  # the sweeps' view points to the generation view
    assert any("Generation benchmarks" in str(link.proto.label) for link in sweeps.get("page_link"))


def _an_unstable_point_beyond_the_front_is_named_under_the_chart(job_id: int) -> None:
    """The perplexity chart's caption, as the sweep view's under its fronts (the generation view
    said nothing): the job's fastest starred point, stored as an unstable measurement is, is
    drawn hollow and named under the chart with its figures and a re-run asked for."""
    starred = generation_points.with_fronts(
        generation_points.generation_frame([job_id]), markup=False
    )
    star = starred[starred["pareto"]].sort_values("output_tokens_per_s").iloc[-1]
    [stored] = [p for p in point_store.list_points([job_id]) if p.id == star["point_id"]]
    with get_engine().begin() as connection:  # as the worker stores a point whose windows moved
        connection.execute(
            sql("UPDATE serving_points SET payload = :p WHERE id = :id"),
            {"p": json.dumps({**stored.payload, "stable": False}), "id": stored.id},
        )
    st.cache_data.clear()
    at = open_page("compare", view="generation", jobs=job_id)
    assert not at.exception, at.exception
    said = generation_points.chart_captions(generation_points.generation_frame([job_id]))
    said = said["perplexity"]
    assert f"{star['label']} measured beyond the Pareto front (" in said, said
    assert "but its measurement was unstable" in said or "their measurements" in said, said
    assert plain(said) in [c.value for c in at.caption]


def test_jobs_page_shows_a_generation_jobs_points_with_token_figures_not_a_sweeps(
    data_dir: Path, tmp_path: Path
) -> None:
    """A generation job's points had a sweep's columns: p50 ms (the whole generation), an empty
    p99, tokens/s under "throughput /s", and GPU-peak and energy columns that do not apply."""
    upload = llm_models.genai_zip(tmp_path)
    model = ingest_file(upload, upload.name)
    job = jobspec.submit_generation(model.id, SPEC, label="queued benchmark")
    at = open_page("jobs", job=job.id)
    assert not at.exception, at.exception
    table = next(d for d in at.dataframe if "key" in d.value.columns)
    assert list(table.value["key"]) == list(SPEC.point_keys())
    assert set(table.value["status"]) == {"pending"}  # planned, not measured yet
    shown = list(table.value.columns)
    for sweep_only in ("p50 ms", "p99 ms", "throughput /s", "of GPU peak", "J/sample", "idle W"):
        assert sweep_only not in shown
    headers = json.loads(table.proto.columns)  # as Compare's generation table names them
    for key in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "output_tokens_per_s"):
        assert headers[key]["label"] == metrics.REGISTRY[key].header
    assert {"memory_mb", "perplexity", "greedy_agreement"} <= set(shown)
