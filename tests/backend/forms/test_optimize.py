"""The Optimize page's choices as a sweep: offered providers, the link's values the form starts
from, the spec they make (what a reopened sweep lends it), and submission with the uploads,
without Streamlit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from backend.errors import UserError
from backend.forms import optimize as sweep_form
from backend.forms.optimize import Upload, link_start, start_values, sweep_from
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.queue.capabilities import ProviderTable
from backend.specs import (
    MEASURE_PRESETS,
    OpenVinoOptions,
    PerformanceHint,
    Precision,
    SweepSpec,
)
from tests.models import npz_bytes

# the page's defaults: FP32 and INT8 static on the CPU at batch 1, random calibration
PAGE = {"precisions": (Precision.FP32, Precision.INT8_STATIC), "backends": ("onnxruntime",)}
REOPENED = SweepSpec(
    calibration_sha256="c" * 64,
    evaluation_sha256="e" * 64,
    measure=dataclasses.replace(MEASURE_PRESETS["standard"], max_seconds=7.0),
)


def test_a_picked_target_adds_its_providers_once_and_only_for_picked_runtimes() -> None:
    usable = {"onnxruntime": ["cpu"], "openvino": ["cpu"]}
    target = {"onnxruntime": ["cuda", "cpu"], "openvino": ["gpu"]}
    assert sweep_form.offered_providers(usable, ["onnxruntime"]) == ["cpu"]
    assert sweep_form.offered_providers(usable, ["onnxruntime"], [target]) == ["cpu", "cuda"]
    both = sweep_form.offered_providers(usable, ["onnxruntime", "openvino"], [target])
    assert both == ["cpu", "cuda", "gpu"]
    assert usable == {"onnxruntime": ["cpu"], "openvino": ["cpu"]}  # the table is left alone


def test_the_form_starts_from_the_link_typed_and_reads_the_runtimes_as_the_spec_does() -> None:
    start = start_values(
        {"precisions": "fp16", "dims": "seq:128", "hint": "throughput", "backend": "openvino"}
    )
    [fp16] = start["precisions"]  # typed as the spec holds it, not the link's text
    assert fp16 is Precision.FP16 and start["symbolic_dims"] == (("seq", 128),)
    assert start["openvino"] == OpenVinoOptions(performance_hint=PerformanceHint.THROUGHPUT)
    assert start["backends"] == ("openvino",)  # a one-runtime link names it as backend=
    assert start_values({})["backends"] == ("onnxruntime",)
    both = start_values({"runtimes": "onnxruntime,openvino"})["backends"]
    assert both == ("onnxruntime", "openvino")
    with pytest.raises(UserError, match="not valid here"):  # a value that does not read
        start_values({"dims": "seq:x"})
    with pytest.raises(UserError, match="Unknown measurement 'fast'"):
        start_values({"measure": "fast"})


def test_every_link_the_spec_writes_starts_the_form_at_that_spec() -> None:
    """What the widgets start from, built with nothing changed, is the linked sweep itself (its
    stored files kept): the form adds no representation of its own."""
    spec = SweepSpec(
        precisions=(Precision.FP32, Precision.INT8_STATIC),
        backends=("onnxruntime", "openvino"),
        batch_sizes=(2, 8),
        fixed_shapes=False,
        symbolic_dims={"seq": 24},
        openvino=OpenVinoOptions(PerformanceHint.THROUGHPUT, 2),
        calibration_sha256="c" * 64,
        fp32_nodes=("conv1",),
        min_cosine=0.95,
    )
    start = start_values(jobs.spec_to_query(spec))
    assert sweep_from(start, start, "stored", "stored") == spec


def test_rows_name_what_cannot_run_and_why() -> None:
    table = ProviderTable(
        {"onnxruntime": [{"name": "cpu", "available": True}, {"name": "tensorrt", "reason": "no"}]},
        "on this machine",
    )
    rows = sweep_form.unavailable_rows(table)
    assert rows == [{"runtime": "onnxruntime", "provider": "TENSORRT", "why not": "no"}]
    assert table.why_unavailable("onnxruntime", "tensorrt") == "no"
    assert table.why_unavailable("onnxruntime", "cpu") == ""
    gaps = sweep_form.precision_gap_rows(["onnxruntime"], ["cpu"], ["fp32", "bf16"])
    assert [(g["precision"], bool(g["why not"])) for g in gaps] == [("BF16", True)]


def test_the_page_defaults_make_the_default_sweep_of_two_configurations() -> None:
    spec = sweep_from(PAGE, {})
    assert spec.precisions == (Precision.FP32, Precision.INT8_STATIC)
    assert spec.fixed_shapes and spec.openvino.performance_hint == PerformanceHint.LATENCY
    assert spec.measure == MEASURE_PRESETS["standard"]
    assert len(spec.configurations()) == 2


def test_a_reopened_sweep_lends_its_files_only_when_kept() -> None:
    start = start_values(jobs.spec_to_query(REOPENED))
    assert start["measure"] == REOPENED.measure  # custom: the page offers it as such
    fresh = sweep_from(PAGE, start)
    assert fresh.calibration_sha256 is None and fresh.evaluation_sha256 is None
    kept = sweep_from(PAGE, start, calibration_source="stored", evaluation_source="stored")
    assert kept.calibration_sha256 == REOPENED.calibration_sha256
    assert kept.evaluation_sha256 == REOPENED.evaluation_sha256
    dynamic = sweep_from(PAGE | {"fixed_shapes": False, "symbolic_dims": {"seq": 24}}, {})
    assert not dynamic.fixed_shapes and dict(dynamic.symbolic_dims) == {"seq": 24}


def test_no_runtime_is_one_sentence() -> None:
    with pytest.raises(UserError, match="Pick at least one runtime"):
        sweep_from(PAGE | {"backends": ()}, {})


def test_submit_stores_the_upload_and_queues_a_new_job_or_the_reopened_ones_copy(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    spec = sweep_from(PAGE, {})
    with pytest.raises(UserError, match="Upload the calibration .npz"):
        sweep_form.submit_choices(spec, model.id, ("npz", None))
    assert jobs.list_jobs() == []
    upload = Upload(npz_bytes(x=np.zeros((4, 16), np.float32)), "cal.npz")
    first = sweep_form.submit_choices(spec, model.id, ("npz", upload), label="first")
    stored = jobs.spec_of(first)
    assert stored.calibration_sha256 is not None and first.label == "first"
    start = start_values(jobs.spec_to_query(stored))
    again = sweep_form.submit_choices(
        sweep_from(PAGE, start, "stored"), model.id, from_job=first.id
    )
    assert again.id != first.id and again.label == "first"  # the reopened job's copy
    assert jobs.spec_of(again).calibration_sha256 == stored.calibration_sha256
    assert [j.id for j in jobs.list_jobs()] == [again.id, first.id]


def test_a_link_with_one_bad_value_keeps_the_rest_and_names_the_bad_one() -> None:
    start, problem = link_start({"dims": "seq:x", "batches": "1,8", "precisions": "fp16"})
    assert problem is not None and "not valid here" in str(problem)
    assert start["batch_sizes"] == (1, 8)
    assert start["precisions"] == (Precision.FP16,)
    assert "symbolic_dims" not in start
    assert link_start({"batches": "4"}) == (start_values({"batches": "4"}), None)
