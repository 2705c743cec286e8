"""The commands and measurement figures in README.md and docs/ are the code's.

Every `python -m backend.cli ...` (or `optiboard ...`) and `python -m backend.queue.worker ...`
line in a code block is parsed by the real argument parser, so a renamed command, a dropped flag
or a choice that is gone fails here; every command the parser has is shown at least once. In a
line, `a | b` and `x y / z` list alternatives (`jobs | show 3`, `users list / remove NAME`): each
continues from the words before the first alternative's last one. `[--flag]` marks an optional
flag and is parsed as the flag. docs/measurement.md's preset table is MEASURE_PRESETS.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

from backend.cli import build_parser
from backend.measure_settings import DEFAULT_MIN_COSINE, MEASURE_PRESETS
from backend.queue.worker_args import add_worker_arguments
from tests.test_docs import README, doc_pages, section

MEASUREMENT_PAGE = Path(__file__).resolve().parents[1] / "docs" / "measurement.md"
PROGRAMS = {"backend.cli": "optiboard", "backend.queue.worker": "worker"}
INVOCATION = re.compile(r"(^|\s)(optiboard\s|\S*python\S* -m backend\.)")
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def code_lines(text: str) -> list[str]:
    """Lines of the fenced code blocks, with backslash continuations joined."""
    lines: list[str] = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            lines.append(line)
    return lines


def commands(text: str) -> list[tuple[str, list[str]]]:
    """(program, arguments) of every documented invocation, one per alternative."""
    found = []
    for line in code_lines(text):
        line = re.sub(r"(^|\s)#.*$", "", line)  # a shell comment; may hold an apostrophe
        if not INVOCATION.search(line):
            continue  # a tree, a TOML block, another program
        words = [w.strip("[]") for w in shlex.split(line)]
        if words[:1] == ["optiboard"]:
            program, rest = "optiboard", words[1:]
        elif "-m" in words and words.index("-m") + 1 < len(words):
            module = words[words.index("-m") + 1]
            if module not in PROGRAMS:
                continue
            program, rest = PROGRAMS[module], words[words.index("-m") + 2 :]
        else:
            continue
        alternatives = [[]]
        for word in rest:
            if word in {"|", "/"}:
                alternatives.append([])
            else:
                alternatives[-1].append(word)
        lead = alternatives[0][:-1]
        found.append((program, alternatives[0]))
        found.extend((program, lead + alt) for alt in alternatives[1:])
    return found


def exact(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser and its subcommands' without prefix matching: a doc's `--batch-size` must not
    pass for `--batch-sizes`, as the flag a reader copies should be the one the code declares."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                exact(child)
    return parser


def parsers() -> dict[str, argparse.ArgumentParser]:
    worker = argparse.ArgumentParser(prog="optiboard-worker")
    add_worker_arguments(worker)  # what backend.queue.worker.main builds
    return {"optiboard": exact(build_parser()), "worker": exact(worker)}


def refusal(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """argparse's complaint about argv, or None when it parses."""
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        try:
            parser.parse_args(argv)
        except SystemExit:
            return errors.getvalue().strip().splitlines()[-1]
    return None


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple]:
    """Every runnable command: ('run',), ('serve', 'load'), ..."""
    paths = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                below = command_paths(child, (*prefix, name))
                paths |= below or {(*prefix, name)}
    return paths


def documented() -> list[tuple[str, str, list[str]]]:
    """(page, program, arguments) over README.md and every docs/ page."""
    return [
        (page.name, program, argv)
        for page in [README, *doc_pages()]
        for program, argv in commands(page.read_text())
    ]


def test_every_documented_command_line_parses() -> None:
    known = parsers()
    wrong = [
        f"{page}: {program} {' '.join(argv)}: {problem}"
        for page, program, argv in documented()
        if (problem := refusal(known[program], argv))
    ]
    assert len(documented()) > 20, "the command extraction found almost nothing"
    assert not wrong, "documented commands the parser refuses:\n" + "\n".join(wrong)


def test_every_command_is_documented() -> None:
    shown = {tuple(argv[:2]) for _, program, argv in documented() if program == "optiboard"}
    shown |= {tuple(argv[:1]) for _, program, argv in documented() if program == "optiboard"}
    missing = sorted(" ".join(p) for p in command_paths(build_parser()) if p not in shown)
    assert not missing, f"show these commands in docs/cli.md: {', '.join(missing)}"


def test_command_extraction_and_refusals() -> None:
    """The extraction rules on a small page, and a wrong flag refused, so neither passes blindly."""
    page = (
        "```bash\n"
        "python -m backend.cli jobs | show 3 --log   # a comment --not-a-flag\n"
        "optiboard users list / remove NAME\n"
        ".venv/bin/python -m backend.cli run 1 --timing end_to_end \\\n    --nhwc\n"
        "python -m backend.queue.worker [--once]\n"
        "python -m backend.cluster nodes\n"
        "```\n"
        "python -m backend.cli outside a block\n"
    )
    assert commands(page) == [
        ("optiboard", ["jobs"]),
        ("optiboard", ["show", "3", "--log"]),
        ("optiboard", ["users", "list"]),
        ("optiboard", ["users", "remove", "NAME"]),
        ("optiboard", ["run", "1", "--timing", "end_to_end", "--nhwc"]),
        ("worker", ["--once"]),
    ]
    known = parsers()
    assert refusal(known["optiboard"], ["run", "1", "--no-such-flag"])
    assert refusal(known["optiboard"], ["run", "1", "--batch-size", "8"])  # a prefix of a flag
    assert refusal(known["optiboard"], ["compat", "1", "--format", "yaml"])
    assert refusal(known["optiboard"], ["no-such-command"])
    assert refusal(known["worker"], ["--lease-seconds", "soon"])
    assert refusal(known["optiboard"], ["show", "3", "--log"]) is None


def preset_rows() -> dict[str, list[str]]:
    """docs/measurement.md's preset table: preset name -> its cells."""
    rows = {}
    for line in section(MEASUREMENT_PAGE, "Stability").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and cells[0] not in {"preset", "---"}:
            rows[cells[0]] = cells[1:]
    return rows


def test_measurement_presets_are_the_code_s() -> None:
    expected = {
        name: [
            f"{p.warmup_runs}",
            f"{p.window_runs}",
            f"{p.window_min_seconds:g}",
            f"{p.stable_windows}",
            f"{p.stability_tolerance:.0%}",
            f"{p.max_seconds:g}",
            f"{p.accuracy_samples}",
        ]
        for name, p in MEASURE_PRESETS.items()
    }
    assert preset_rows() == expected, "docs/measurement.md's preset table differs from the code"
    standard = MEASURE_PRESETS["standard"]
    stability = " ".join(section(MEASUREMENT_PAGE, "Stability").split())
    rule = f"last {NUMBER_WORDS[standard.stable_windows]} window medians agree within "
    assert rule + f"{standard.stability_tolerance:.0%}" in stability
    accuracy = " ".join(section(MEASUREMENT_PAGE, "Accuracy and wrong outputs").split())
    assert f"{DEFAULT_MIN_COSINE:g} by default" in accuracy
