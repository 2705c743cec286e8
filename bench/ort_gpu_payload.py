"""onnxruntime-gpu for an H200 host without network, in ONE device call's 64 MiB carry.

The 1.31.1 wheel is 256 MB; its libonnxruntime_providers_cuda.so (284 MB) is mostly a CUDA fatbin
with cubins for sm_75, 80, 86, 89, 90 and 120 (no PTX), and xz leaves 186 MB of it. An H200 (sm_90)
loads only the sm_90 cubins (SASS runs only on its own major version), so this zeroes the payload
of every other ELF entry in place (entry headers kept, so the fatbin still parses) and xz squeezes
the zeros away: 51.6 MB, plus 9.3 MB for the rest of the package without libonnxruntime.so (the
Python module does not load it). Used for issue 21's H200 runs (bench/results/h200_gpu_depth.txt).

  python bench/ort_gpu_payload.py WHEEL OUTDIR      (then carry OUTDIR, ~61 MB, with the wheels
                                                   the code needs: onnxconverter-common, onnxslim)
On the device:
  xz -dc OUTDIR/ort_rest.tar.xz | tar x -C /tmp/site
  xz -dc OUTDIR/libonnxruntime_providers_cuda.so.xz \
      > /tmp/site/onnxruntime/capi/libonnxruntime_providers_cuda.so
  export PYTHONPATH=/tmp/site
"""

from __future__ import annotations

import argparse
import struct
import subprocess
import tarfile
import zipfile
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
ELF_KIND = 2
KEEP_SM = 90
CUDA_LIB = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
DROPPED = ("onnxruntime/capi/libonnxruntime.so",)  # the C API library, unused from Python


def fatbin_section(path: Path) -> tuple[int, int]:
    """File offset and size of .nv_fatbin, read with readelf."""
    listing = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True)
    for line in listing.stdout.splitlines():
        if ".nv_fatbin" in line:
            fields = line.split("]", 1)[1].split()
            return int(fields[3], 16), int(fields[4], 16)
    raise SystemExit(f"{path} has no .nv_fatbin section")


def keep_only_sm(data: bytearray, offset: int, size: int, keep: int = KEEP_SM) -> dict[str, int]:
    """Zero the payload of every ELF entry whose sm is not `keep`; bytes per (kind, sm)."""
    seen: dict[str, int] = {}
    position, end = offset, offset + size
    while position < end:
        magic, _, header, fat_size = struct.unpack_from("<IHHQ", data, position)
        if magic != FATBIN_MAGIC:
            position += 8
            continue
        entry, container_end = position + header, position + header + fat_size
        while entry < container_end:
            kind, _, entry_header, padded = struct.unpack_from("<HHII", data, entry)
            sm = struct.unpack_from("<I", data, entry + 28)[0]
            label = f"{'elf' if kind == ELF_KIND else 'ptx' if kind == 1 else kind} sm_{sm}"
            seen[label] = seen.get(label, 0) + padded
            if kind == ELF_KIND and sm != keep:
                start = entry + entry_header
                data[start : start + padded] = bytes(padded)
            entry += entry_header + padded
        position = container_end
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    unpacked = args.out / "unpacked"
    with zipfile.ZipFile(args.wheel) as wheel:
        wheel.extractall(unpacked)
    library = unpacked / CUDA_LIB
    data = bytearray(library.read_bytes())
    offset, size = fatbin_section(library)
    for label, count in sorted(keep_only_sm(data, offset, size).items()):
        print(f"{label}: {count / 1e6:.1f} MB{'' if label.endswith(str(KEEP_SM)) else ' zeroed'}")
    pruned = args.out / "libonnxruntime_providers_cuda.so"
    pruned.write_bytes(bytes(data))
    with tarfile.open(args.out / "ort_rest.tar", "w") as rest:
        for path in sorted(unpacked.rglob("*")):
            name = path.relative_to(unpacked).as_posix()
            if path.is_file() and name != CUDA_LIB and not name.startswith(DROPPED):
                rest.add(path, name)
    for path in (pruned, args.out / "ort_rest.tar"):
        subprocess.run(["xz", "-T2", "-9", "-f", str(path)], check=True)
    for path in sorted(args.out.glob("*.xz")):
        print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
