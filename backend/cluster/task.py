"""What runs on a cluster node: fetch the model by hash, measure through the worker's own call.

The measurement is backend.jobs.measuring.measure_in_child, the same call (and the same limited
child from backend.launch) the single-machine worker uses, so a number measured on a node means
exactly what a local one means. Ray's cancel interrupts the wait for the child, and the launcher
kills the child's process group on the way out.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from backend.cluster.artifacts import FileBlob, ShippedFile, fetch, pack_outputs
from backend.cluster.targets import targets_of
from backend.launch.folders import owned_folder

REPLICAS_FOLDER = "optiboard-replicas"  # under the node's temporary folder: replicas' barriers


@dataclass(frozen=True)
class MeasureRequest:
    """One task's work: plain data and nested object refs, so it pickles cheaply. `task` is a
    ConfigurationTask's JSON (backend.knobs.serialize), the configuration and its measurement
    settings in it; the node puts its own paths in place of its source and output folder."""

    task: dict[str, Any]
    model: ShippedFile
    calibration: ShippedFile | None
    timeout_s: float
    replica: int = 0
    replica_count: int = 1
    group: str = ""  # the replicas' placement group id: names their start line on the node


@dataclass
class NodeOutcome:
    """A ConfigurationResult as JSON (with samples, without the configuration the head sent and
    holds), the files it produced, and where it ran."""

    result: dict[str, Any]
    files: list[FileBlob] = field(default_factory=list)
    started: float = 0.0  # wall clock around the child, for the replicas' common window
    ended: float = 0.0


def _where() -> dict[str, Any]:
    import ray

    from backend.hardware import cpu_features

    context = ray.get_runtime_context()
    node_id = context.get_node_id()
    resources = next((n["Resources"] for n in ray.nodes() if n["NodeID"] == node_id), {})
    return {
        "node_id": node_id,
        "target": ",".join(targets_of(resources)),
        "hostname": socket.gethostname(),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "cpu_flags": cpu_features(),
    }


def measure_on_node(request: MeasureRequest) -> NodeOutcome:
    """Run one configuration (one replica) here; called by Ray on the chosen node."""
    from backend.engine.run import ConfigurationTask
    from backend.jobs.measuring import MEASURE_PRELOAD, measure_in_child
    from backend.launch.forks import Forks

    source = fetch(request.model)
    calibration = str(fetch(request.calibration)) if request.calibration else None
    with owned_folder("node") as output_dir:
        task = replace(  # the node's one read of what crossed as plain data, on its own paths
            ConfigurationTask.from_dict(request.task),
            source_path=str(source),
            output_dir=str(output_dir),
            calibration_path=calibration,
        )
        if request.replica_count > 1:
            start_line(request.group, request.replica, request.replica_count)
        # a fork of a server, as on the local worker: its peak memory is counted the same way
        with Forks(MEASURE_PRELOAD) as forks:
            started = time.time()
            result = measure_in_child(task, request.timeout_s, forks=forks)
            ended = time.time()
        if result is None:  # no should_cancel here: Ray's cancel interrupts the wait instead
            raise RuntimeError("the measurement was cancelled")
        data = result.to_dict(with_samples=True, with_configuration=False)
        files = pack_outputs(data["environment"]) if request.replica == 0 else []
    data["environment"]["cluster"] = {**_where(), "replica": request.replica}
    return NodeOutcome(result=data, files=files, started=started, ended=ended)


def start_line(group: str, replica: int, count: int, timeout_s: float = 300.0) -> None:
    """Wait until every replica of the group has reached this point on this node.

    Ray starts the replicas' worker processes one after another, seconds apart on a busy
    machine; without this the first replica could finish before the last one starts, and the
    aggregate would not be a throughput measured at the same time. The replicas share one node
    (STRICT_PACK), so a folder of marker files there is the barrier. No replica knows when
    the others have counted, so a group's folder stays; the folders of groups past any wait
    are swept here, so a node does not keep one per replicated configuration forever.
    """
    root = Path(tempfile.gettempdir()) / REPLICAS_FOLDER
    sweep_barriers(root, older_than_s=2 * timeout_s)
    folder = root / group
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(replica)).touch()
    deadline = time.monotonic() + timeout_s
    while len(list(folder.iterdir())) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def sweep_barriers(root: Path, older_than_s: float) -> None:
    """Remove the groups' barrier folders under `root` untouched for `older_than_s`."""
    cutoff = time.time() - older_than_s
    for folder in root.glob("*"):  # none where root does not exist
        with contextlib.suppress(OSError):
            if folder.stat().st_mtime < cutoff:
                shutil.rmtree(folder, ignore_errors=True)
