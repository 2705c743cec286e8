"""A sandboxed child sends no usage reports: OpenVINO's telemetry finds its consent declined."""

from __future__ import annotations

import settings
from backend.launch.children import run_call

TESTS = settings.PROJECT_ROOT / "tests"  # bound read-only so the child can import the probe


def test_openvino_telemetry_is_declined_in_a_sandboxed_child() -> None:
    outcome = run_call(
        "tests.backend.launch.telemetry_probe:openvino_consent",
        timeout_s=60,
        what="The sandboxed child",
        sandboxed=True,
        read_only=[TESTS],
    )
    # NO_FILE would send (the converter and NNCF report unless told no)
    assert outcome == "DECLINED"
