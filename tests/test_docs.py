"""README.md and docs/ are checked against the code: the settings table, the layout tree, the
README's length and its links to every page under docs/.

Layout rule: in the code block of docs/layout.md, each line starts with the names it describes
(tokens ending in `/` for a folder or `.py` for a module), indented two spaces per level under the
folder they belong to; the description follows, and a line indented deeper than that continues
the description. Every name must exist, and every folder holding Python files under backend/,
storage/ and pages/, plus every module directly in backend/ and storage/, must be named.

Links: a relative link in README.md or a docs/ page must name an existing file (and, with
`#anchor`, one of its headings); README.md must link every docs/*.md page. The README's
screenshot is a committed PNG the browser test also writes, fresh, under test-artifacts/.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SETTINGS_PAGE = DOCS / "settings.md"
LAYOUT_PAGE = DOCS / "layout.md"
README_MAX_LINES = 200
DOCUMENTED_ROOTS = ("backend", "storage", "pages")
NAME = re.compile(r"^[\w.-]+(/[\w.-]+)*(/|\.py)$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
SCREENSHOT = "docs/images/compare.png"  # a copy of the browser test's e2e-3-compare.png


def doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def section(page: Path, title: str) -> str:
    """The text under a `## title` heading of a page, up to the next `## ` heading."""
    text = page.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"{page.relative_to(ROOT)} has no '## {title}' section"
    return match.group(1)


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to '-'."""
    anchors = set()
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # a shell comment is no heading
    for heading in re.findall(r"^#+ (.+)$", prose, re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return anchors


def relative_links(text: str) -> list[str]:
    """Link targets that point into this repository (not web addresses, not in-page anchors)."""
    return [
        target
        for target in LINK.findall(text)
        if not re.match(r"^[a-z]+:", target) and not target.startswith("#")
    ]


def broken_links(page: Path) -> list[str]:
    """The relative links of a page that name no file, or no heading of the file they name."""
    broken = []
    for target in relative_links(page.read_text()):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve()
        if not linked.is_file():
            broken.append(f"{target} (no such file)")
        elif anchor and anchor not in heading_anchors(linked.read_text()):
            broken.append(f"{target} (no heading #{anchor} in {path})")
    return broken


def documented_settings_table() -> str:
    """The table lines of docs/settings.md (the page holds that one table)."""
    lines = SETTINGS_PAGE.read_text().splitlines()
    return "".join(line + "\n" for line in lines if line.startswith("|"))


def layout_names() -> set[str]:
    """Paths named in docs/layout.md's tree."""
    block = re.search(r"^```\n(.*?)^```", LAYOUT_PAGE.read_text(), re.S | re.M)
    assert block, "docs/layout.md has no plain code block holding the tree"
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


def test_docs_settings_table_is_the_generated_one() -> None:
    assert documented_settings_table() == settings.settings_table(), (
        "docs/settings.md's table differs from settings.py: replace it with the output of "
        "`.venv/bin/python settings.py`"
    )


def test_layout_page_names_every_package_and_nothing_that_is_gone() -> None:
    named = layout_names()
    missing = sorted(required_names() - named)
    gone = sorted(n for n in named if not (ROOT / n.rstrip("/")).exists())
    wrong_kind = sorted(n for n in named if n.endswith("/") and (ROOT / n).is_file())
    problems = []
    if missing:
        problems.append(
            "add to the tree in docs/layout.md (a line under its folder, two spaces deeper): "
            + ", ".join(missing)
        )
    if gone:
        problems.append("remove from the tree in docs/layout.md (no such path): " + ", ".join(gone))
    if wrong_kind:
        problems.append("these are files, drop the trailing '/': " + ", ".join(wrong_kind))
    assert not problems, "\n".join(problems)


def test_layout_parser_follows_indentation() -> None:
    """The rule docs/layout.md follows, checked on a small tree so a parser slip cannot pass."""
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


def test_readme_stays_under_200_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines < README_MAX_LINES, (
        f"README.md has {lines} lines; keep it under {README_MAX_LINES} and move detail to a page "
        "under docs/ (linked from the README's Documentation list)"
    )


def test_readme_links_every_docs_page() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for target in relative_links(README.read_text())
        if target.startswith("docs/")
    }
    unlinked = [p.name for p in doc_pages() if p.resolve() not in linked]
    assert doc_pages(), "docs/ holds no pages"
    assert not unlinked, f"link these from README.md's Documentation list: {', '.join(unlinked)}"


def test_every_relative_link_resolves() -> None:
    problems = {
        page.relative_to(ROOT).as_posix(): broken
        for page in [README, *doc_pages()]
        if (broken := broken_links(page))
    }
    assert not problems, f"links that lead nowhere: {problems}"


def test_readme_shows_a_committed_screenshot_the_browser_test_takes() -> None:
    """A reader of the repository sees it without running anything (an ignored file under
    test-artifacts/ showed as a broken image); the browser test takes the same view each run."""
    assert SCREENSHOT in relative_links(README.read_text()), "README.md shows no screenshot"
    tracked = subprocess.run(
        ["git", "ls-files", "--error-unmatch", SCREENSHOT], cwd=ROOT, capture_output=True
    )
    assert tracked.returncode == 0, f"{SCREENSHOT} is not committed"
    assert (ROOT / SCREENSHOT).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    browser_test = (ROOT / "tests" / "e2e" / "test_browser.py").read_text()
    assert 'ARTIFACTS / "e2e-3-compare.png"' in browser_test


def test_link_checks_catch_what_they_claim(tmp_path: Path) -> None:
    """The link rules, on a small page, so a regex slip cannot pass every link."""
    text = (
        "[a](other.md) [b](other.md#the-part) [c](other.md#nothing) [d](gone.md)\n"
        "![img](pic.png) [web](https://example.com) [here](#local)\n"
    )
    assert relative_links(text) == [
        "other.md", "other.md#the-part", "other.md#nothing", "gone.md", "pic.png"
    ]  # fmt: skip
    headings = "# Title\n## The part\n```bash\n# a comment\n```\n### Child limits (root)\n"
    assert heading_anchors(headings) == {
        "title", "the-part", "child-limits-root"
    }  # fmt: skip
    (tmp_path / "other.md").write_text("# Other\n## The part\n")
    (tmp_path / "pic.png").write_bytes(b"")
    page = tmp_path / "page.md"
    page.write_text(text)
    assert broken_links(page) == [
        "other.md#nothing (no heading #nothing in other.md)", "gone.md (no such file)"
    ]  # fmt: skip
