"""Profiles on the pages: the Jobs page's per-node views of a real profiled sweep run by a real
worker, and the Optimize page's profile toggle and mixed-precision node list."""

from __future__ import annotations

import json
from pathlib import Path

from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.specs import MeasureSettings, SweepSpec
from tests import models as model_factory
from tests.evidence_models import BAD_LAYER, make_bad_layer_mlp, make_hardswish_net
from tests.pages.seed import add_model, open_page, texts
from tests.workers import run_worker_once

ROOT = Path(__file__).resolve().parents[2]
QUICK = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.05, max_seconds=3, accuracy_samples=1
)


def _profiled_job(tmp_path: Path, profile: bool) -> int:
    source = model_factory.save(make_hardswish_net(), tmp_path / "hs.onnx")
    model = ingest_file(source, "hs.onnx")
    spec = SweepSpec(precisions=("fp32", "int8_static"), profile=profile, measure=QUICK)
    job = jobs.submit_sweep(model.id, spec)
    run_worker_once(timeout=300)
    return job.id


def _figures(at) -> list[dict]:  # noqa: ANN001 - AppTest
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def test_profiled_job_shows_node_bars_op_types_and_the_diff_against_fp32(
    data_dir: Path, tmp_path: Path
) -> None:
    job_id = _profiled_job(tmp_path, profile=True)
    at = open_page("jobs", job=job_id)
    assert not at.exception
    assert any("Per-node profiles (2)" in e.label for e in at.expander)
    at.selectbox(key="profile").select_index(1).run()  # the INT8 configuration
    assert not at.exception
    titles = [fig["layout"]["title"]["text"] for fig in _figures(at)]
    assert titles[:2] == ["Time per node (profiled pass)", "Time by op type"]
    assert any(title.startswith("Per uploaded node: FP32 vs") for title in titles)

    # the Graph page's variant diff links a configuration's profile by its key
    int8 = next(
        s for s in jobs.stored_results(job_id) if s.configuration.precision == "int8_static"
    )
    linked = open_page("jobs", job=job_id, profile=int8.config_key)
    assert not linked.exception
    assert linked.selectbox(key="profile").value == int8.configuration.label


def test_unprofiled_job_has_no_profile_section(data_dir: Path, tmp_path: Path) -> None:
    job_id = _profiled_job(tmp_path, profile=False)
    at = open_page("jobs", job=job_id)
    assert not at.exception
    assert not any("Per-node profiles" in e.label for e in at.expander)
    assert "Per-node profiles" not in texts(at)


def test_optimize_page_submits_a_profiled_sweep_with_a_mixed_point(
    data_dir: Path, tmp_path: Path
) -> None:
    source = model_factory.save(make_bad_layer_mlp(), tmp_path / "bad.onnx")
    model = add_model(source)
    at = open_page("optimize", model=model.id)
    at.toggle(key="url_profile").set_value(True)
    at.text_area(key="fp32_nodes").input(f"{BAD_LAYER}\n")
    at.run()
    assert not at.exception
    assert "Configurations in this sweep=3" in texts(at)  # FP32, INT8 and the mixed INT8
    at.button(key="submit_sweep").click().run()
    spec = jobs.spec_of(jobs.list_jobs()[0])
    assert spec.profile and spec.fp32_nodes == (BAD_LAYER,)
    reopened = open_page("optimize", model=model.id, **jobs.spec_to_query(spec))
    assert reopened.toggle(key="url_profile").value
    assert reopened.text_area(key="fp32_nodes").value == BAD_LAYER


def test_a_profile_stored_before_fused_kernels_were_traced_asks_to_profile_again(
    data_dir: Path, tmp_path: Path
) -> None:
    """The Graph page's sentence on the Jobs page, where a job's rows carry a profile stored
    before fusion.py traced fused kernels (it lacks fusions_traced and source_flops)."""
    from backend.engine.profile import Profile
    from backend.models import library
    from storage.repo import results as result_store

    job_id = _profiled_job(tmp_path, profile=True)
    at = open_page("jobs", job=job_id)
    assert not at.exception
    assert "stored before fused kernels were traced" not in texts(at)  # profiled since

    # the same rows stored again as the worker stores them, the INT8 one pointing to its
    # profile as an earlier version wrote it
    job = jobs.get_job(job_id)
    spec = SweepSpec(precisions=("fp32", "int8_static"), profile=True, measure=QUICK)
    again = jobs.submit_sweep(job.model_id, spec)  # as _profiled_job queued it
    rows = result_store.list_results(job_ids=[job_id])
    samples = result_store.result_samples([r.id for r in rows])
    int8 = ""
    for row in rows:
        payload = json.loads(json.dumps(row.payload))
        if payload["configuration"]["precision"] == "int8_static":
            telemetry = payload["telemetry"]
            old = Profile.load(library.artifact_path(telemetry["profile_sha256"])).to_dict()
            del old["fusions_traced"], old["source_flops"]
            telemetry["profile_sha256"] = library.store().put_bytes(json.dumps(old).encode()).sha256
            int8 = payload["config_key"]
        assert result_store.save_result(again.id, payload, samples[row.id]) is not None
    label = next(
        s.configuration.label for s in jobs.stored_results(again.id) if s.config_key == int8
    )

    at = open_page("jobs", job=again.id)
    assert not at.exception
    said = [w.value.replace("\\", "") for w in at.warning]
    expected = (
        f"The profile of {label} was stored before fused kernels were traced to every node they "
        "ran: a fused kernel's time may sit on one of its nodes only (e.g. the Relu of a "
        "Conv+Relu kernel). Profile the configuration again for a faithful picture."
    )
    assert expected in said, said
