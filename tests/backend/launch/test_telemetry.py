"""A sandboxed child sends no usage reports: OpenVINO's telemetry finds its consent declined."""

from __future__ import annotations

from tests.backend.launch.sandboxed import in_sandbox


def test_openvino_telemetry_is_declined_in_a_sandboxed_child() -> None:
    outcome = in_sandbox("openvino_consent", module="tests.backend.launch.telemetry_probe")
    # NO_FILE would send (the converter and NNCF report unless told no)
    assert outcome == "DECLINED"
