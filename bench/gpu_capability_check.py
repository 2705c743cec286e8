"""A CUDA child in the product's own sandbox command line (backend/launch/sandbox.command with
the GPU binds), with and without `--cap-drop ALL`, the read-only /proc/sys, `--disable-userns`
and the seccomp filter every child sets (backend/launch/syscalls.py), on a real GPU host: whether
CUDA and its profiler (CUPTI, as torch.profiler uses it) still run under them, whether a read-only
bind can be remounted writable, whether a kernel setting can be written, whether io_uring can be
set up and whether the child can make a user namespace of its own.

Each side runs one sandboxed child with the host interpreter (its torch): it reads its effective
capabilities, computes a sum on the GPU and checks it, then tries to remount a read-only bound
folder writable and write into it, as a child that took over its process would.

  OPTIBOARD_BWRAP=/path/to/bwrap python bench/gpu_capability_check.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.launch import sandbox  # noqa: E402

CHILD = r"""
import ctypes, errno, json, subprocess, sys
from pathlib import Path
folder, hardened = sys.argv[1], sys.argv[2] == "hardened"
if hardened:  # as limits.apply does in every child before it runs
    from backend.launch.syscalls import refuse_exploit_interfaces
    refuse_exploit_interfaces()
status = Path("/proc/self/status").read_text()
found = {"capabilities": next(l.split()[1] for l in status.splitlines() if l.startswith("CapEff"))}
try:
    import torch
    x = torch.ones(1 << 20, device="cuda")
    found["cuda"] = {"device": torch.cuda.get_device_name(), "sum": float(x.sum())}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        (x * 2).sum().item()
    found["cupti_kernels"] = sum(e.device_type.name == "CUDA" for e in prof.events())
except Exception as exc:
    found["cuda"] = f"{type(exc).__name__}: {exc}"
mount = subprocess.run(["mount", "-o", "remount,bind,rw", folder], capture_output=True, text=True)
found["remounted"] = mount.returncode == 0
try:
    (Path(folder) / "escaped").write_text("escaped")
    found["written"] = True
except OSError:
    found["written"] = False
setting = Path("/proc/sys/kernel/printk_ratelimit")  # its own value back: a no-op if it works
try:
    setting.write_text(setting.read_text())
    found["sysctl_written"] = True
except OSError:
    found["sysctl_written"] = False
libc = ctypes.CDLL(None, use_errno=True)
done = libc.syscall(ctypes.c_long(425), ctypes.c_long(1), ctypes.c_long(0))  # io_uring_setup
found["io_uring"] = "ok" if done >= 0 else errno.errorcode[ctypes.get_errno()]  # EFAULT: allowed
# in a fresh single-threaded process: unshare(CLONE_NEWUSER) is EINVAL in a threaded one (torch's)
probe = "import ctypes, errno; libc = ctypes.CDLL(None, use_errno=True); " \
    "print('made' if libc.unshare(0x10000000) == 0 else errno.errorcode[ctypes.get_errno()])"
found["user_namespace"] = subprocess.run(
    [sys.executable, "-c", probe], capture_output=True, text=True
).stdout.strip()
print(json.dumps(found))
"""


def run(hardened: bool) -> dict[str, object]:
    state = sandbox.available()
    assert state.ok, state.reason
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as bound:
        argv = sandbox.command(
            [sys.executable, "-c", CHILD, bound, "hardened" if hardened else "before"],
            Path(scratch),
            read_only=[Path(bound)],
            binary=state.binary,
            binds=sandbox.Binds(gpu=True),
        )
        if not hardened:  # as the sandbox was before the four fixes
            at = argv.index("--cap-drop")
            argv = argv[:at] + argv[at + 2 :]
            if "--disable-userns" in argv:
                at = argv.index("--unshare-user")
                argv = argv[:at] + argv[at + 2 :]
            for path in sandbox.PROC_READ_ONLY:
                at = argv.index("--ro-bind-try", argv.index(path) - 1)
                argv = argv[:at] + argv[at + 3 :]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        lines = done.stdout.strip().splitlines()
        found = json.loads(lines[-1]) if lines else {"error": done.stderr[-500:]}
        found["host_file_written"] = (Path(bound) / "escaped").exists()
        found["disable_userns"] = "--disable-userns" in argv
        return found


if __name__ == "__main__":
    for hardened in (True, False):
        print(json.dumps({"hardened": hardened, **run(hardened)}))
