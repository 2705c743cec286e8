"""The knob added to prove "one declaration plus its use in the runtime": ONNX Runtime's
enable_mem_pattern, declared in backend/runtimeoptions.py and read in
backend/runtimes/onnxruntime.py, reaches a real ORT session and travels through JSON, links,
flags, keys and result columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend import cli
from backend.errors import UserError
from backend.knobs import columns
from backend.queue import jobs
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, OrtOptions, Precision, SweepSpec

OFF = OrtOptions(enable_mem_pattern=False)


@pytest.mark.parametrize("wanted", [True, False])
def test_the_session_onnx_runtime_opens_has_the_setting(mlp_path: Path, wanted: bool) -> None:
    config = Configuration(Precision.FP32, onnxruntime=OrtOptions(enable_mem_pattern=wanted))
    with get_runtime("onnxruntime").open(mlp_path, SessionOptions(config)) as runner:
        assert runner.session.get_session_options().enable_mem_pattern is wanted


def test_it_reaches_onnx_runtime_points_only_and_keys_them() -> None:
    spec = SweepSpec(backends=("onnxruntime", "openvino"), onnxruntime=OFF)
    by_runtime = {c.backend: c for c in spec.configurations()}
    assert by_runtime["onnxruntime"].onnxruntime == OFF
    assert by_runtime["openvino"].onnxruntime == OrtOptions()  # OpenVINO has no such option
    assert by_runtime["onnxruntime"].key.endswith("/nomempattern")
    assert "nomempattern" not in by_runtime["openvino"].key
    assert "nomempattern" not in Configuration(Precision.FP32).key  # old keys stay as they were
    assert columns(by_runtime["onnxruntime"])["enable_mem_pattern"] is False


def test_it_travels_through_json_links_and_flags() -> None:
    spec = SweepSpec(onnxruntime=OFF)
    assert spec.to_dict()["onnxruntime"]["enable_mem_pattern"] is False
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    config = spec.configurations()[0]
    assert Configuration.from_dict(config.to_dict()) == config
    query = jobs.spec_to_query(spec)
    assert query["mem_pattern"] == "0"
    assert "mem_pattern" not in jobs.spec_to_query(SweepSpec())  # the default needs no key
    assert jobs.spec_from_query(query) == spec
    assert jobs.spec_from_query({"mem_pattern": "1"}).onnxruntime == OrtOptions()
    parser = cli.build_parser()
    assert "--no-mem-pattern" in parser._subparsers._group_actions[0].choices["run"].format_help()
    flagged = cli._spec(parser.parse_args(["submit", "1", "--no-mem-pattern"]))
    assert flagged.onnxruntime == OFF
    assert cli._spec(parser.parse_args(["submit", "1"])).onnxruntime == OrtOptions()


def test_a_stored_group_naming_an_unknown_option_is_one_sentence() -> None:
    with pytest.raises(UserError, match="Unknown ONNX Runtime session option 'enable_mem'"):
        Configuration.from_dict({"precision": "fp32", "onnxruntime": {"enable_mem": False}})
