"""INT8 matmul kernels (OrtOptions.int8_matmul, backend/runtimes/ort_int8.py): without VNNI,
ONNX Runtime's default U8S8 kernels saturate; auto runs the exact U8U8 ones there, and every
result says which ran. Checked on a real session of a model whose U8S8 sums saturate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend import cli
from backend.errors import UserError
from backend.hardware import has_vnni
from backend.knobs import columns
from backend.queue import jobs
from backend.runtimes import get_runtime
from backend.runtimes.base import SessionOptions
from backend.runtimes.ort_int8 import X64_QUANT_PRECISION, choose
from backend.specs import Configuration, Int8Matmul, OrtOptions, Precision, SweepSpec
from tests import models
from tests.pages.seed import add_model, open_page

VNNI = {"avx2": True, "avx512f": True, "avx512_vnni": True, "amx": False}
AVX2 = {"avx2": True, "avx512f": False, "avx512_vnni": False, "amx": False}


def test_auto_runs_exact_kernels_only_where_the_cpu_lacks_vnni() -> None:
    without = choose(Int8Matmul.AUTO, cpu=AVX2, machine="x86_64")
    assert without.exact and without.ran == "u8u8" and "no VNNI" in without.note
    assert X64_QUANT_PRECISION in without.note
    with_vnni = choose(Int8Matmul.AUTO, cpu=VNNI, machine="x86_64")
    assert with_vnni == choose(Int8Matmul.U8S8, cpu=VNNI, machine="x86_64")
    assert not with_vnni.exact and with_vnni.note == ""  # ORT's default, exact there


def test_forced_kernels_run_as_asked_and_say_what_that_costs() -> None:
    fast = choose(Int8Matmul.U8S8, cpu=AVX2, machine="x86_64")
    assert not fast.exact and fast.ran == "u8s8" and "saturate" in fast.note
    exact = choose(Int8Matmul.U8U8, cpu=VNNI, machine="x86_64")
    assert exact.exact and exact.ran == "u8u8" and "VNNI runs exactly too" in exact.note
    arm = choose(Int8Matmul.U8U8, cpu=AVX2, machine="aarch64")
    assert not arm.exact and arm.ran == "not x86" and "no effect" in arm.note
    assert choose(Int8Matmul.AUTO, cpu=AVX2, machine="aarch64").note == ""


def test_below_level_extended_the_setting_is_not_applied_and_the_note_says_so() -> None:
    for level in ("disable", "basic"):
        low = choose(Int8Matmul.AUTO, level, cpu=AVX2, machine="x86_64")
        assert not low.exact and low.ran == "u8s8"
        assert f"At optimization level {level}" in low.note and "MatMulInteger" in low.note
        assert choose(Int8Matmul.U8U8, level, cpu=VNNI, machine="x86_64").note == ""
    assert choose(Int8Matmul.AUTO, "extended", cpu=AVX2, machine="x86_64").exact


def _run(path: Path, mode: Int8Matmul) -> tuple[np.ndarray, dict, list[str], str | None]:
    config = Configuration(Precision.INT8_STATIC, onnxruntime=OrtOptions(int8_matmul=mode))
    with get_runtime("onnxruntime").open(path, SessionOptions(config)) as runner:
        try:
            entry = runner.session.get_session_options().get_session_config_entry(
                X64_QUANT_PRECISION
            )
        except Exception:  # ORT raises for a key that was never set
            entry = None
        [out] = runner.infer({"x": np.ones((1, 64), np.float32)})
        return out, dict(runner.facts), list(runner.notes), entry


def test_a_real_session_runs_the_kernels_chosen_and_exact_ones_do_not_saturate(
    tmp_path: Path,
) -> None:
    path = models.save(models.make_saturating_int8_matmul(), tmp_path / "saturating.onnx")
    exact, facts, _, entry = _run(path, Int8Matmul.U8U8)
    assert entry == "1" and facts["int8_matmul"] == "u8u8"
    assert np.allclose(exact, 64.0)  # the integer math, with no 16-bit sums
    fast, facts, notes, entry = _run(path, Int8Matmul.U8S8)
    assert entry is None and facts["int8_matmul"] == "u8s8"
    if has_vnni():
        assert np.allclose(fast, 64.0) and notes == []  # VNNI adds in 32 bits
    else:  # this host saturates: U8S8 loses about half, and the result says it may
        assert fast.max() < 40.0 and "saturate" in notes[0]
        auto, facts, notes, entry = _run(path, Int8Matmul.AUTO)
        assert entry == "1" and np.allclose(auto, 64.0) and "no VNNI" in notes[0]


def test_it_is_keyed_stored_linked_and_flagged() -> None:
    exact = OrtOptions(int8_matmul=Int8Matmul.U8U8)
    spec = SweepSpec(
        precisions=(Precision.FP32, Precision.INT8_STATIC),
        backends=("onnxruntime", "openvino"),
        onnxruntime=exact,
    )
    by_runtime = {
        c.backend: c for c in spec.configurations() if c.precision == Precision.INT8_STATIC
    }
    assert by_runtime["onnxruntime"].key.endswith("/int8mm-u8u8")
    assert by_runtime["openvino"].onnxruntime == OrtOptions()  # OpenVINO has no such kernels
    # nor has FP32: its configuration is the plain one, not "CPU FP32 int8mm-u8u8"
    [fp32] = [
        c
        for c in spec.configurations()
        if c.precision == Precision.FP32 and c.backend == "onnxruntime"
    ]
    assert fp32.onnxruntime == OrtOptions() and "int8mm" not in fp32.key
    assert "int8mm" not in Configuration(Precision.INT8_STATIC).key  # auto keeps old keys
    assert columns(by_runtime["onnxruntime"])["int8_matmul"] == "u8u8"
    assert spec.to_dict()["onnxruntime"]["int8_matmul"] == "u8u8"
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    assert jobs.spec_to_query(spec)["int8_matmul"] == "u8u8"
    assert "int8_matmul" not in jobs.spec_to_query(SweepSpec())
    assert jobs.spec_from_query({"int8_matmul": "u8u8"}) == SweepSpec(onnxruntime=exact)
    parser = cli.build_parser()
    flagged = cli._spec(parser.parse_args(["submit", "1", "--int8-matmul", "u8s8"]))
    assert flagged.onnxruntime == OrtOptions(int8_matmul=Int8Matmul.U8S8)


def test_an_unknown_kernel_name_is_one_sentence() -> None:
    with pytest.raises(UserError, match="Unknown INT8 matmul kernels 'u4u4'; choose one of"):
        OrtOptions(int8_matmul="u4u4")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="Unknown INT8 matmul kernels"):
        jobs.spec_from_query({"int8_matmul": "fast"})


def test_the_optimize_page_offers_it_and_submits_it(data_dir: Path, mlp_path: Path) -> None:
    model = add_model(mlp_path)
    at = open_page("optimize", model=model.id)
    assert at.selectbox(key="int8_matmul").value == Int8Matmul.AUTO
    at.selectbox(key="int8_matmul").set_value(Int8Matmul.U8U8).run()
    assert at.query_params["int8_matmul"] == "u8u8"
    at.button(key="submit_sweep").click().run()
    assert not at.exception
    [job] = jobs.list_jobs()
    assert jobs.spec_of(job).onnxruntime == OrtOptions(int8_matmul=Int8Matmul.U8U8)
