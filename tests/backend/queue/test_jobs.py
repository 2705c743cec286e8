"""The jobs facade: a sweep survives the trip through an Optimize-page link, field for field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from backend.engine.inputs import concrete_shape
from backend.errors import UserError
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.results import ResultStatus
from backend.specs import (
    MEASURE_PRESETS,
    ConvAlgoSearch,
    CudaOptions,
    IoMode,
    MeasureSettings,
    OpenVinoOptions,
    OrtOptions,
    PerformanceHint,
    Precision,
    SweepSpec,
    TrtOptions,
)
from tests import models as model_factory

EVERY_FIELD_CHANGED = SweepSpec(
    precisions=(Precision.FP16, Precision.INT8_STATIC),
    providers=("cpu", "cuda", "tensorrt"),
    batch_sizes=(2, 8),
    backend="openvino",
    fixed_shapes=False,
    symbolic_dims=(("seq", 24), ("heads", 3)),
    optimization_level="basic",
    intra_op_threads=3,
    simplify=True,
    calibration_sha256="c" * 64,
    calibration_samples=7,
    int8_reduce_range=True,
    backends=("openvino", "onnxruntime"),
    openvino=OpenVinoOptions(performance_hint=PerformanceHint.THROUGHPUT, streams=2),
    onnxruntime=OrtOptions(enable_mem_pattern=False),
    profile=True,
    fp32_nodes=("dense/MatMulAddFusion", "odd,name"),
    evaluation_sha256="e" * 64,
    search_bound="top1=0.95",
    min_cosine=0.985,
    targets=("t4", "xeon-8480"),
    replicas=2,
    io_modes=(IoMode.END_TO_END, IoMode.DEVICE),
    cuda=CudaOptions(conv_algo_search=ConvAlgoSearch.HEURISTIC, use_tf32=False, prefer_nhwc=True),
    find_knee=True,
    knee_max_batch=256,
    runtime_env="ort-1.31",
    baseline_of=5,
    tensorrt=TrtOptions(fp16=True, timing_cache=True, builder_optimization_level=2),
    prices=(("t4", 0.53), ("xeon-8480", 1.2), ("cpu", 0.4)),
    measure=MeasureSettings(
        warmup_runs=4,
        window_runs=9,
        window_min_seconds=0.25,
        stable_windows=2,
        stability_tolerance=0.2,
        max_seconds=12.5,
        accuracy_samples=3,
    ),
)


def test_every_field_of_the_spec_differs_from_its_default_in_the_round_trip_case() -> None:
    default = SweepSpec()
    for f in dataclasses.fields(SweepSpec):
        assert getattr(EVERY_FIELD_CHANGED, f.name) != getattr(default, f.name), f.name
    for f in dataclasses.fields(MeasureSettings):
        assert getattr(EVERY_FIELD_CHANGED.measure, f.name) != getattr(MeasureSettings(), f.name)


def test_a_spec_round_trips_through_the_query_with_every_field() -> None:
    query = jobs.spec_to_query(EVERY_FIELD_CHANGED)
    assert all(isinstance(v, str) for v in query.values())
    assert query["measure"] == jobs.CUSTOM_MEASURE and query["calibration"] == "c" * 64
    assert jobs.spec_from_query(query) == EVERY_FIELD_CHANGED
    assert jobs.spec_from_query(query).to_dict() == EVERY_FIELD_CHANGED.to_dict()


@pytest.mark.parametrize("preset", list(MEASURE_PRESETS))
def test_a_preset_travels_by_name(preset: str) -> None:
    spec = SweepSpec(measure=MEASURE_PRESETS[preset])
    query = jobs.spec_to_query(spec)
    assert query["measure"] == preset and not any(k.startswith("m_") for k in query)
    assert jobs.spec_from_query(query) == spec


def test_an_empty_query_is_the_default_sweep_and_a_bad_one_is_a_user_error() -> None:
    assert jobs.spec_from_query({}) == SweepSpec()
    with pytest.raises(UserError, match="not valid here"):
        jobs.spec_from_query({"batches": "1,x"})
    with pytest.raises(UserError, match="Unknown measurement 'fast'"):
        jobs.spec_from_query({"measure": "fast"})
    with pytest.raises(UserError, match="Batch size must be at least 1"):
        jobs.spec_from_query({"batches": "0"})


@pytest.mark.parametrize(
    ("cuda", "named"),
    [
        ('{"bogus": true}', "unknown CUDA option 'bogus'"),
        ('{"use_tf32": "yes"}', "'use_tf32' has a value of the wrong kind"),
        ("[1, 2]", "not a set of named values"),
        ("7", "not a set of named values"),
        ("{not json", "Expecting property name"),
        ('{"conv_algo_search": "FASTEST"}', "Unknown cuDNN algorithm search 'FASTEST'"),
    ],
)
def test_a_link_with_bad_cuda_options_is_one_sentence(cuda: str, named: str) -> None:
    with pytest.raises(UserError) as refused:
        jobs.spec_from_query({"providers": "cuda", "cuda": cuda})
    message = str(refused.value)
    assert named in message and message.count(". ") == 0 and "\n" not in message
    good = '{"use_tf32": false, "conv_algo_search": "HEURISTIC"}'
    assert not jobs.spec_from_query({"providers": "cuda", "cuda": good}).cuda.use_tf32


def test_stored_results_are_typed(data_dir: Path, mlp_path: Path) -> None:
    from backend.queue.worker import JobRunner
    from storage.repo import jobs as job_store

    model = ingest_file(mlp_path, "mlp.onnx")
    quick = dataclasses.replace(MEASURE_PRESETS["quick"], max_seconds=2.0)
    job = jobs.submit_sweep(model.id, SweepSpec(batch_sizes=(1, 2), measure=quick))
    JobRunner("inline").run(job_store.claim_job("inline", 300, job_id=job.id))
    stored = jobs.stored_results(job.id)
    assert [r.configuration.batch_size for r in stored] == [1, 2]
    assert all(
        r.status is ResultStatus.OK and r.configuration.precision is Precision.FP32 for r in stored
    )
    assert all(r.latency.p50 > 0 and np.isfinite(r.latency.p99) for r in stored)
    assert [r.config_key for r in stored] == [
        c.key for c in SweepSpec(batch_sizes=(1, 2)).configurations()
    ]


def test_the_bound_travels_through_links_and_is_checked() -> None:
    spec = SweepSpec(min_cosine=0.95)
    query = jobs.spec_to_query(spec)
    assert query["min_cosine"] == "0.95"
    assert jobs.spec_from_query(query).min_cosine == 0.95
    assert "min_cosine" not in jobs.spec_to_query(SweepSpec())  # the default needs no key
    assert SweepSpec.from_dict(SweepSpec(min_cosine=0.5).to_dict()).min_cosine == 0.5
    with pytest.raises(UserError, match="must be from 0 to 1"):
        SweepSpec(min_cosine=1.5)
    with pytest.raises(UserError, match="not valid here"):
        jobs.spec_from_query({"min_cosine": "lots"})


def test_batch_sizes_a_fixed_batch_input_cannot_take_are_refused_at_submit(
    data_dir: Path, tmp_path: Path
) -> None:
    model = model_factory.make_mlp()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # batch fixed at 1
    stored = ingest_file(model_factory.save(model, tmp_path / "fixed.onnx"), "fixed.onnx")
    name = stored.inputs[0]["name"]
    with pytest.raises(UserError) as refused:
        jobs.submit_sweep(stored.id, SweepSpec(batch_sizes=(1, 2, 4)))
    assert str(refused.value) == (
        f"Input {name!r} has a fixed batch of 1, so batch sizes 2, 4 cannot run; pick 1, or "
        "export the model with a dynamic batch axis."
    )
    assert jobs.list_jobs() == []  # nothing queued
    jobs.submit_sweep(stored.id, SweepSpec(batch_sizes=(1,)))
    assert len(jobs.list_jobs()) == 1


def test_submit_refuses_exactly_the_batch_sizes_the_feeds_would_refuse_mid_job(
    data_dir: Path, tmp_path: Path
) -> None:
    """One fixed-batch rule (engine/inputs.runs_at_batch): what submit lets through, the
    measurement can feed, and what it refuses would have failed as rows of the job."""
    model = model_factory.make_mlp()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4  # batch fixed at 4
    stored = ingest_file(model_factory.save(model, tmp_path / "fixed4.onnx"), "fixed4.onnx")
    spec = stored.inputs[0]
    unfed = []
    for batch in (1, 2, 3, 4, 8):
        try:
            concrete_shape(spec["shape"], batch, {}, spec["name"])
        except UserError:
            unfed.append(batch)
    assert unfed == [2, 3, 8]
    with pytest.raises(UserError, match=r"fixed batch of 4, so batch sizes 2, 3, 8 cannot run; "):
        jobs.submit_sweep(stored.id, SweepSpec(batch_sizes=(1, 2, 3, 4, 8)))
    assert jobs.list_jobs() == []
    jobs.submit_sweep(stored.id, SweepSpec(batch_sizes=(1, 4)))
    assert len(jobs.list_jobs()) == 1
