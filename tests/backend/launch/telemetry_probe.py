"""Child-side probe: what OpenVINO's telemetry decides in this process (imports only it)."""

from __future__ import annotations


def openvino_consent() -> str:
    """The consent openvino_telemetry finds, as the converter and NNCF ask for it (no dialog)."""
    from openvino_telemetry.utils.opt_in_checker import OptInChecker

    return OptInChecker().check(enable_opt_in_dialog=False).name
