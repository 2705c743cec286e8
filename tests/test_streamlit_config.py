"""What Streamlit itself loads from .streamlit/config.toml: the server settings visitors rely on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_streamlit_loads_loopback_xsrf_and_hidden_error_details() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "streamlit", "config", "show"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    # an option Streamlit does not know would be dropped silently; `config show` prints what holds
    assert '\nshowErrorDetails = "none"\n' in shown
    assert "\nenableXsrfProtection = true\n" in shown
    assert '\naddress = "127.0.0.1"\n' in shown
    hosts = shown.split("\nallowedHosts = [", 1)[1].split("]", 1)[0]
    assert '"localhost"' in hosts and '"0.0.0.0"' not in hosts and '"*"' not in hosts
