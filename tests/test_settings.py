"""Every OPTIBOARD_* variable is declared once in settings.py and read through it, at call time."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import settings
from backend.models.ingest import max_upload_bytes
from backend.models.safezip import ZipLimits
from backend.models.tfconvert import default_timeout_s
from backend.queue.worker import JobRunner

ROOT = Path(__file__).resolve().parents[1]
SCANNED = (
    "app.py",
    "pages",
    "backend",
    "storage",
    "bench",
)  # tests/ set variables with monkeypatch
IMPORT_TIME_CHECKED = ("backend", "storage")  # pages and app.py are scripts, rerun per view
MENTIONED_IN = ("app.py", "pages", "backend", "storage", "bench", "scripts", "README.md",
                "docs", "Dockerfile", ".streamlit/config.toml")  # fmt: skip
ENV_READERS = {"os.getenv", "getenv", "os.environ.get", "environ.get", "os.environ.pop",
               "os.environ.setdefault", "os.putenv"}  # fmt: skip


def python_files(*roots: str) -> Iterator[Path]:
    for root in roots:
        path = ROOT / root
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        yield from (f for f in files if "__pycache__" not in f.parts)


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def _optiboard_key(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if node.value.startswith("OPTIBOARD_"):
            return node.value
    return None


def environment_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, variable) of each os.environ read of an OPTIBOARD_* key, and of each bare key."""
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and dotted(node.func) in ENV_READERS and node.args:
            key = _optiboard_key(node.args[0])
        elif isinstance(node, ast.Subscript) and dotted(node.value) in {"os.environ", "environ"}:
            key = _optiboard_key(node.slice)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # a bare variable name is a key on its way to some reader (a helper, a child's env);
            # names inside messages ("raise OPTIBOARD_X") are fine
            key = node.value if re.fullmatch(r"OPTIBOARD_[A-Z0-9_]+", node.value) else None
        if key:
            found.append((node.lineno, key))
    return sorted(set(found))


