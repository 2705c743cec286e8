"""Temporary folders: a long-lived process (worker, dashboard, CLI) makes owned folders, which the
next Optiboard process sweeps when their owner was SIGKILLed; a plain temporary folder is left
in /tmp for good by a kill. Each plain one left in backend/ is listed here with why it may be."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# module::function -> why a plain temporary folder is right there
PLAIN = {
    "backend/engine/ortrace.py::trace_events": "a profiling session: measurement children only",
    "backend/engine/side.py::__init__": "a regression side, inside its dialog child",
    "backend/engine/run.py::run_configuration": "the measurement child (TMPDIR is its folder)",
    "backend/engine/variants.py::build_variant": "inside the configuration's own work folder",
    "backend/engine/layerloss.py::activations": "the layer-loss child",
    "backend/engine/mixed.py::run_command": "the `mixed` CLI in the foreground",
    "backend/runtimes/openvino.py::_compress_weights": "runtimes run in children only",
    "backend/runtimes/openvino.py::run_once": "runtimes run in children only",
    "backend/models/safezip.py::extract_zip": "inside the ingest's work folder",
    "backend/models/ingest.py::ingest_file": "the data folder's tmp/, beside the store",
    "backend/compat/groundtruth_openvino.py::_worker": "the OpenVINO ground-truth child",
    "backend/compat/groundtruth.py::run_batch": "the node-test ground truth: tests and bench only",
    "backend/compat/placement.py::read_placement": "beside external weights: links and the graph",
    "backend/generate/library.py::genai_folder": "staged beside its target in the data folder",
    "backend/generate/variants.py::_work": "under the generation variants' own root",
    "backend/launch/sandbox.py::_trial": "bubblewrap's trial run, a few bytes",
}
MAKERS = {"TemporaryDirectory", "mkdtemp"}  # folders; a file written then renamed is not one


def _plain_folders() -> set[str]:
    """Every temporary folder made in backend/, as module::enclosing function."""
    found = set()
    for path in sorted((ROOT / "backend").rglob("*.py")):
        text = path.read_text()
        if "tempfile" not in text:
            continue
        tree = ast.parse(text)
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef):
                continue
            for call in ast.walk(func):
                name = getattr(getattr(call, "func", None), "attr", None)
                if isinstance(call, ast.Call) and name in MAKERS:
                    found.add(f"{path.relative_to(ROOT)}::{func.name}")
    return found - {"backend/launch/folders.py::owned_folder"}


def test_every_plain_temporary_folder_in_the_backend_is_one_a_kill_cannot_strand() -> None:
    found = _plain_folders()
    unlisted = sorted(found - set(PLAIN))
    assert unlisted == [], (
        f"{unlisted}: a worker, dashboard or CLI process killed here leaves the folder in /tmp for "
        "good; use backend.launch.folders.owned_folder, or list it here with why it may stay"
    )
    assert sorted(set(PLAIN) - found) == []  # a listed one that is gone: take it off the list
