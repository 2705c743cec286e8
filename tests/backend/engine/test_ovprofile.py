"""OpenVINO's performance counters feed the same profile and evidence path as ONNX Runtime's
profiler: on the HardSwish net (tests/evidence_models.py) OpenVINO fuses every HardSwish into
its int8 Convolution, and the profile and the explanation say so with this run's numbers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest

from backend.engine.evidence import facts
from backend.engine.explain import RULE_OF_THUMB
from backend.engine.ovprofile import kernel_precision, profile_openvino
from backend.engine.profile import CONVERSION_OPS, name_nodes, stored_profile
from backend.engine.variants import build_variant
from backend.models.ingest import ingest_file
from backend.queue import jobs
from backend.queue.worker import JobRunner
from backend.reporting.profilecharts import node_kind
from backend.runtimes.base import SessionOptions
from backend.specs import Configuration, MeasureSettings, Precision, SweepSpec
from storage.repo import jobs as job_store
from storage.states import JobState
from tests.evidence_models import make_hardswish_net
from tests.models import save

QUICK = MeasureSettings(
    warmup_runs=2, window_runs=10, window_min_seconds=0.05, max_seconds=3, accuracy_samples=1
)


@pytest.fixture(scope="module")
def hardswish(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(make_hardswish_net(), tmp_path_factory.mktemp("ov") / "hs.onnx")


def test_kernel_precision_is_read_from_the_exec_type() -> None:
    assert kernel_precision("brgconv_avx512_1x1_I8") == "i8"
    assert kernel_precision("jit_avx512_f32") == "f32"


def test_openvino_int8_profile_maps_fused_layers_back_to_the_uploaded_nodes(
    hardswish: Path, tmp_path: Path
) -> None:
    config = Configuration(Precision.INT8_STATIC, backend="openvino", calibration_samples=4)
    variant = build_variant(hardswish, config, tmp_path)
    source = onnx.load(str(hardswish))
    feed = {"input": np.random.default_rng(0).standard_normal((1, 3, 32, 32), np.float32)}
    profile = profile_openvino(variant.path, source, SessionOptions(config), feed, runs=3)
    assert profile.runs == 3 and profile.provider == "CPU"
    named = name_nodes(onnx.load(str(hardswish)))  # the names profiles give unnamed nodes
    hardswish_nodes = {n.name for n in named.graph.node if n.op_type == "HardSwish"}
    assert len(hardswish_nodes) == 6
    convs = [n for n in profile.nodes if n.op_type == "Convolution"]
    assert convs and all(n.precision in ("i8", "u8") for n in convs)
    # every uploaded HardSwish ran inside an int8 Convolution layer, none on its own
    fused = {s for n in convs for s in n.source_nodes if s in hardswish_nodes}
    assert fused == hardswish_nodes
    assert not [n for n in profile.nodes if n.source_ops == ["HardSwish"]]
    assert {node_kind(profile, n) for n in convs} == {"int8 kernel"}
    lines = facts(profile, "OpenVINO INT8", 1.5)
    share = re.search(r"(\d+)% of OpenVINO INT8 time ran int8 kernels", lines[0])
    computing = [n for n in profile.nodes if n.op_type not in CONVERSION_OPS]
    int8 = [n for n in computing if n.precision in ("i8", "u8")]
    assert share and int(share.group(1)) == round(100 * profile.share(int8))
    assert not any("no int8 kernel" in line for line in lines)  # fused, not a float island


def test_an_openvino_fp32_profile_claims_no_int8_facts(hardswish: Path) -> None:
    source = onnx.load(str(hardswish))
    feed = {"input": np.random.default_rng(0).standard_normal((1, 3, 32, 32), np.float32)}
    options = SessionOptions(Configuration(Precision.FP32, backend="openvino"))
    profile = profile_openvino(hardswish, source, options, feed, runs=2)
    assert profile.nodes and not any(n.precision in ("i8", "u8") for n in profile.nodes)
    lines = facts(profile, "OpenVINO FP32")
    assert not any("int8" in line for line in lines), lines
    assert lines[-1].startswith("OpenVINO FP32 time by op type: ")


def test_an_openvino_int8_result_gets_explanations_computed_from_its_counters(
    data_dir: Path, hardswish: Path
) -> None:
    model = ingest_file(hardswish, "hs.onnx")
    spec = SweepSpec(
        precisions=(Precision.FP32, Precision.INT8_STATIC),
        backend="openvino",
        profile=True,
        calibration_samples=4,
        measure=QUICK,
    )
    job = jobs.submit_sweep(model.id, spec)
    claimed = job_store.claim_job("inline", 300, job_id=job.id)
    assert JobRunner("inline").run(claimed).state == JobState.SUCCEEDED
    stored = {r.configuration.precision: r for r in jobs.stored_results(job.id)}
    int8 = stored[Precision.INT8_STATIC].result
    profile = stored_profile(int8.telemetry)
    assert profile is not None and profile.provider == "CPU"
    assert any(n.op_type == "Convolution" and n.precision for n in profile.nodes)
    notes = " ".join(int8.notes)
    assert "ran int8 kernels" in notes and "time by op type: " in notes
    assert RULE_OF_THUMB not in notes
