"""The "why" lines appear when measurements call for them and stay silent otherwise."""

from __future__ import annotations

from pathlib import Path

from backend.engine.explain import explain
from backend.hardware import cpu_features
from backend.results import AccuracyReport
from backend.specs import Precision

VNNI_CPU = {"avx2": True, "avx512f": True, "avx512_vnni": True, "amx": False}
OLD_CPU = {"avx2": True, "avx512f": False, "avx512_vnni": False, "amx": False}
CNN_OPS = {"Conv": 5, "Relu": 5, "Add": 2, "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
GOOD = AccuracyReport(1e-3, 1e-3, 0.9995, 1.0, 1, 64)


def test_fp16_slower_on_cpu_explains_missing_float16_kernels() -> None:
    lines = explain(Precision.FP16, "cpu", 0.4, CNN_OPS, VNNI_CPU)
    assert len(lines) == 1
    assert "0.40x" in lines[0] and "few float16 kernels" in lines[0]
    assert "GPUs (CUDA/TensorRT)" in lines[0]
    same = explain(Precision.FP16, "cpu", 1.0, CNN_OPS, VNNI_CPU)
    assert len(same) == 1 and same[0].startswith("FP16 was no faster than FP32")


def test_dynamic_int8_slower_on_a_conv_net_blames_conv_integer() -> None:
    ops = {"ConvInteger": 5, "DynamicQuantizeLinear": 5, "Relu": 5}
    lines = explain(Precision.INT8_DYNAMIC, "cpu", 0.2, ops, VNNI_CPU)
    assert len(lines) == 1 and "ConvInteger" in lines[0] and "static INT8 (QDQ)" in lines[0]


def test_dynamic_int8_slower_without_conv_counts_its_run_time_quantizers() -> None:
    """An MLP's dynamic INT8 at 0.77x FP32 on an AVX2 host had no line at all: the run's own
    variant graph says how many activations it quantizes on every call."""
    variant = {"DynamicQuantizeLinear": 2, "MatMulInteger": 2, "Mul": 4, "Cast": 2}
    mlp = {"Gemm": 2, "Relu": 1, "Softmax": 1}
    (line,) = explain(Precision.INT8_DYNAMIC, "cpu", 0.77, mlp, VNNI_CPU, variant_ops=variant)
    assert line.startswith("Dynamic INT8 ran at 0.77x the speed of FP32: its 2 ")
    assert "2 DynamicQuantizeLinear nodes quantize activations on every call" in line
    assert "Static INT8 (QDQ) fixes the scales once" in line and "VNNI" not in line
    assert line.endswith("sweep with profiling on for evidence.)")  # a rule of thumb, said so
    (old,) = explain(
        Precision.INT8_DYNAMIC, "cpu", 0.77, mlp, OLD_CPU, int8_matmul="u8u8", variant_ops=variant
    )
    assert "no VNNI, so the int8 math itself gains little" in old
    assert "exact U8U8 kernels" in old and "--int8-matmul u8s8" in old
    (unrecorded,) = explain(Precision.INT8_DYNAMIC, "cpu", 0.5, mlp, VNNI_CPU)
    assert "it quantizes the activations of its matmuls on every call" in unrecorded
    assert explain(Precision.INT8_DYNAMIC, "cpu", 0.95, mlp, VNNI_CPU, variant_ops=variant) == []


def test_a_slower_configuration_no_rule_explains_says_so_and_how_to_find_out() -> None:
    """OpenVINO's INT8 of the test MLP ran at 0.61x its FP32 on an AVX2 host with no line; the
    rules of thumb know only ONNX Runtime's kernels, so it points at the profile instead."""
    (line,) = explain(Precision.INT8_STATIC, "cpu", 0.61, CNN_OPS, OLD_CPU, runtime="openvino")
    assert line.startswith("INT8 static (QDQ) ran at 0.61x the speed of FP32 on openvino")
    assert "cannot say why" in line and "--profile" in line and "no VNNI" not in line
    (cuda,) = explain(Precision.FP16, "cuda", 0.8, CNN_OPS, {})  # ONNX Runtime, no rule for it
    assert "0.80x the speed of FP32 on onnxruntime" in cuda and "--profile" in cuda
    assert explain(Precision.INT8_STATIC, "cpu", 0.95, CNN_OPS, OLD_CPU, runtime="openvino") == []


def test_static_int8_speedup_is_credited_to_vnni_or_its_absence() -> None:
    fast = explain(Precision.INT8_STATIC, "cpu", 2.7, CNN_OPS, VNNI_CPU)
    assert len(fast) == 1 and "2.70x faster" in fast[0] and "VNNI" in fast[0]
    slow = explain(Precision.INT8_STATIC, "cpu", 1.05, CNN_OPS, OLD_CPU)
    assert len(slow) == 1 and "no VNNI on this CPU" in slow[0] and "U8U8" not in slow[0]
    exact = explain(Precision.INT8_STATIC, "cpu", 0.7, CNN_OPS, OLD_CPU, int8_matmul="u8u8")
    assert len(exact) == 1 and "0.70x" in exact[0] and "exact U8U8 kernels" in exact[0]
    assert "--int8-matmul u8s8" in exact[0]


def test_int8_with_low_top1_or_cosine_warns_with_concrete_advice() -> None:
    poor = AccuracyReport(2.0, 0.3, 0.97, 0.9, 1, 64)
    lines = explain(Precision.INT8_STATIC, "cpu", 1.0, CNN_OPS, VNNI_CPU, accuracy=poor)
    assert len(lines) == 1
    assert "top-1 agrees with FP32 on only 90.0% of rows" in lines[0]
    assert "cosine similarity to FP32 is 0.970" in lines[0]
    assert "more real samples" in lines[0] and "first and last layers in FP32" in lines[0]


def test_low_top1_names_the_rows_it_counts_and_how_near_a_tie_they_were() -> None:
    """The walkthrough's "25%" was 1 row of 4: the line says so, and how close FP32's own
    top two scores were where the class changed, against the configuration's error."""
    few = AccuracyReport(0.004, 0.05, 0.9998, 0.25, 1, 4, top1_rows=4, top1_flip_margin=0.0012)
    (line,) = explain(Precision.INT8_DYNAMIC, "cpu", 1.0, CNN_OPS, VNNI_CPU, accuracy=few)
    assert "top-1 agrees with FP32 on only 1 of 4 rows (25.0%)" in line
    assert "FP32's top two scores were at most 0.0012 apart" in line
    assert "largest error: 0.004" in line


def test_unremarkable_results_get_no_lines() -> None:
    assert explain(Precision.FP32, "cpu", 1.0, CNN_OPS, VNNI_CPU, accuracy=None) == []
    assert explain(Precision.INT8_STATIC, "cpu", 1.0, CNN_OPS, VNNI_CPU, accuracy=GOOD) == []
    assert explain(Precision.INT8_DYNAMIC, "cpu", 1.5, {"MatMulInteger": 2}, VNNI_CPU) == []
    assert explain(Precision.FP16, "cuda", 1.8, CNN_OPS, {}, accuracy=GOOD) == []
    assert explain(Precision.FP16, "cpu", None, CNN_OPS, VNNI_CPU) == []  # nothing measured


def test_cpu_features_read_proc_cpuinfo_flags(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse avx2 avx512f avx512_vnni\n")
    assert cpu_features(cpuinfo) == {
        "avx2": True,
        "avx512f": True,
        "avx512_vnni": True,
        "amx": False,
    }
    assert cpu_features(tmp_path / "missing") == dict.fromkeys(VNNI_CPU, False)


def test_cpu_features_know_flag_aliases_and_match_whole_flags_only(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor : 0\nvmx flags : avx512f\nflags\t\t: sse avx512fp16 avx_vnni amx_tile\n"
    )
    found = cpu_features(cpuinfo)
    assert found["avx512_vnni"] and found["amx"]  # AVX-VNNI and AMX tiles count
    assert not found["avx512f"]  # "avx512fp16" and the vmx line are not avx512f
    assert not found["avx2"]


def test_int8_losing_accuracy_on_u8s8_kernels_without_vnni_blames_the_kernels_first() -> None:
    bad = AccuracyReport(0.2, 1.0, 0.88, 1.0, 1, 1)
    lines = explain(Precision.INT8_STATIC, "cpu", None, {}, OLD_CPU, bad, int8_matmul="u8s8")
    assert len(lines) == 1 and "cosine similarity to FP32 is 0.880" in lines[0]
    assert "U8S8 kernels" in lines[0] and "--int8-matmul u8u8" in lines[0]
    for cpu, ran in ((VNNI_CPU, "u8s8"), (OLD_CPU, "u8u8")):  # exact kernels: calibration next
        [line] = explain(Precision.INT8_STATIC, "cpu", None, {}, cpu, bad, int8_matmul=ran)
        assert "calibrate with more real samples" in line and "U8S8" not in line
