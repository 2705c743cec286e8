"""Every CLI call builds the whole parser, so building it must import no verb's heavy libraries:
those are imported by the command that runs (bench/results/cli_startup.txt has the CPU it saves).
Each check runs in a fresh interpreter, since this test process has imported them all already."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What only some verbs need: pandas and pyarrow (reports), ONNX and ONNX Runtime (models, sweeps),
# OpenVINO and torch (their runtimes), Triton's client and gRPC (serving), streamlit (never),
# SQLAlchemy (the stored rows: commands that read them) and numpy (what measures or computes).
HEAVY = (
    "pandas",
    "pyarrow",
    "onnx",
    "onnxruntime",
    "openvino",
    "torch",
    "tritonclient",
    "grpc",
    "streamlit",
    "sqlalchemy",
    "numpy",
)

PROBE = """
import json, sys
import backend.cli
parser = backend.cli.build_parser()
parser.parse_args(["jobs"])
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in sys.argv[1:])))
"""


def python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_building_the_parser_imports_no_heavy_library() -> None:
    done = python("-c", PROBE, *HEAVY)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_the_probe_sees_a_heavy_library_once_a_verb_imports_it() -> None:
    """The same probe after a command's own import (show's report reads pandas): it would
    have said [] whatever was imported if it could not see one."""
    probe = PROBE.replace(
        "import backend.cli\n", "import backend.cli\nimport backend.reporting.front\n"
    )
    done = python("-c", probe, *HEAVY)
    assert done.returncode == 0, done.stderr
    assert "pandas" in json.loads(done.stdout)


def test_help_lists_every_verb() -> None:
    from backend.cli import build_parser

    done = python("-m", "backend.cli", "--help")
    assert done.returncode == 0, done.stderr
    listed = re.search(r"\{([a-z,-]+)\}", done.stdout)
    assert listed is not None, done.stdout
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert listed.group(1).split(",") == list(sub.choices)
    for verb in ("add", "run", "jobs", "show", "export", "compat", "users", "regress", "serve"):
        assert verb in sub.choices
        assert re.search(rf"^\s+{verb}\s+\S", done.stdout, re.MULTILINE), verb
