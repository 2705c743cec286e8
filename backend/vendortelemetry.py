"""No runtime Optiboard loads reports its use to its vendor.

ONNX Runtime (1.29 and later) and ONNX Runtime GenAI send usage events to Microsoft's 1DS
collector from Linux, and keep a device id and an event queue under ~/.cache/Microsoft, unless
ORT_DISABLE_TELEMETRY is set before they load (read once, at load). `import openvino` sends a
Google Analytics event and keeps a client id under ~/intel unless a consent file there says no
(OpenVINO's own opt-out, what its `opt_in_out --opt_out` writes). Ray reports usage to Anyscale
unless RAY_USAGE_STATS_ENABLED is 0. Measured on 2026-12-07: the CLI's `run` left ONNX
Runtime's and OpenVINO's ids in the user's home. Standard library only: backend/__init__.py calls
`decline` before any module of the domain imports a runtime.
"""

from __future__ import annotations

import os
from pathlib import Path

ORT_OPT_OUT = {"ORT_DISABLE_TELEMETRY": "1"}  # ONNX Runtime's and ONNX Runtime GenAI's
# Ray's usage reports to Anyscale, on by default, decided by each `ray start` (join's nodes)
RAY_OPT_OUT = {"RAY_USAGE_STATS_ENABLED": "0"}
OPENVINO_CONSENT = Path("intel") / "openvino_telemetry"  # under HOME, where OpenVINO looks


def decline_openvino(home: Path) -> None:
    """OpenVINO's opt-out file under `home`, unless that account already chose (a file there
    is its owner's own answer). A home that cannot be written is left alone: OpenVINO then
    finds no place for its files and sends nothing either."""
    consent = Path(home) / OPENVINO_CONSENT
    try:
        consent.parent.mkdir(parents=True, exist_ok=True)
        with open(consent, "x") as file:
            file.write("0")
    except OSError:
        pass


def decline() -> None:
    """This process's opt-outs, each unless the account chose already: ONNX Runtime's and
    Ray's by their variables (inherited by every child started with this environment: a
    node's `ray start` too), OpenVINO's by its file in this account's home."""
    for name, value in {**ORT_OPT_OUT, **RAY_OPT_OUT}.items():
        os.environ.setdefault(name, value)
    decline_openvino(Path.home())
