"""Every hostile builder of tests/hostile.py fed to the real upload paths (model ingest, and the
calibration and evaluation .npz stores of backend.queue.jobs), as the web process would; then the
cases of bench/hostile_web_cases.py against a real `streamlit run serve.py` on the same data
directory (upload flood), the Graph page's cost call, `serve export` and the pages themselves;
and the compatibility matrix of every upload that was stored.

For each input: the outcome (a clean rejection with its sentence, or an acceptance and why it is
harmless or not), seconds spent in the call, peak RSS growth of this process (the one calling
ingest, i.e. the dashboard) sampled every 2 ms, bytes this process wrote (/proc/self/io wchar,
scratch files included) and bytes left under the data directory afterwards.
Run: .venv/bin/python bench/hostile_inputs.py   (builds ~1.5 GB of transient test data)
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import settings  # noqa: E402
from backend.errors import UserError  # noqa: E402
from backend.models.ingest import ingest_file  # noqa: E402
from backend.queue import jobs  # noqa: E402
from bench.hostile_web_cases import web_cases  # noqa: E402
from tests import hostile, hostile_web  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1 << 20


def rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * PAGE


def wchar() -> int:
    with open("/proc/self/io") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("wchar:"))


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


@dataclass
class Row:
    name: str
    outcome: str
    seconds: float
    peak_mb: float
    wrote_mb: float
    left_mb: float


def measure(name: str, call: Callable[[], str], data: Path) -> Row:
    """Run `call` while a thread samples RSS; the call returns a note or raises UserError."""
    peak = [rss()]
    start_rss, start_w, start_left = peak[0], wchar(), tree_bytes(data)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.perf_counter()
    try:
        outcome = "accepted: " + call()
    except UserError as exc:
        outcome = f"rejected: {exc}"
    except Exception as exc:  # noqa: BLE001 - a crash is a finding, shown in the table
        outcome = f"CRASH {type(exc).__name__}: {str(exc)[:160]}"
    seconds = time.perf_counter() - began
    done.set()
    sampler.join()
    return Row(
        name,
        outcome,
        seconds,
        (peak[0] - start_rss) / MB,
        (wchar() - start_w) / MB,
        (tree_bytes(data) - start_left) / MB,
    )


def upload(path: Path, filename: str, note: str) -> Callable[[], str]:
    def call() -> str:
        row = ingest_file(path, filename)
        return f"stored as model {row.id}; {note}"

    return call


def _built_in_child(code: str, folder: Path, canary: Path, what: str, **env: str) -> bool:
    """Run `code` (python -c, argv: folder and canary) in a fresh interpreter, so the framework
    that builds the uploads never loads into this process; False, said, when it failed. The
    canary is reset afterwards: building may run the hostile code too, only loading counts."""
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(canary)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    if done.returncode != 0:
        print(f"{what} not built: {done.stderr.strip().splitlines()[-1:]}")
        return False
    canary.unlink(missing_ok=True)
    return True


def build_savedmodel(folder: Path, canary: Path) -> Path | None:
    """The hostile SavedModel, built in a child so TensorFlow never loads into this process."""
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, '.');"
        "from tests import models;"
        "d = models.save_hostile_savedmodel(Path(sys.argv[1]) / 'sm', Path(sys.argv[2]));"
        "models.zip_folder(d, Path(sys.argv[1]) / 'hostile_savedmodel.zip', top='sm')"
    )
    if not _built_in_child(code, folder, canary, "hostile SavedModel", TF_CPP_MIN_LOG_LEVEL="3"):
        return None
    return folder / "hostile_savedmodel.zip"


def cases(folder: Path, canary: Path) -> list[tuple[str, Callable[[], str]]]:
    rows: list[tuple[str, Callable[[], str]]] = []
    zips = {
        "overlapping entries (8000, 0.8 MB)": hostile.overlapping_zip,
        "huge directory (200k entries)": hostile.huge_directory_zip,
        "ZIP64 count lie (1 declared, 50k real)": hostile.zip64_count_lie_zip,
        "ZIP64 locator past the end": hostile.zip64_locator_lie_zip,
        "ZIP64 size lie (1 TiB declared)": hostile.zip64_size_lie_zip,
        "directory offset past the end": hostile.directory_offset_lie_zip,
        "60 KB entry names": hostile.long_names_zip,
        "zip bomb (64 MB of zeros)": hostile.zip_bomb,
        "path traversal ../../": hostile.traversal_zip,
        "absolute path": hostile.absolute_path_zip,
        "symlink entry -> /etc/passwd": hostile.symlink_zip,
        "external data ../../etc/passwd in a function": hostile.external_data_outside_zip,
    }
    for i, (name, build) in enumerate(zips.items()):
        path = build(folder / f"z{i}.zip")
        rows.append((name, upload(path, path.name, "UNEXPECTED")))
    for place, build in hostile.EXTERNAL_PLACES.items():
        path = hostile.save_model(build("weights.bin"), folder / f"ext_{len(rows)}.onnx")
        rows.append((f"external data in {place} (.onnx)", upload(path, "m.onnx", "UNEXPECTED")))
    for place, build in hostile.EXTERNAL_PLACES.items():
        path = hostile.zip_model_with_data(build("weights.bin"), folder / f"ext_{len(rows)}.zip")
        note = "weights taken into the stored file, which refers to nothing outside"
        rows.append((f"external data in {place} (.zip)", upload(path, "m.zip", note)))
    marker = hostile.save_model(
        hostile.external_in_function(hostile.ORT_MEMORY_MARKER), folder / "marker.onnx"
    )
    rows.append(("ORT memory marker in a function", upload(marker, "m.onnx", "UNEXPECTED")))
    bomb = hostile.constant_of_shape_bomb(folder / "cos.onnx")
    rows.append(
        (
            "ConstantOfShape bomb (400 GB)",
            upload(bomb, "cos.onnx", "nothing is folded at upload; the bomb is for the runner"),
        )
    )
    huge = hostile.huge_symbolic_dim_model(folder / "huge.onnx")
    rows.append(
        (
            "batch dim 10^9 (64 GB input)",
            upload(huge, "huge.onnx", "no input is allocated at upload"),
        )
    )
    rows += npz_cases(folder, canary)
    saved = build_savedmodel(folder, canary)
    if saved is not None:
        rows.append(("hostile SavedModel (initializer writes env)", with_canary(saved, canary)))
    rows += pytorch_cases(folder / "torch", canary)
    return rows


PYTORCH_ROWS = {
    "crafted.pt2": ".pt2, sample-inputs pickle runs os.system",
    "eval.pt2": ".pt2, size expression sympy would eval",
    "scripted.pt": "TorchScript .pt (torch.jit.save)",
    "module.pt": "pickled module .pt (torch.save)",
    "bomb.pt2": ".pt2 with a 64 MB zero member (zip bomb)",
    "cnn.pt2": "plain CNN .pt2 (dynamic batch), converted",
}


def pytorch_cases(folder: Path, canary: Path) -> list[tuple[str, Callable[[], str]]]:
    """The PyTorch uploads, built in a child so torch never loads into this process."""
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, '.');"
        "from tests import hostile;"
        "hostile.pytorch_uploads(Path(sys.argv[1]), Path(sys.argv[2]))"
    )
    if not _built_in_child(code, folder, canary, "PyTorch uploads"):
        return []
    return [(title, with_canary(folder / name, canary)) for name, title in PYTORCH_ROWS.items()]


def npz_cases(folder: Path, canary: Path) -> list[tuple[str, Callable[[], str]]]:
    """Calibration and evaluation uploads through the real store path (jobs.store_*), for a
    model whose input the arrays match, so every check down to the arrays is reached."""
    mid = ingest_file(hostile.image_model(folder / "image.onnx"), "image.onnx").id

    def store(kind: str, path: Path, note: str) -> Callable[[], str]:
        def call() -> str:
            try:
                if kind == "calibration":
                    sha = jobs.store_calibration(mid, path, path.name)
                else:
                    sha = jobs.store_evaluation(mid, path, path.name, calibration_sha256=calibrated)
            except UserError as exc:
                raise UserError(f"{exc} [{canary_state(canary)}]") from None
            return f"stored as {sha[:12]}; {note} [{canary_state(canary)}]"

        return call

    good = {"x": np.zeros((4, 1, 256, 256), np.float32)}
    calib = folder / "calib_ok.npz"
    np.savez(calib, **good)
    calibrated = hashlib.sha256(calib.read_bytes()).hexdigest()
    not_zip = folder / "not_a_zip.npz"
    not_zip.write_bytes(os.urandom(4096))
    labelled = folder / "eval_ok.npz"
    np.savez(labelled, labels=np.array([0, 0, 0, 0]), **good)
    bombs = {
        "labels_bomb.npz": dict(name="labels", shape=(100_000_000,), descr="<i8", extra=good),
        "eval_bomb.npz": dict(extra={"labels": np.zeros(2048, np.int64)}),
    }
    made = {n: hostile.calibration_npz_bomb(folder / n, **kw) for n, kw in bombs.items()}
    harmless = "checked in a limited child, arrays as declared"
    return [
        (
            "calibration .npz (0.5 MB -> 512 MiB)",
            store("calibration", hostile.calibration_npz_bomb(folder / "calib.npz"), "UNEXPECTED"),
        ),
        ("calibration .npz, plain 4 samples", store("calibration", calib, harmless)),
        (
            "evaluation .npz (0.5 MB -> 512 MiB)",
            store("evaluation", made["eval_bomb.npz"], "UNEXPECTED"),
        ),
        (
            "evaluation .npz, labels declare 800 MB",
            store("evaluation", made["labels_bomb.npz"], "UNEXPECTED"),
        ),
        (
            "evaluation .npz, pickled labels (canary)",
            store(
                "evaluation",
                hostile.pickled_labels_npz(folder / "pickled.npz", good, canary),
                "UNEXPECTED",
            ),
        ),
        ("evaluation .npz, 4 KB of random bytes", store("evaluation", not_zip, "UNEXPECTED")),
        ("evaluation .npz = the calibration file", store("evaluation", calib, "UNEXPECTED")),
        ("evaluation .npz, 4 samples with labels", store("evaluation", labelled, harmless)),
    ]


def canary_state(canary: Path) -> str:
    return "CANARY WRITTEN" if canary.exists() else "canary not written"


def with_canary(path: Path, canary: Path) -> Callable[[], str]:
    def verdict() -> str:
        return canary_state(canary)

    def call() -> str:
        try:
            row = ingest_file(path, path.name)
        except UserError as exc:
            raise UserError(f"{exc} [{verdict()}]") from None
        return f"converted as model {row.id} [{verdict()}]"

    return call


def matrix_cases() -> list[tuple[str, Callable[[], str]]]:
    """The Compatibility page's matrix of every upload that was stored: built in sandboxed
    children (the matrix, and a real ONNX Runtime session for the placement), never here."""
    from backend.compat import matrix_for_model
    from backend.compat.placement import described
    from backend.models import library

    def build(model_id: int) -> Callable[[], str]:
        def call() -> str:
            matrix = matrix_for_model(model_id, refresh=True)
            placement = matrix.placements.get("ort-cpu")
            placed = described(placement.to_dict()) if placement else "no CPU placement"
            return f"{len(matrix.nodes)} nodes; real placement {placed}"

        return call

    return [(f"matrix of model {m.id} ({m.name[:24]})", build(m.id)) for m in library.list_models()]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hostile-bench-") as scratch:
        root = Path(scratch)
        data = root / "data"
        data.mkdir()
        settings.DATA_DIR.set(str(data))
        settings.DATABASE_URL.set(None)  # the fresh SQLite file under that directory
        inputs = root / "inputs"
        inputs.mkdir()
        canary = root / "canary.txt"
        results = [measure(name, call, data) for name, call in cases(inputs, canary)]
        results += [measure(name, call, data) for name, call in matrix_cases()]
        with hostile_web.dashboard(data, root / "dashboard.log") as dash:
            results += [measure(name, call, data) for name, call in web_cases(inputs, data, dash)]
    print(f"{'input':48} {'s':>7} {'peak MB':>8} {'wrote MB':>9} {'left MB':>8}  outcome")
    for r in results:
        print(
            f"{r.name:48} {r.seconds:7.3f} {r.peak_mb:8.1f} {r.wrote_mb:9.2f} {r.left_mb:8.2f}  "
            f"{r.outcome}"
        )


if __name__ == "__main__":
    main()
