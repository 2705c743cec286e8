"""The TensorRT provider's options as a configuration field: refusals, keys, ORT's names, links,
the CLI, and a sweep on this CPU machine recording them with its (unavailable) result."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.cli import _spec as cli_spec
from backend.cli import build_parser
from backend.cli_parsing import trt_options_from_pairs
from backend.errors import UserError
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.queue.worker import JobRunner
from backend.results import ResultStatus
from backend.runtimes.ort_trt import prepare_cache_folders, tensorrt_provider_options
from backend.specs import Configuration, MeasureSettings, SweepSpec, TrtOptions
from storage.repo import jobs as job_store
from storage.states import JobState


def _trt(precision: str = "fp32", **options: object) -> Configuration:
    return Configuration(precision=precision, provider="tensorrt", tensorrt=TrtOptions(**options))


@pytest.mark.parametrize(
    ("precision", "options", "says"),
    [
        ("fp32", {"int8": True}, "TensorRT INT8 needs a calibration table or a model with Q/DQ"),
        ("int8_static", {"int8": True, "int8_calibration_table": "cal.flatbuffers"}, "Q/DQ"),
        ("fp32", {"int8_calibration_table": "cal.flatbuffers"}, "turn INT8 on"),
        ("fp32", {"int8": True, "int8_calibration_table": "../cal"}, "must be a file name"),
        ("fp32", {"engine_cache_path": "tensorrt/e"}, "engine cache off does nothing"),
        ("fp32", {"builder_optimization_level": 7}, "goes from 0 to 5, not 7"),
        ("fp32", {"max_workspace_size": -1}, "cannot be negative"),
    ],
)
def test_what_the_tensorrt_provider_cannot_run_is_refused_with_the_reason(
    data_dir: Path, precision: str, options: dict, says: str
) -> None:
    with pytest.raises(UserError, match=says):
        _trt(precision, **options)


def test_cache_folders_outside_the_data_folder_are_refused_and_inside_ones_kept_relative(
    data_dir: Path, tmp_path: Path
) -> None:
    for outside in ("/etc/trt", "../elsewhere", str(tmp_path / "sibling")):
        with pytest.raises(UserError, match="is outside the data folder"):
            TrtOptions(engine_cache=True, engine_cache_path=outside)
    with pytest.raises(UserError, match="timing cache path"):
        TrtOptions(timing_cache=True, timing_cache_path="a/../../up")
    inside = TrtOptions(engine_cache=True, engine_cache_path=str(data_dir / "trt" / "engines"))
    assert inside.engine_cache_path == "trt/engines"  # resolved where it is measured


def test_options_apply_to_the_tensorrt_provider_of_onnx_runtime_only(data_dir: Path) -> None:
    with pytest.raises(UserError, match="tensorrt provider only"):
        Configuration(precision="fp32", provider="cuda", tensorrt=TrtOptions(fp16=True))
    with pytest.raises(UserError, match="pick it or leave them"):
        SweepSpec(providers=("cpu",), tensorrt=TrtOptions(fp16=True))
    spec = SweepSpec(providers=("cpu", "tensorrt"), tensorrt=TrtOptions(fp16=True))
    by_provider = {c.provider: c for c in spec.configurations()}
    assert by_provider["cpu"].tensorrt == TrtOptions()  # the CPU point's key is unchanged
    assert by_provider["cpu"].key == "onnxruntime/cpu/fp32/b1/fixed/all/t0"
    assert by_provider["tensorrt"].key == "onnxruntime/tensorrt/fp32/b1/fixed/all/t0/trtfp16"


def test_keys_name_what_changes_the_engine_and_not_the_caches(data_dir: Path) -> None:
    cached = _trt(timing_cache=True, engine_cache=True)
    assert cached.key == _trt().key  # a cache changes how long the build takes, not the engine
    tuned = _trt("int8_static", int8=True, max_workspace_size=2 << 30, builder_optimization_level=5)
    assert tuned.key.endswith("/trtint8/ws:2147483648/opt5")
    assert Configuration.from_dict(tuned.to_dict()) == tuned


def test_onnx_runtime_gets_its_own_option_names_with_folders_under_the_data_folder(
    data_dir: Path, tmp_path: Path
) -> None:
    trt = TrtOptions(
        fp16=True,
        int8=True,
        int8_calibration_table="calibration.flatbuffers",
        timing_cache=True,
        engine_cache=True,
        engine_cache_path="trt/engines",
        max_workspace_size=1 << 30,
        builder_optimization_level=2,
    )
    node_data = tmp_path / "node-data"  # a cluster node resolves them under its own data folder
    assert tensorrt_provider_options(trt, node_data) == {
        "trt_fp16_enable": "1",
        "trt_int8_enable": "1",
        "trt_int8_calibration_table_name": "calibration.flatbuffers",
        "trt_timing_cache_enable": "1",
        "trt_timing_cache_path": str(node_data / "tensorrt" / "timing"),
        "trt_engine_cache_enable": "1",
        "trt_engine_cache_path": str(node_data / "trt" / "engines"),
        "trt_max_workspace_size": str(1 << 30),
        "trt_builder_optimization_level": "2",
    }
    prepare_cache_folders(trt, node_data)
    assert (node_data / "tensorrt" / "timing").is_dir() and (node_data / "trt/engines").is_dir()
    assert tensorrt_provider_options(TrtOptions(), node_data) == {
        "trt_fp16_enable": "0",
        "trt_int8_enable": "0",
        "trt_timing_cache_enable": "0",
        "trt_engine_cache_enable": "0",
        "trt_builder_optimization_level": "3",
    }


def test_the_cli_takes_our_names_and_onnx_runtimes_and_refuses_the_rest(
    data_dir: Path, mlp_path: Path
) -> None:
    trt = trt_options_from_pairs(
        [
            "trt_fp16_enable=1",
            "engine_cache=on",
            "max_workspace_size=2GiB",
            "trt_builder_optimization_level=4",
        ]
    )
    assert trt == TrtOptions(
        fp16=True, engine_cache=True, max_workspace_size=2 << 30, builder_optimization_level=4
    )
    for bad, says in [
        ("fp16", "takes NAME=VALUE"),
        ("turbo=1", "NAME one of fp16, int8"),
        ("fp16=maybe", "takes 1 or 0"),
        ("max_workspace_size=lots", "Write a size"),
        ("builder_optimization_level=high", "whole number"),
    ]:
        with pytest.raises(UserError, match=says):
            trt_options_from_pairs([bad])
    model = ingest_file(mlp_path, "mlp.onnx")
    args = build_parser().parse_args(
        ["run", str(model.id), "--providers", "cpu,tensorrt", "--trt-option", "fp16=1"]
    )
    assert cli_spec(args).tensorrt == TrtOptions(fp16=True)


def test_run_again_with_changes_keeps_the_options_and_a_tampered_link_is_refused(
    data_dir: Path,
) -> None:
    spec = SweepSpec(
        providers=("tensorrt",),
        tensorrt=TrtOptions(fp16=True, timing_cache=True, builder_optimization_level=1),
    )
    query = jobs.spec_to_query(spec)
    assert jobs.spec_from_query(query) == spec
    tampered = query["trt"].replace('"timing_cache_path": ""', '"timing_cache_path": "/etc"')
    with pytest.raises(UserError, match="is outside the data folder"):
        jobs.spec_from_query({**query, "trt": tampered})


def test_a_sweep_records_the_options_with_its_result_and_the_reason_tensorrt_is_missing(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    trt = TrtOptions(fp16=True, engine_cache=True, builder_optimization_level=5)
    quick = MeasureSettings(warmup_runs=1, window_runs=5, window_min_seconds=0.01, max_seconds=1)
    spec = SweepSpec(providers=("tensorrt",), tensorrt=trt, measure=quick)
    job = jobs.submit_sweep(model.id, spec)
    claimed = job_store.claim_job("inline", lease_seconds=60, job_id=job.id)
    JobRunner("inline").run(claimed)

    (stored,) = jobs.stored_results(job.id)
    assert stored.configuration.tensorrt == trt  # recorded with the result
    assert stored.result.to_dict()["configuration"]["tensorrt"]["builder_optimization_level"] == 5
    assert stored.result.status == ResultStatus.UNAVAILABLE
    from backend.runtimes.onnxruntime import probe_provider

    assert probe_provider("tensorrt").reason in stored.result.error  # the capability's reason
    assert jobs.get_job(job.id).state == JobState.FAILED  # its only configuration could not run
