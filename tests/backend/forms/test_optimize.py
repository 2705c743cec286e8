"""The Optimize page's choices as a sweep: offered providers, starting dims, the spec they make
(what a reopened sweep lends it), and submission with the uploads, without Streamlit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from backend.errors import UserError
from backend.forms import optimize as sweep_form
from backend.forms.optimize import DEFAULT_DIM, SweepChoices, Upload
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.queue.capabilities import ProviderTable
from backend.specs import (
    MEASURE_PRESETS,
    PerformanceHint,
    Precision,
    SweepSpec,
)
from tests.models import npz_bytes

# the page's defaults: FP32 and INT8 static on the CPU at batch 1, random calibration
CHOICES = SweepChoices(
    knobs={"precisions": ["fp32", "int8_static"], "backends": ["onnxruntime"]},
    preset="standard",
    calibration_source="random",
    evaluation_source="none",
)
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


def test_dims_start_from_the_link_and_ignore_what_is_not_a_number() -> None:
    linked = ["seq:128", "heads:x", "nothing:", "stray"]
    found = sweep_form.dim_defaults(["seq", "heads", "nothing"], linked)
    assert found == {"seq": 128, "heads": DEFAULT_DIM, "nothing": DEFAULT_DIM}
    assert sweep_form.dim_defaults([], linked) == {}


def test_node_names_are_one_per_line_without_blanks() -> None:
    assert sweep_form.node_names(" conv1 \n\n  dense/2\n") == ("conv1", "dense/2")


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
    spec = CHOICES.spec(SweepSpec())
    assert spec.precisions == (Precision.FP32, Precision.INT8_STATIC)
    assert spec.fixed_shapes and spec.openvino.performance_hint == PerformanceHint.LATENCY
    assert spec.measure == MEASURE_PRESETS["standard"]
    assert len(spec.configurations()) == 2


def test_a_reopened_sweep_lends_its_files_only_when_kept_and_its_custom_measurement() -> None:
    fresh = CHOICES.spec(REOPENED)
    assert fresh.calibration_sha256 is None and fresh.evaluation_sha256 is None
    kept = dataclasses.replace(
        CHOICES, calibration_source="stored", evaluation_source="stored", preset=jobs.CUSTOM_MEASURE
    ).spec(REOPENED)
    assert kept.calibration_sha256 == REOPENED.calibration_sha256
    assert kept.evaluation_sha256 == REOPENED.evaluation_sha256
    assert kept.measure == REOPENED.measure and kept.measure.max_seconds == 7.0
    dynamic = CHOICES.with_knobs(fixed_shapes=False, symbolic_dims={"seq": 24}).spec(SweepSpec())
    assert not dynamic.fixed_shapes and dict(dynamic.symbolic_dims) == {"seq": 24}


def test_a_knob_the_spec_does_not_declare_is_a_slip_in_the_page() -> None:
    with pytest.raises(ValueError, match="'hint' is not a knob"):
        CHOICES.with_knobs(hint="latency")
    with pytest.raises(ValueError, match="'measure' is not a knob"):  # the page names a preset
        CHOICES.with_knobs(measure=MEASURE_PRESETS["quick"])


def test_no_runtime_is_one_sentence() -> None:
    with pytest.raises(UserError, match="Pick at least one runtime"):
        CHOICES.with_knobs(backends=[]).spec(SweepSpec())


def test_submit_stores_the_upload_and_queues_a_new_job_or_the_reopened_ones_copy(
    data_dir: Path, mlp_path: Path
) -> None:
    model = ingest_file(mlp_path, "mlp.onnx")
    choices = dataclasses.replace(CHOICES, calibration_source="npz")
    spec = choices.spec(SweepSpec())
    with pytest.raises(UserError, match="Upload the calibration .npz"):
        sweep_form.submit_choices(choices, spec, model.id, None, None)
    assert jobs.list_jobs() == []
    upload = Upload(npz_bytes(x=np.zeros((4, 16), np.float32)), "cal.npz")
    first = sweep_form.submit_choices(choices, spec, model.id, upload, None, label="first")
    stored = jobs.spec_of(first)
    assert stored.calibration_sha256 is not None and first.label == "first"
    again = sweep_form.submit_choices(CHOICES, CHOICES.spec(stored), model.id, None, None, first.id)
    assert again.id != first.id and again.label == "first"  # the reopened job's copy
    assert [j.id for j in jobs.list_jobs()] == [again.id, first.id]
