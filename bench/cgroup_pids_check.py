"""Which process cap a child gets on this host, and whether it holds: a real fork bomb.

Prints the cgroup layout (v1 pids hierarchy or v2 with the pids controller), whether
backend.launch.pids could make a per-child cgroup, and the outcome of a 400-fork bomb run through
the launcher with OPTIBOARD_CHILD_PROCS=40. Needs only the standard library, so it runs on hosts
without the project's venv:
    python3 bench/cgroup_pids_check.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import settings  # noqa: E402
from backend.launch import pids  # noqa: E402
from backend.launch.children import run_in_child  # noqa: E402
from tests.backend.launch import probes  # noqa: E402


def main() -> int:
    os.environ[settings.CHILD_PROCS.name] = "40"  # the cap the launcher reads for each child
    mounts = subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True, text=True)
    print("uid", os.getuid(), "| /sys/fs/cgroup is", mounts.stdout.strip())
    controllers = pids.V2_ROOT / "cgroup.controllers"
    if controllers.exists():
        print("v2 controllers:", controllers.read_text().strip())
        print("v2 subtree_control:", (pids.V2_ROOT / "cgroup.subtree_control").read_text().strip())
    print("v1 pids hierarchy:", (pids.V1_ROOT / "tasks").exists())
    parent = pids._parent()
    print("per-child cgroups under:", parent or "none (RLIMIT_NPROC is the only process cap)")
    outcome = run_in_child(probes.fork_bomb, 400, timeout_s=60, what="The configuration")
    print("fork bomb (400 forks, cap 40):", "stopped" if not outcome.ok else "NOT stopped")
    print("  limit:", outcome.limit, "| error:", outcome.error)
    left = list(parent.glob(f"{pids.PREFIX}{os.getpid()}-*")) if parent else []
    print("cgroups left behind:", len(left))
    return 0 if not outcome.ok and outcome.limit == "procs" and not left else 1


if __name__ == "__main__":
    sys.exit(main())