def import_time_calls(tree: ast.Module, names: set[str]) -> list[tuple[int, str]]:
    """Calls of `names` that run when the module is imported (not inside a function body)."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            parts = [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]
            for part in filter(None, parts):
                visit(part)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Call) and dotted(node.func).split(".")[0] in names:
            found.append((node.lineno, dotted(node.func)))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def names_from_settings(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name == "settings"}
        elif isinstance(node, ast.ImportFrom) and node.module == "settings" and not node.level:
            names |= {a.asname or a.name for a in node.names}
    return names


def test_optiboard_variables_are_read_only_in_settings_py() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} reads {name}"
        for path in python_files(*SCANNED)
        for line, name in environment_reads(ast.parse(path.read_text()))
    ]
    assert not offenders, (
        "read these through settings.py (declare a Setting there if it is new): "
        + "; ".join(offenders)
    )


def test_backend_and_storage_read_settings_when_called_not_when_imported() -> None:
    offenders = []
    for path in python_files(*IMPORT_TIME_CHECKED):
        tree = ast.parse(path.read_text())
        names = names_from_settings(tree)
        offenders += [
            f"{path.relative_to(ROOT)}:{line} calls {call}() at import time"
            for line, call in import_time_calls(tree, names)
        ]
    assert not offenders, "move these reads into the function that uses them: " + "; ".join(
        offenders
    )


def test_every_optiboard_variable_mentioned_is_declared() -> None:
    mentioned: dict[str, set[str]] = {}
    for root in MENTIONED_IN:
        path = ROOT / root
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
        for file in files:
            if "__pycache__" in file.parts:
                continue
            # bytes: docs/ holds a screenshot beside the text
            for name in re.findall(rb"OPTIBOARD_[A-Z0-9_]*[A-Z0-9]", file.read_bytes()):
                mentioned.setdefault(name.decode(), set()).add(str(file.relative_to(ROOT)))
    undeclared = {n: sorted(f) for n, f in mentioned.items() if n not in settings.SETTINGS}
    assert not undeclared, f"declare these in settings.py with _declare(Setting(...)): {undeclared}"


def test_the_scan_finds_direct_reads() -> None:
    """The checks above would catch the shapes of read the project used to have."""
    source = (
        'import os\nA = os.environ.get("OPTIBOARD_A", "1")\nB = os.getenv("OPTIBOARD_B")\n'
        'C = os.environ["OPTIBOARD_C"]\nD = dict(os.environ)\nE = os.environ.get("HOME")\n'
        'F = _env_int("OPTIBOARD_F", 10)\nG = "raise OPTIBOARD_G to allow more"\n'
    )
    assert environment_reads(ast.parse(source)) == [
        (2, "OPTIBOARD_A"),
        (3, "OPTIBOARD_B"),
        (4, "OPTIBOARD_C"),
        (7, "OPTIBOARD_F"),
    ]
    module = ast.parse(
        "import settings\nfrom settings import data_dir\nLIMIT = settings.PORT.get()\n"
        "def f(x=data_dir()):\n    return settings.PORT.get()\n"
        "class Limits:\n    cap = settings.PORT.get\n"
    )
    assert import_time_calls(module, names_from_settings(module)) == [
        (3, "settings.PORT.get"),
        (4, "data_dir"),
    ]


def test_every_setting_has_help_and_a_default_that_parses() -> None:
    for setting in settings.SETTINGS.values():
        assert setting.name.startswith("OPTIBOARD_") and setting.help
        setting.parse(setting.default)


def test_changed_variables_are_seen_by_the_next_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPTIBOARD_MAX_UPLOAD_MB", "3")
    monkeypatch.setenv("OPTIBOARD_MAX_ZIP_MEMBERS", "7")
    monkeypatch.setenv("OPTIBOARD_MAX_UNCOMPRESSED_MB", "5")
    monkeypatch.setenv("OPTIBOARD_MAX_COMPRESSION_RATIO", "9.5")
    monkeypatch.setenv("OPTIBOARD_CONVERT_TIMEOUT_S", "12")
    monkeypatch.setenv("OPTIBOARD_LEASE_SECONDS", "4")
    monkeypatch.setenv("OPTIBOARD_DATA_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.delenv("OPTIBOARD_DATABASE_URL", raising=False)
    assert max_upload_bytes() == 3 << 20
    assert ZipLimits() == ZipLimits(max_members=7, max_total_bytes=5 << 20, max_ratio=9.5)
    assert default_timeout_s() == 12.0
    assert JobRunner("w").lease_seconds == 4.0
    assert settings.database_url() == f"sqlite:///{tmp_path / 'elsewhere' / 'optiboard.db'}"
    monkeypatch.setenv("OPTIBOARD_DATABASE_URL", "postgresql+psycopg://db/optiboard")
    assert settings.database_url() == "postgresql+psycopg://db/optiboard"


def test_set_changes_the_value_for_this_process_and_none_restores_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPTIBOARD_PORT", raising=False)
    settings.PORT.set("9000")
    try:
        assert settings.PORT.get() == 9000
    finally:
        settings.PORT.set(None)
    assert settings.PORT.get() == 8501


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("OPTIBOARD_LEASE_SECONDS", "abc", "is not a number"),
        ("OPTIBOARD_MAX_UPLOAD_MB", "1.5", "is not a whole number"),
        ("OPTIBOARD_MAX_UPLOAD_MB", "0", "is out of range: it takes 1 or more"),
        ("OPTIBOARD_LEASE_SECONDS", "0", "is out of range: it takes a number above 0"),
        ("OPTIBOARD_AUTH", "maybe", "does not read (OPTIBOARD_AUTH takes on or off, not 'maybe')"),
    ],
)
def test_a_setting_that_does_not_read_is_one_sentence_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, problem: str
) -> None:
    """Until 2026-12-07 a mistyped setting was a bare ValueError ("could not convert string to
    float: 'abc'") from whatever read it first, naming no variable, and 0 or a negative went
    through (a lease of -5 s, an upload cap of 0 MB)."""
    monkeypatch.setenv(name, value)
    default = settings.SETTINGS[name].default
    said = (
        f"{name}={value!r} {problem}; set it again, or unset it for the default ({default}). "
        "docs/settings.md says what it is for."
    )
    with pytest.raises(settings.SettingError) as raised:
        settings.SETTINGS[name].get()
    assert str(raised.value) == said
    assert settings.problems() == [said]


def test_every_number_has_its_least_value_and_the_cli_and_check_stop_on_one_that_does_not_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    numbers = [s.name for s in settings.SETTINGS.values() if s.parse in (int, float)]
    assert numbers and all(settings.SETTINGS[n].minimum is not None for n in numbers)
    monkeypatch.setenv("OPTIBOARD_RAY_GIVE_UP_S", "0")  # its help: 0 waits until cancelled
    assert settings.RAY_GIVE_UP_S.get() == 0 and settings.problems() == []
    monkeypatch.delenv("OPTIBOARD_RAY_GIVE_UP_S")
    env = {**os.environ, "OPTIBOARD_DATA_DIR": str(tmp_path), "OPTIBOARD_CHILD_PROCS": "x"}
    said = "error: OPTIBOARD_CHILD_PROCS='x' is not a whole number; set it again"
    for argv in (["-m", "settings", "check"], ["-m", "backend.cli", "jobs"]):
        done = subprocess.run(
            [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode in (1, 2) and done.stderr.startswith(said), done.stderr
        assert "Traceback" not in done.stderr
    assert not any(tmp_path.iterdir())  # the CLI stopped before it made its database
