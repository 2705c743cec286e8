"""The README is checked against the code: its settings table and its layout tree.

Layout rule: in the code block of the README's "Layout" section, each line starts with the names it
describes (tokens ending in `/` for a folder or `.py` for a module), indented two spaces per level
under the folder they belong to; the description follows, and a line indented deeper than that
continues the description. Every name must exist, and every folder holding Python files under
backend/, storage/ and pages/, plus every module directly in backend/ and storage/, must be named.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTED_ROOTS = ("backend", "storage", "pages")
NAME = re.compile(r"^[\w.-]+(/[\w.-]+)*(/|\.py)$")


def _section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def readme_settings_table() -> str:
    lines = _section("Settings (environment variables)").splitlines()
    return "".join(line + "\n" for line in lines if line.startswith("|"))


def layout_names() -> set[str]:
    """Paths named in the README's Layout tree."""
    block = re.search(r"^```\n(.*?)^```", _section("Layout"), re.S | re.M)
    assert block, "the README's Layout section has no code block"
    return parse_tree(block.group(1))


def parse_tree(block: str) -> set[str]:
    """Paths named in a layout tree: folders end in '/', modules in '.py'."""
    names: set[str] = set()
    parents: list[tuple[int, str]] = []  # (indent, folder path) of the enclosing folders
    last_indent = 0
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if indent > last_indent + 2 or not line.strip():
            continue  # a description continued from the line above
        leading = []
        for token in line.split():
            if not NAME.match(token):
                break
            leading.append(token)
        if not leading:
            continue
        last_indent = indent
        while parents and parents[-1][0] >= indent:
            parents.pop()
        prefix = parents[-1][1] if parents else ""
        for token in leading:
            names.add(prefix + token)
        if len(leading) == 1 and leading[0].endswith("/"):
            parents.append((indent, prefix + leading[0]))
    return names


def required_names() -> set[str]:
    """Every folder holding Python files under the documented roots, and their top-level modules."""
    required = set()
    for root in DOCUMENTED_ROOTS:
        required.add(f"{root}/")
        for module in (ROOT / root).rglob("*.py"):
            if "__pycache__" in module.parts:
                continue
            folder = module.parent.relative_to(ROOT).as_posix()
            required.add(f"{folder}/")
            if module.parent == ROOT / root and root != "pages" and module.name != "__init__.py":
                required.add(module.relative_to(ROOT).as_posix())
    return required


def test_python_settings_py_prints_the_table() -> None:
    done = subprocess.run(
        [sys.executable, "settings.py"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout == settings.settings_table()
    assert all(f"`{name}`" in done.stdout for name in settings.SETTINGS)


def test_readme_settings_table_is_the_generated_one() -> None:
    assert readme_settings_table() == settings.settings_table(), (
        "README.md's settings table differs from settings.py: replace it with the output of "
        "`.venv/bin/python settings.py`"
    )


def test_readme_layout_names_every_package_and_nothing_that_is_gone() -> None:
    named = layout_names()
    missing = sorted(required_names() - named)
    gone = sorted(n for n in named if not (ROOT / n.rstrip("/")).exists())
    wrong_kind = sorted(n for n in named if n.endswith("/") and (ROOT / n).is_file())
    problems = []
    if missing:
        problems.append(
            "add to the Layout tree in README.md (a line under its folder, two spaces deeper): "
            + ", ".join(missing)
        )
    if gone:
        problems.append(
            "remove from the Layout tree in README.md (no such path): " + ", ".join(gone)
        )
    if wrong_kind:
        problems.append("these are files, drop the trailing '/': " + ", ".join(wrong_kind))
    assert not problems, "\n".join(problems)


def test_layout_parser_follows_indentation() -> None:
    """The rule the README follows, checked on a small tree so a parser slip cannot pass."""
    tree = (
        "app.py        entry\n"
        "backend/      the domain, see storage/ too\n"
        "  cli.py  viewer.py   two modules on one line\n"
        "  models/     ingest, inspect\n"
        "              continued/ description.py\n"
        "    data/     files\n"
        "  engine/\n"
        "storage/repo/ aggregates\n"
        "  jobs.py     transitions\n"
    )
    assert parse_tree(tree) == {
        "app.py",
        "backend/",
        "backend/cli.py",
        "backend/viewer.py",
        "backend/models/",
        "backend/models/data/",
        "backend/engine/",
        "storage/repo/",
        "storage/repo/jobs.py",
    }
