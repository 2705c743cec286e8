"""What a sandboxed GPU child sees of RAPL's energy counters, on a host that has them.

The sandbox binds the whole /sys for a GPU child (the CUDA driver reads it) and, since 4e694f6,
mounts an empty read-only tmpfs over /sys/class/powercap and /sys/devices/virtual/powercap unless
the child measures (Binds.energy). The dev host has no powercap, so that branch never ran there.
This runs the product's own bwrap command line (sandbox.command) for a GPU child both ways and
prints, per child: the powercap zones it lists, whether it reads a package's energy_uj, the
NVIDIA device nodes it sees, and whether torch computes on the GPU (a matmul checked on the CPU).

  OPTIBOARD_BWRAP=/path/to/bwrap python3 bench/gpu_energy_binds.py
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

PROBE = r"""
import glob, json, os
zones = "/sys/class/powercap"
seen = {"zones": sorted(os.listdir(zones)) if os.path.isdir(zones) else None}
files = glob.glob("/sys/class/powercap/*/energy_uj")
try:
    seen["energy_uj"] = int(open(files[0]).read()) if files else None
except OSError as exc:
    seen["energy_uj"] = f"unreadable: {exc.strerror}"
seen["nvidia_nodes"] = sorted(glob.glob("/dev/nvidia*"))
try:
    import torch
    a = torch.randn(256, 256)
    on_gpu = (a.cuda() @ a.cuda()).cpu()
    seen["torch_cuda"] = bool(torch.allclose(on_gpu, a @ a, rtol=1e-3, atol=1e-3))
    seen["device"] = torch.cuda.get_device_name(0)
except Exception as exc:  # the finding is what failed, in one line
    seen["torch_cuda"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(seen))
"""


def host() -> dict:
    zones = Path("/sys/class/powercap")
    files = sorted(zones.glob("*/energy_uj")) if zones.is_dir() else []
    return {
        "powercap": sorted(p.name for p in zones.iterdir()) if zones.is_dir() else None,
        "energy_uj_files": len(files),
        "sandbox": sandbox.available().reason or "ok",
    }


def child(energy: bool) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        binds = sandbox.Binds(gpu=True, energy=energy)
        argv = sandbox.command([sys.executable, "-c", PROBE], Path(scratch), binds=binds)
        ran = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if ran.returncode != 0:
        return {"exit": ran.returncode, "stderr": ran.stderr[-1500:]}
    return json.loads(ran.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print("host", json.dumps(host()), flush=True)
    for energy in (False, True):
        print(f"gpu child, energy={energy}", json.dumps(child(energy)), flush=True)
