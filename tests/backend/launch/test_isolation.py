"""What guards a host's children, as its worker registers it (backend/launch/isolation.py): all
of it here, and each missing guard named on a host that has less (the sandbox itself is such a
host, for real: no bubblewrap can start in it and it shows no cgroup hierarchy)."""

from __future__ import annotations

import os

from backend.launch import isolation, landlock
from tests.backend.launch.sandboxed import in_sandbox


def test_this_host_holds_every_guard() -> None:
    here = isolation.this_host()

    assert (here.sandboxed, here.user_namespaces_forbidden, here.syscall_filter) == (True,) * 3
    cap = "pids cgroup" if os.geteuid() == 0 else here.process_cap  # CI runs as root
    assert here.process_cap == cap and cap in {"pids cgroup", "RLIMIT_NPROC"}
    assert here.summary() == (
        "bubblewrap sandbox; no capabilities; no user namespaces; seccomp filter; "
        f"processes capped by {cap}"
    )
    assert here.summary() == here.to_dict()["summary"] and here.complete()


def test_a_host_with_less_names_each_missing_guard() -> None:
    seen = in_sandbox("isolation_here")

    assert seen["sandboxed"] is False and seen["why_not_sandboxed"] and not seen["complete"]
    assert str(seen["summary"]).startswith("NOT SANDBOXED (the bubblewrap sandbox")
    assert "; seccomp filter;" in str(seen["summary"])
    # what confines an upload's parse child there instead: Landlock, where the kernel has it
    said = f"; uploads parsed under Landlock ABI {landlock.abi()}, no capabilities;"
    assert said in str(seen["summary"]) if landlock.abi() else "NO LANDLOCK" in seen["summary"]
    if os.geteuid() == 0:  # root without a pids cgroup caps nothing: said in capitals
        assert seen["process_cap"] == "none"
        assert str(seen["summary"]).endswith("PROCESSES NOT CAPPED (root without a pids cgroup)")
