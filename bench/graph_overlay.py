"""A graph of thousands of nodes with several GB of external data: how long its structure, its
overlays and Netron's painting take, and that the weights never enter the process.

The external data is one sparse file (the disk holds only its metadata), which the script checks
with st_blocks before it starts. Nothing here reads it: the structure comes from
`onnx.load(..., load_external_data=False)` (backend/graphview/structure.py), the FLOPs from the
cost counter in its limited child. The time overlay is drawn from a synthetic profile (one
runtime node per uploaded node, times from a fixed random draw), stated as such: running a 4 GB
graph to profile it is not what this measures.

    .venv/bin/python bench/graph_overlay.py [--blocks 1000] [--gb 4] [--browser]
    .venv/bin/python bench/graph_overlay.py --ingest-gb 1.8 [--ingest-blocks 400] [--browser]
        [--refuse-gb 4]

--browser also serves the patched viewer and the .onnx to headless Chromium (Debian's
chromium-headless-shell, as the browser tests) and reports Netron's own load-and-layout time
and the overlay's paint time.

--ingest-gb is the plain-upload path instead: the same graph, its external data zipped (stored,
not deflated, so ingest's zip-bomb ratio check does not refuse the zeros) and sent through the
real ingest into a scratch data directory, which embeds the weights into one .onnx (ingest refuses
past protobuf's 2 GB, so 1.8 GB is about the largest plain upload; --refuse-gb shows the sentence
a bigger one gets). The Graph page shows such a file from its weightless copy
(backend/graphview/skeleton.py): the bench times the copy's making (first view, a limited child),
the cached second view, the structure the overlays use and the time overlay; with --browser,
Netron opens the copy with the overlay.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import settings  # noqa: E402
from backend import viewer  # noqa: E402
from backend.engine.profile import NodeProfile, Profile  # noqa: E402
from backend.errors import UserError  # noqa: E402
from backend.graphview import overlay as ov  # noqa: E402
from backend.graphview import skeleton  # noqa: E402
from backend.graphview import structure as st  # noqa: E402
from backend.models import graphread  # noqa: E402
from backend.models.costing import cost_in_child  # noqa: E402

HIDDEN = 1024


def build(folder: Path, blocks: int, gigabytes: float) -> Path:
    """blocks x (MatMul, Add, Relu) on [1, HIDDEN], every weight in one sparse external file."""
    data = folder / "weights.bin"
    per_block = (HIDDEN * HIDDEN + HIDDEN) * 4
    total = max(int(gigabytes * 1e9), per_block * blocks)
    stride = total // blocks  # spread the tensors over the whole file
    inits, nodes = [], []
    x = "input"
    for b in range(blocks):
        for name, dims, offset in (
            (f"w{b}", [HIDDEN, HIDDEN], b * stride),
            (f"b{b}", [HIDDEN], b * stride + HIDDEN * HIDDEN * 4),
        ):
            tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
            tensor.data_location = TensorProto.EXTERNAL
            length = int(np.prod(dims)) * 4
            for key, value in (("location", data.name), ("offset", offset), ("length", length)):
                tensor.external_data.add(key=key, value=str(value))
            inits.append(tensor)
        nodes += [
            helper.make_node("MatMul", [x, f"w{b}"], [f"m{b}"], name=f"block{b}/matmul"),
            helper.make_node("Add", [f"m{b}", f"b{b}"], [f"a{b}"], name=f"block{b}/add"),
            helper.make_node("Relu", [f"a{b}"], [f"r{b}"], name=f"block{b}/relu"),
        ]
        x = f"r{b}"
    graph = helper.make_graph(
        nodes,
        "deep",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, HIDDEN])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, HIDDEN])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "deep.onnx"
    path.write_bytes(model.SerializeToString())
    with open(data, "wb") as handle:
        handle.truncate(total)  # sparse: no block is written
    return path


def synthetic_profile(graph: st.GraphStructure) -> Profile:
    rng = np.random.default_rng(0)
    nodes = [
        NodeProfile(
            n.key, n.op_type, "CPUExecutionProvider", 20, float(rng.gamma(2.0, 50.0)), [n.key]
        )
        for n in graph.nodes
    ]
    return Profile(20, "CPUExecutionProvider", nodes)


def os_name() -> str:
    return f"{platform.system()} {platform.release()}, {platform.machine()}"


def timed(label: str, call):  # noqa: ANN001, ANN201
    started = time.perf_counter()
    value = call()
    print(f"{label}: {time.perf_counter() - started:.3f} s")
    return value


def browser_times(path: Path, overlay_json: bytes) -> None:
    from playwright.sync_api import expect

    from tests.browsing import chromium, serving_folder

    site = path.parent / "site"
    viewer.prepare_viewer(site / "netron")
    (site / "deep.onnx").write_bytes(path.read_bytes())  # the graph only: no weights are served
    (site / "overlay.json").write_bytes(overlay_json)
    url = viewer.viewer_url("/deep.onnx", "deep.onnx", overlay="/overlay.json")
    with serving_folder(site) as base, chromium() as browser:
        page = browser.new_page()
        started = time.perf_counter()
        page.goto(base + url.replace("/app/static", ""))
        body = page.locator("body")
        expect(body).to_have_attribute("data-optiboard-overlay", "time", timeout=600_000)
        wall = time.perf_counter() - started
        painted = body.get_attribute("data-optiboard-painted")
        paint_ms = body.get_attribute("data-optiboard-overlay-ms")
    print(f"browser: Netron opened, laid out and painted in {wall:.1f} s (wall, from navigation)")
    print(f"browser: overlay fetch + paint {paint_ms} ms for {painted} nodes (in the page)")


def zipped(folder: Path, blocks: int, gigabytes: float) -> Path:
    """build()'s graph and sparse data, zipped stored (ratio 1) as a user would upload it."""
    import zipfile

    path = build(folder, blocks, gigabytes)
    archive = folder / "deep.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED, allowZip64=True) as handle:
        for member in (path, path.with_name("weights.bin")):
            handle.write(member, member.name)
    path.unlink()
    path.with_name("weights.bin").unlink()
    return archive


