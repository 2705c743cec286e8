"""The second knob added as one declaration plus its use in the runtime, after the Optimize form
was drawn from the declarations: ONNX Runtime's enable_cpu_mem_arena, declared in
backend/runtimeoptions.py and set in backend/runtimes/onnxruntime.py, with no other edit. It
reaches a real ORT session, a configuration's key and column, JSON, the link, the command line
and the Optimize page."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend import cli
from backend.knobs import columns
from backend.queue import jobs
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, OrtOptions, Precision, SweepSpec
from tests.pages.seed import add_model, open_page

OFF = OrtOptions(enable_cpu_mem_arena=False)


@pytest.mark.parametrize("wanted", [True, False])
def test_the_session_onnx_runtime_opens_has_the_setting(mlp_path: Path, wanted: bool) -> None:
    config = Configuration(Precision.FP32, onnxruntime=OrtOptions(enable_cpu_mem_arena=wanted))
    with get_runtime("onnxruntime").open(mlp_path, SessionOptions(config)) as runner:
        assert runner.session.get_session_options().enable_cpu_mem_arena is wanted


def test_it_is_keyed_stored_linked_and_flagged() -> None:
    spec = SweepSpec(backends=("onnxruntime", "openvino"), onnxruntime=OFF)
    by_runtime = {c.backend: c for c in spec.configurations()}
    assert by_runtime["onnxruntime"].key.endswith("/nocpuarena")
    assert by_runtime["openvino"].onnxruntime == OrtOptions()  # OpenVINO has no such option
    assert columns(by_runtime["onnxruntime"])["enable_cpu_mem_arena"] is False
    assert spec.to_dict()["onnxruntime"]["enable_cpu_mem_arena"] is False
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    assert jobs.spec_to_query(spec)["cpu_arena"] == "0"
    assert jobs.spec_from_query({"cpu_arena": "0"}) == SweepSpec(onnxruntime=OFF)
    parser = cli.build_parser()
    assert cli._spec(parser.parse_args(["submit", "1", "--no-cpu-arena"])).onnxruntime == OFF


def test_the_optimize_page_draws_it_and_submits_it(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    assert at.toggle(key="cpu_arena").value is True  # ONNX Runtime's default
    at.toggle(key="cpu_arena").set_value(False).run()
    assert at.query_params["cpu_arena"] == "0"
    at.button(key="submit_sweep").click().run()
    assert not at.exception
    [job] = jobs.list_jobs()
    assert jobs.spec_of(job).onnxruntime == OFF
