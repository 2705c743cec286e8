"""What guards this host's children, as a worker registers it and the Home page shows it.

Each guard that can be missing on some hosts (the sandbox, its user-namespace block, the seccomp
filter, the process cap) is stated here, so a host that runs with less says so where the team
looks, not only in the worker's log.
"""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass
from typing import Any

from backend.launch import landlock, pids, sandbox, syscalls


@dataclass(frozen=True)
class Isolation:
    sandboxed: bool
    why_not_sandboxed: str  # the sandbox's own reason; "" when it works
    user_namespaces_forbidden: bool
    syscall_filter: bool
    process_cap: str  # "pids cgroup", "RLIMIT_NPROC" or "none"
    landlock_abi: int = 0  # what confines a child that reads an upload where no sandbox works

    def complete(self) -> bool:
        """Every guard holds."""
        return (
            self.sandboxed
            and self.user_namespaces_forbidden
            and self.syscall_filter
            and self.process_cap != "none"
        )

    def summary(self) -> str:
        """One line: each guard in turn, a missing one in capitals."""
        if self.sandboxed:
            held = ["bubblewrap sandbox", "no capabilities"]
            held += (
                ["no user namespaces"]
                if self.user_namespaces_forbidden
                else ["USER NAMESPACES ALLOWED (this bubblewrap cannot forbid them here)"]
            )
        else:
            held = [f"NOT SANDBOXED ({self.why_not_sandboxed})"]
            held += (
                [f"uploads parsed under Landlock ABI {self.landlock_abi}, no capabilities"]
                if self.landlock_abi
                else ["NO LANDLOCK EITHER (an upload's parse child sees what the service sees)"]
            )
        held += ["seccomp filter"] if self.syscall_filter else ["NO SECCOMP FILTER"]
        if self.process_cap == "none":
            held.append("PROCESSES NOT CAPPED (root without a pids cgroup)")
        else:
            held.append(f"processes capped by {self.process_cap}")
        return "; ".join(held)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "summary": self.summary(), "complete": self.complete()}


def this_host() -> Isolation:
    state = sandbox.available()
    return Isolation(
        sandboxed=state.ok,
        why_not_sandboxed=state.reason,
        user_namespaces_forbidden=state.ok and sandbox.forbids_user_namespaces(state.binary),
        syscall_filter=platform.machine() in syscalls.TABLES,
        process_cap=pids.process_cap(),
        landlock_abi=landlock.abi(),
    )
