"""What one `optiboard` call costs in CPU, this tree against an older commit (the CLI's imports).

Each verb runs in the two trees in alternation, pair by pair (the first of a pair alternates each
round, so machine noise and the page cache hit both alike), on one shared data directory holding
a small CNN and one finished sweep. The older commit is checked out as a detached worktree in a
temporary folder (removed at the end, with the data); both trees run the same interpreter, their
bytecode cached outside the trees (PYTHONPYCACHEPREFIX) as an installed CLI's would be. CPU is
user + system of the finished child and its waited-for children (resource.getrusage), so `run`
counts its configuration children too. For every verb but `run` it checks both trees printed the
same bytes and exited the same, so the cheaper side is not doing less.
Run: .venv/bin/python bench/cli_startup.py [rounds] [base commit, default: merge-base with main]
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import settings  # noqa: E402
from tests import models  # noqa: E402

VERBS = [["--help"], ["jobs"], ["models"], ["show", "1"], ["export", "1"], ["run", "1", "--quick"]]
SAME_OUTPUT = {"--help", "jobs", "models", "show", "export"}  # run measures: its numbers vary


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def timed(tree: Path, argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """CPU seconds (user + system) of one CLI call and its children, its exit code, its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "backend.cli", *argv], cwd=tree, env=env, capture_output=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.returncode, done.stdout.decode()


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    base = sys.argv[2] if len(sys.argv) > 2 else git("merge-base", "HEAD", "main").strip()
    work = Path(tempfile.mkdtemp(prefix="cli_startup."))
    old = work / "old"
    git("worktree", "add", "--detach", str(old), base)
    for ignored in (".venv", ".triton-venv", ".runtime-envs"):  # what set-up made here, untracked
        if (ROOT / ignored).exists() and not (old / ignored).exists():
            (old / ignored).symlink_to((ROOT / ignored).resolve())
    try:
        data = work / "data"
        data.mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {settings.DATA_DIR.name: str(data), "PYTHONPYCACHEPREFIX": str(work / "pycache")}
        models.save(models.make_cnn(), work / "cnn.onnx")
        for argv in (["add", str(work / "cnn.onnx")], ["run", "1", "--quick"]):
            command = [sys.executable, "-m", "backend.cli", *argv]
            subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=True)
        for argv in VERBS[:-1]:  # warm-up: bytecode cached and files in the page cache, both trees
            timed(old, argv, env)
            timed(ROOT, argv, env)
        cpu: dict[str, dict[str, list[float]]] = {v[0]: {"old": [], "new": []} for v in VERBS}
        differ: dict[str, int] = {}
        for r in range(rounds):
            for argv in VERBS:
                sides = [("old", old), ("new", ROOT)]
                got = {}
                for side, tree in sides if r % 2 == 0 else sides[::-1]:
                    seconds, code, out = timed(tree, argv, env)
                    cpu[argv[0]][side].append(seconds)
                    got[side] = (code, out)
                if argv[0] in SAME_OUTPUT and got["old"] != got["new"]:
                    differ[argv[0]] = differ.get(argv[0], 0) + 1
        print(f"base {base[:12]} ({git('log', '-1', '--format=%s', base).strip()[:60]})")
        print(f"this tree {git('rev-parse', 'HEAD').strip()[:12]}, {rounds} rounds, CPU = user+sys")
        print(f"{'verb':<10}{'before s':>10}{'after s':>10}{'after/before':>14}  same output")
        for verb, sides in cpu.items():
            ratios = [n / o for o, n in zip(sides["old"], sides["new"], strict=True)]
            same = "n/a (measures)" if verb not in SAME_OUTPUT else str(verb not in differ)
            print(
                f"{verb:<10}{statistics.median(sides['old']):>10.3f}"
                f"{statistics.median(sides['new']):>10.3f}"
                f"{statistics.median(ratios):>14.2f}  {same}"
            )
    finally:
        git("worktree", "remove", "--force", str(old))
        shutil.rmtree(work)  # the data directory and the cached bytecode


if __name__ == "__main__":
    main()