def ingest_bench(args: argparse.Namespace) -> None:
    """A plain upload past the viewer's limit: real ingest, then what the Graph page does."""
    from backend.models.ingest import ingest_file
    from backend.models.library import list_artifacts

    with tempfile.TemporaryDirectory(prefix="graph-ingest-", dir=args.scratch) as tmp:
        settings.DATA_DIR.set(str(Path(tmp) / "data"))
        if args.refuse_gb:
            archive = timed(
                f"zip of {args.refuse_gb:g} GB", lambda: zipped(Path(tmp), 1000, args.refuse_gb)
            )
            for upload_mb in (None, "8192"):  # as configured, then with the upload limit raised
                settings.MAX_UPLOAD_MB.set(upload_mb)
                try:
                    ingest_file(archive, "deep.zip", name="too big")
                    print("ingest accepted it (unexpected)")
                except UserError as exc:
                    print(f"ingest of the {archive.stat().st_size / 1e9:.2f} GB zip refused: {exc}")
            settings.MAX_UPLOAD_MB.set(None)
            archive.unlink()
        archive = timed("zip", lambda: zipped(Path(tmp), args.ingest_blocks, args.ingest_gb))
        print(f"upload: {archive.stat().st_size / 1e9:.2f} GB zip (stored)")
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        model = timed("ingest (real, its children)", lambda: ingest_file(archive, "deep.zip"))
        archive.unlink()
        artifact = next(a for a in list_artifacts(model.id) if a.filename.endswith(".onnx"))
        from backend.models.library import artifact_path

        stored = artifact_path(artifact.sha256)
        print(
            f"stored: {artifact.filename}, {artifact.size_bytes / 1e9:.2f} GB (weights embedded), "
            f"{args.ingest_blocks * 3} nodes; viewer limit {viewer.max_viewer_bytes() >> 20} MiB"
        )
        first = timed(
            "first view: weightless copy made (limited child)",
            lambda: skeleton.skeleton_of(stored, artifact.sha256),
        )
        second = timed(
            "second view: cached copy", lambda: skeleton.skeleton_of(stored, artifact.sha256)
        )
        print(f"copy: {first.size_bytes / 1e3:.1f} kB (cached on second view: {second.cached})")
        graph = timed("structure of the upload (limited child)", lambda: st.read_structure(stored))
        from_copy = timed(
            "structure of the copy (in process; what the page's overlays use)",
            lambda: st.read_structure(first.path),
        )
        print(f"same nodes in upload and copy: {graph == from_copy}")
        started = time.perf_counter()
        payload = ov.time_overlay(graph, synthetic_profile(graph), "synthetic").to_json(graph)
        print(f"time overlay + JSON: {time.perf_counter() - started:.3f} s")
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of this process: {rss_before:.0f} MB before, {rss_after:.0f} MB after")
        if args.browser:
            browser_times(first.path, payload)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=1000, help="3 nodes each")
    parser.add_argument("--gb", type=float, default=4.0, help="external data size")
    parser.add_argument("--browser", action="store_true")
    parser.add_argument("--ingest-gb", type=float, default=0.0, help="plain upload of this size")
    parser.add_argument("--ingest-blocks", type=int, default=400, help="3 nodes each")
    parser.add_argument("--refuse-gb", type=float, default=0.0, help="also try a too-big upload")
    parser.add_argument("--scratch", default=None, help="folder for the zips and data dir")
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, onnx {onnx.__version__}, "
        f"netron {viewer.netron_version()}, {os_name()}"
    )
    if args.ingest_gb:
        ingest_bench(args)
        return 0
    with tempfile.TemporaryDirectory(prefix="graph-overlay-") as tmp:
        path = timed("build", lambda: build(Path(tmp), args.blocks, args.gb))
        data = path.with_name("weights.bin")
        stat = data.stat()
        on_disk = stat.st_blocks * 512
        print(
            f"graph: {path.stat().st_size / 1e6:.2f} MB .onnx, {args.blocks * 3} nodes; external "
            f"data {stat.st_size / 1e9:.2f} GB of which {on_disk / 1e6:.2f} MB on disk (sparse: "
            f"{'yes' if on_disk < stat.st_size // 100 else 'NO'})"
        )
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        graph = timed("structure (in process)", lambda: st.read_structure(path))
        graphread.IN_PROCESS_BYTES = 0
        stat = path.stat()  # a new time: not the structure kept for the file
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        timed("structure (limited child)", lambda: st.read_structure(path))
        profile = synthetic_profile(graph)
        started = time.perf_counter()
        overlay = ov.time_overlay(graph, profile, "synthetic profile")
        payload = overlay.to_json(graph)
        print(
            f"time overlay + JSON: {time.perf_counter() - started:.3f} s, "
            f"{len(payload) / 1e6:.2f} MB JSON"
        )
        cost = timed("cost counted (limited child)", lambda: cost_in_child(path, 1, {}, path.name))
        timed("FLOPs overlay", lambda: ov.cost_overlay(graph, cost, "flops").to_json(graph))
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of this process: {rss_before:.0f} MB before, {rss_after:.0f} MB after")
        if args.browser:
            browser_times(path, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
