"""A result's "why" lines never credit a speed that its own figures dispute."""

from __future__ import annotations

from datetime import datetime

from backend.engine.variants import CONV_DYNAMIC_EXPECTATION
from backend.jobs.annotate import annotate
from backend.results import ConfigurationResult, LatencyStats, ResultStatus, StoredResult
from backend.specs import Configuration, Precision

VNNI_CPU = {"avx2": True, "avx512f": True, "avx512_vnni": True, "amx": False}
CNN_OPS = {"Conv": 5, "Relu": 5, "QLinearConv": 4}


def _result(
    precision: Precision, samples_ms: list[float], stable: bool = True
) -> ConfigurationResult:
    config = Configuration(precision=precision, batch_size=8)
    latency = LatencyStats.from_samples(samples_ms)
    return ConfigurationResult(
        config.key,
        config,
        ResultStatus.OK,
        latency=latency,
        stable=stable,
        throughput=config.batch_size * 1000.0 / latency.mean,
    )


def _baseline(samples_ms: list[float], stable: bool = True) -> StoredResult:
    fp32 = _result(Precision.FP32, samples_ms, stable)
    return StoredResult(1, 1, datetime.now(), fp32.configuration, fp32)


def test_a_faster_median_with_a_slower_throughput_is_not_explained() -> None:
    """The walkthrough's row: INT8's median call 2.9x faster, its stalls (p99 150 ms) making
    its throughput half FP32's; the VNNI line would credit a speed the run does not have."""
    int8 = _result(Precision.INT8_STATIC, [1.2] * 90 + [150.0] * 10)
    annotate(int8, int8.configuration, CNN_OPS, VNNI_CPU, _baseline([3.5] * 100))
    assert not any("VNNI" in line for line in int8.notes)
    (line,) = [n for n in int8.notes if n.startswith("Speed not explained")]
    assert "2.92x FP32's speed but the throughput says 0.22x" in line
    assert "p99 150.000 ms here, 3.500 ms for FP32" in line


def test_agreeing_figures_keep_their_explanation() -> None:
    int8 = _result(Precision.INT8_STATIC, [1.2] * 100)
    annotate(int8, int8.configuration, CNN_OPS, VNNI_CPU, _baseline([3.5] * 100))
    assert any("2.92x faster than FP32 thanks to this CPU's VNNI" in n for n in int8.notes)
    assert not any(n.startswith("Speed not explained") for n in int8.notes)


def test_a_speed_the_throughput_halves_is_not_explained_either() -> None:
    """The re-walk's row: the median call 3.75x faster, the throughput 2.03x: both faster, but
    not one speed, so the VNNI line would cite a figure the run does not support."""
    int8 = _result(Precision.INT8_STATIC, [1.0] * 80 + [6.0] * 20)
    annotate(int8, int8.configuration, CNN_OPS, VNNI_CPU, _baseline([3.75] * 100))
    assert not any("VNNI" in line for line in int8.notes)
    (line,) = [n for n in int8.notes if n.startswith("Speed not explained")]
    assert "the median call says 3.75x FP32's speed but the throughput says 1.87x" in line


def test_no_speed_is_explained_against_or_from_an_unstable_measurement() -> None:
    for mine, theirs, whose in (
        (False, True, "this configuration's measurement was"),
        (True, False, "FP32's measurement was"),
        (False, False, "this configuration's and FP32's measurements were"),
    ):
        int8 = _result(Precision.INT8_STATIC, [1.2] * 100, stable=mine)
        annotate(int8, int8.configuration, CNN_OPS, VNNI_CPU, _baseline([3.5] * 100, theirs))
        assert not any("VNNI" in line for line in int8.notes)
        assert f"Speed not explained: {whose} unstable, so the 2.92x against FP32" in "".join(
            int8.notes
        )


def test_the_builds_conv_expectation_gives_way_to_the_measured_line() -> None:
    """A walkthrough read the ConvInteger advice twice on one row: the build's expectation
    ("expect it to be much slower") and the measured line ("ran at 0.09x ... ConvInteger")."""
    dynamic = _result(Precision.INT8_DYNAMIC, [40.0] * 100)
    dynamic.notes.append(CONV_DYNAMIC_EXPECTATION)  # as engine/run copies the variant's notes
    annotate(dynamic, dynamic.configuration, CNN_OPS, VNNI_CPU, _baseline([3.5] * 100))
    assert CONV_DYNAMIC_EXPECTATION not in dynamic.notes
    assert sum("ConvInteger" in n for n in dynamic.notes) == 1
    assert any(n.startswith("Dynamic INT8 ran at 0.09x the speed of FP32") for n in dynamic.notes)
    unmeasured = _result(Precision.INT8_DYNAMIC, [40.0] * 100)
    unmeasured.notes.append(CONV_DYNAMIC_EXPECTATION)
    annotate(unmeasured, unmeasured.configuration, CNN_OPS, VNNI_CPU, None)  # no FP32 to beat
    assert unmeasured.notes == [CONV_DYNAMIC_EXPECTATION]  # the expectation is all there is
