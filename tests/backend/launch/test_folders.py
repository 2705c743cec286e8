"""Temporary folders: a long-lived process (worker, dashboard, CLI) makes owned folders, which the
next Optiboard process sweeps when their owner was SIGKILLed; a plain temporary folder is left
in /tmp for good by a kill. Each plain one left in backend/ is listed here with why it may be."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from backend.launch.folders import FOLDER_PREFIX, file_inside, owned_file, owned_folder
from tests.processes import ended_pid

ROOT = Path(__file__).resolve().parents[3]

# module::function -> why a plain temporary folder is right there
PLAIN = {
    "backend/engine/ortrace.py::trace_events": "a profiling session: measurement children only",
    "backend/engine/side.py::__init__": "a regression side, inside its dialog child",
    "backend/engine/run.py::run_configuration": "the measurement child (TMPDIR is its folder)",
    "backend/engine/variants.py::build_variant": "inside the configuration's own work folder",
    "backend/engine/layerloss.py::activations": "the layer-loss child",
    "backend/runtimes/openvino.py::_compress_weights": "runtimes run in children only",
    "backend/runtimes/openvino.py::run_once": "runtimes run in children only",
    "backend/models/safezip.py::extract_zip": "inside the ingest's work folder",
    "backend/compat/groundtruth_openvino.py::_worker": "the OpenVINO ground-truth child",
    "backend/compat/groundtruth.py::run_batch": "the node-test ground truth: tests and bench only",
    "backend/generate/library.py::genai_folder": "staged beside its target in the data folder",
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


def _holder(script: str, *args: str) -> subprocess.Popen:
    """A Python process running `script`, which prints one line once it holds what it holds."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )


OWNER_SCRIPT = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from backend.launch.folders import owned_folder\n"
    "with owned_folder('variant', under=Path(sys.argv[1])) as folder:\n"
    "    (folder / 'model.onnx').write_bytes(b'weights')\n"
    "    print(folder, flush=True)\n"
    "    time.sleep(300)\n"
)


def test_a_folder_whose_owner_was_killed_goes_with_the_next_folder_made_beside_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data" / "tmp"  # a root of its own: the data folder's, not /tmp's
    owner = _holder(OWNER_SCRIPT, str(root))
    try:
        folder = Path(owner.stdout.readline().strip())
        with owned_folder(under=root) as mine:  # a live owner's folder stays
            assert folder.is_dir() and mine.is_dir()
    finally:
        owner.kill()  # SIGKILL: no cleanup of its own
        owner.wait()
    assert (folder / "model.onnx").exists()
    with owned_folder(under=root):
        assert not folder.exists() and not (root / f"{folder.name}.owner").exists()
    assert list(root.iterdir()) == []  # and each folder goes with its lock file


def test_a_live_owner_in_another_pid_namespace_keeps_its_folder(tmp_path: Path) -> None:
    """The worker and dashboard containers of one pod share the data folder, not their pids:
    a folder named with a pid that is gone here is kept while anyone holds its lock."""
    root = tmp_path / "tmp"
    root.mkdir()
    folder = root / f"{FOLDER_PREFIX}{ended_pid()}-ingest-abc"
    folder.mkdir()
    lock = root / f"{folder.name}.owner"
    lock.touch()
    holder = _holder(
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(300)\n",
        str(lock),
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with owned_folder(under=root):
            assert folder.is_dir()  # its pid is gone from here, its owner is not
    finally:
        holder.kill()
        holder.wait()
    with owned_folder(under=root):
        assert not folder.exists() and not lock.exists()


def test_a_file_a_killed_writer_left_half_written_goes_when_the_next_is_made_beside_it(
    tmp_path: Path,
) -> None:
    """A cluster node's model cache: a task killed mid-copy left its .incoming- file for good."""
    writer = _holder(
        "import sys, time\n"
        "from pathlib import Path\n"
        "from backend.launch.folders import owned_file\n"
        "with owned_file(Path(sys.argv[1]), '.incoming-') as (out, path):\n"
        "    out.write(b'half a model')\n"
        "    out.flush()\n"
        "    print(path, flush=True)\n"
        "    time.sleep(300)\n",
        str(tmp_path),
    )
    try:
        half = Path(writer.stdout.readline().strip())
        with owned_file(tmp_path, ".incoming-") as (_, mine):
            assert half.read_bytes() == b"half a model"  # its writer lives: kept
            assert mine.exists()
    finally:
        writer.kill()
        writer.wait()
    assert half.exists() and not mine.exists()  # the writer's stays; this one was not renamed
    with owned_file(tmp_path, ".incoming-") as (out, path):
        assert not half.exists()
        out.write(b"a whole model")
        out.flush()
        path.replace(tmp_path / "model")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_file_a_child_names_is_taken_only_from_inside_its_folder(tmp_path: Path) -> None:
    """What the worker copies, reads and deletes after a child names it (launch/folders.py)."""
    folder, elsewhere = tmp_path / "out", tmp_path / "data"
    folder.mkdir()
    elsewhere.mkdir()
    made, secret = folder / "model.onnx", elsewhere / "link_secret"
    made.write_bytes(b"graph")
    secret.write_bytes(b"key")
    (folder / "link").symlink_to(secret)
    (folder / "sub").mkdir()

    assert file_inside(folder, str(made)) == made.resolve()
    assert file_inside(folder, str(folder / "sub" / ".." / "model.onnx")) == made.resolve()
    for named in (str(secret), str(folder / "link"), str(folder / ".." / "data" / "link_secret"),
                  str(folder / "sub"), str(folder / "missing"), "", None, 7):  # fmt: skip
        assert file_inside(folder, named) is None, named
