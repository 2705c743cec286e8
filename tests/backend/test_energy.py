"""Energy counters (backend/energy): the reasons read from this machine's real /sys and NVML,
the wraparound arithmetic, and the RAPL path over a real sysfs-shaped tree of files."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend import energy
from backend.energy import rapl
from backend.energy.counters import EnergyMeter, Reading, wrapped_delta
from backend.engine.measure import measure
from backend.reporting.text import energy_lines
from backend.results import ConfigurationResult
from backend.specs import Configuration, MeasureSettings, Precision

POWERCAP = Path("/sys/class/powercap")


def _expected_rapl_reason() -> str | None:
    """What this machine's /sys/class/powercap really holds, said independently of rapl.py."""
    if not POWERCAP.is_dir():
        return (
            "not measurable here: /sys/class/powercap does not exist (this kernel exposes no "
            "power-capping counters; usual in a virtual machine or container)"
        )
    packages = [
        z
        for z in POWERCAP.glob("intel-rapl:*")
        if z.name.count(":") == 1 and (z / "name").read_text().startswith("package")
    ]
    if not packages:
        return (
            "not measurable here: /sys/class/powercap has no RAPL zone (a virtual machine, or a "
            "CPU without RAPL)"
        )
    for zone in packages:
        try:
            (zone / "energy_uj").read_text()
        except PermissionError:
            return (
                f"not measurable here: {zone}/energy_uj is readable by root only "
                "(since CVE-2020-8694)"
            )
    return None


def test_the_cpu_meter_says_what_this_machines_powercap_holds() -> None:
    expected = _expected_rapl_reason()
    with energy.meter_for("cpu") as meter:
        if expected is None:  # a host with readable RAPL: it measures, naming its zones
            assert meter.measurable and meter.source.startswith("RAPL energy_uj on CPU package")
        else:
            assert not meter.measurable and meter.source == expected
            assert meter.idle(5.0) is None  # nothing to measure: no idle wait either


def test_without_nvml_the_gpu_meter_gives_nvmls_own_reason() -> None:
    try:
        import pynvml
    except ImportError:
        expected = "not measurable here: the nvidia-ml-py package (pynvml) is not installed"
    else:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            expected = f"not measurable here: NVML does not start ({exc}): no NVIDIA driver on "
            expected += "this machine"
        else:
            pynvml.nvmlShutdown()
            pytest.skip("NVML starts here: the GPU path is checked by bench/h200_energy.sh")
    with energy.meter_for("cuda", [0]) as meter:
        assert not meter.measurable and meter.source == expected
    assert (
        energy.meter_for("dml").source == "not measurable here: no energy counter is read for dml"
    )


def test_wraparound_adds_the_rest_of_the_range() -> None:
    assert wrapped_delta(1_000, 4_500, 262_143_328_850) == 3_500
    # 262143328850 is a real package zone's max_energy_range_uj: 100 uJ before the top, 50 after
    assert wrapped_delta(262_143_328_750, 50, 262_143_328_850) == 150
    assert wrapped_delta(7, 7, 100) == 0


def _zone(root: Path, name: str, label: str, energy_uj: int, max_uj: int = 1_000_000) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(f"{label}\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone


def test_rapl_sums_package_zones_only_and_unwraps(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert rapl.unreadable_reason(empty) == (
        f"not measurable here: {empty} has no RAPL zone (a virtual machine, or a CPU without RAPL)"
    )
    package = _zone(tmp_path, "intel-rapl:0", "package-0", 999_000)
    core = _zone(tmp_path, "intel-rapl:0:0", "core", 10)  # inside package-0: not added again
    psys = _zone(tmp_path, "intel-rapl:1", "psys", 10)  # the whole platform: not added either
    meter = rapl.meter(tmp_path)
    assert meter.source == "RAPL energy_uj on CPU package-0 (intel-rapl:0)"
    with meter.track() as reading:
        for zone in (core, psys):
            (zone / "energy_uj").write_text("500000\n")
        (package / "energy_uj").write_text("2000\n")  # wrapped past 1,000,000 uJ
    assert reading.joules == pytest.approx(0.003)  # 1,000 uJ to the top + 2,000 after


def test_window_energy_per_sample_with_idle_apart(tmp_path: Path) -> None:
    """Each call adds 2,000 uJ to a real counter file: 4 samples a call make 0.5 mJ/sample."""
    package = _zone(tmp_path, "intel-rapl:0", "package-0", 0, max_uj=10**12)
    counter = package / "energy_uj"

    def infer() -> None:
        counter.write_text(f"{int(counter.read_text()) + 2_000}\n")

    settings = MeasureSettings(warmup_runs=1, window_runs=5, window_min_seconds=0, max_seconds=5)
    meter = rapl.meter(tmp_path)
    idle = meter.idle(0.01)
    assert idle is not None and idle.joules == 0  # nothing wrote to the counter while idle
    measurement = measure(infer, settings, meter)
    report = measurement.energy(meter, idle, items_per_call=4)
    assert report.measured and len(report.j_per_item) == settings.stable_windows
    assert report.j_p50 == report.j_min == report.j_max == pytest.approx(0.0005)
    assert report.idle_w == 0 and report.j_above_idle_p50 == pytest.approx(0.0005)
    assert report.source == "RAPL energy_uj on CPU package-0 (intel-rapl:0)"

    result = ConfigurationResult("k", Configuration(precision=Precision.FP32), "ok", energy=report)
    again = ConfigurationResult.from_dict(result.to_dict())
    assert again.energy == report  # stored in the result's JSON and read back as types
    assert energy_lines([again])[1].startswith(
        "  k: 0.0005 J/sample (0.0005-0.0005 over 3 windows)"
    )


def test_an_unmeasurable_meter_reports_its_reason_and_no_figures() -> None:
    meter = EnergyMeter([], reason="not measurable here: test reason")
    report = energy.energy_report(meter, [(Reading(1.0, 1.0), 10)])
    assert not report.measured and report.j_p50 is None
    assert report.summary == "energy: not measurable here: test reason"
