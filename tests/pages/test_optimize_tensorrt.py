"""Optimize page: TensorRT's settings appear only where its provider is available; elsewhere the
page says why not, in the capability check's own words."""

from __future__ import annotations

from pathlib import Path

from backend.queue import jobs
from backend.runtimes.onnxruntime import probe_provider
from backend.specs import TrtOptions
from tests.pages.seed import add_model, open_page, texts


def _trt_worker() -> None:
    """A worker on a host with TensorRT (none exists here), registered as one registers: this
    machine's table with the tensorrt provider said available."""
    from backend.queue.capabilities import local_providers
    from storage.repo import workers as worker_store

    table = {runtime: list(statuses) for runtime, statuses in local_providers().items()}
    table["onnxruntime"] = [s for s in table["onnxruntime"] if s["name"] != "tensorrt"] + [
        {"name": "tensorrt", "available": True, "reason": "TensorRT 10", "native_name": "TRT"}
    ]
    worker_store.register_worker("trt-1", "trt-host", 1, {"gpus": []}, table)


def test_without_tensorrt_the_page_says_why_and_offers_no_settings(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    assert not at.exception
    assert "trt_fp16" not in [t.key for t in at.toggle]
    reason = probe_provider("tensorrt").reason  # this machine's own answer (no worker alive)
    assert not probe_provider("tensorrt").available
    said = [c.value for c in at.caption if "TensorRT settings appear" in c.value]
    assert said and reason.replace(" ", "") in said[0].replace("\\", "").replace(" ", "")


def test_tensorrt_settings_reach_the_sweep_and_refusals_stop_the_submit(
    data_dir: Path, mlp_path: Path
) -> None:
    model = add_model(mlp_path)
    _trt_worker()
    at = open_page("optimize", model=model.id)
    at.multiselect(key="url_providers").set_value(["tensorrt"])
    at.multiselect(key="url_precisions").set_value(["fp32"])
    at.run()
    at.toggle(key="trt_int8").set_value(True)
    at.run()
    assert "needs a calibration table or a model with Q/DQ" in texts(at)
    assert at.button(key="submit_sweep").disabled  # a refused sweep cannot be sent
    at.toggle(key="trt_int8").set_value(False)
    at.toggle(key="trt_engine").set_value(True)
    at.text_input(key="trt_engine_path").set_value("/etc/engines")
    at.run()
    assert "is outside the data folder" in texts(at)
    assert at.button(key="submit_sweep").disabled
    at.text_input(key="trt_engine_path").set_value("trt/engines")
    at.toggle(key="trt_fp16").set_value(True)
    at.slider(key="trt_level").set_value(5)
    at.run()
    at.button(key="submit_sweep").click().run()
    (job,) = jobs.list_jobs()
    wanted = TrtOptions(
        fp16=True, engine_cache=True, engine_cache_path="trt/engines", builder_optimization_level=5
    )
    assert jobs.spec_of(job).tensorrt == wanted
    # "Run again with changes" opens the page with them set
    again = open_page("optimize", **jobs.spec_to_query(jobs.spec_of(job)), model=model.id)
    assert again.toggle(key="trt_fp16").value and again.slider(key="trt_level").value == 5
    assert again.text_input(key="trt_engine_path").value == "trt/engines"
