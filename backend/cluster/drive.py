"""The Ray driver of one job's cluster sweep, as a child of the worker (backend/jobs/supervise.py).

`python -m backend.cluster.drive --job N --worker W --attempt A --folder F [--resumed]` connects,
dispatches the configurations not yet stored, stores each result under the worker's lease (W, A:
a worker that lost the job writes nothing), and leaves F/outcome.json saying how it ended:
done, lost (the head went away: the worker waits and starts another child), user_error or error.
While connected it touches F/beat after each answer from the head, so the worker can tell a
driver that hangs on a head restarted behind the same port.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path

from backend.errors import UserError
from backend.jobs.context import JobContext
from backend.jobs.supervise import ClusterUnavailable
from storage.artifacts import ArtifactStore
from storage.repo import jobs as job_store

BEAT_S = 1.0


def write_outcome(folder: Path, kind: str, message: str = "") -> None:
    """Atomically, so the worker never reads half a file."""
    tmp = folder / "outcome.json.tmp"
    tmp.write_text(json.dumps({"kind": kind, "message": message}))
    os.replace(tmp, folder / "outcome.json")


def beat_forever(path: Path) -> None:
    """Touch the beat file after each answer from the head (ray.nodes() blocks without one)."""
    import ray

    while True:
        ray.nodes()
        path.touch()
        time.sleep(BEAT_S)


def drive(job_id: int, worker_id: str, attempt: int, folder: Path, resumed: bool) -> str:
    """Run the sweep; the outcome's kind."""
    from backend.cluster.dispatch import ClusterSweep, connect

    (folder / "beat").touch()
    row = job_store.get_job(job_id)
    if row is None or (row.worker_id, row.attempts) != (worker_id, attempt):
        return "done"  # the job is no longer this worker's: nothing to write
    job = replace(row, worker_id=worker_id, attempts=attempt)
    connect()  # first: it asks for Ray's tokens before Ray is imported
    import ray

    threading.Thread(target=beat_forever, args=(folder / "beat",), daemon=True).start()
    # no lease keeper here: the worker keeps the lease, and every write is fenced by it
    ClusterSweep(JobContext(job, ArtifactStore()), resumed=resumed).dispatch()
    ray.shutdown()  # only when done: with the head gone it would block
    return "done"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.cluster.drive", description=__doc__)
    parser.add_argument("--job", type=int, required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--resumed", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    try:
        kind = drive(args.job, args.worker, args.attempt, args.folder, args.resumed)
        write_outcome(args.folder, kind)
    except ClusterUnavailable as exc:
        write_outcome(args.folder, "lost", exc.reason or str(exc))
    except UserError as exc:
        write_outcome(args.folder, "user_error", str(exc))
    except Exception as exc:  # the driver's boundary: the worker records it on the job
        write_outcome(
            args.folder, "error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        )
    sys.stdout.flush()
    os._exit(0)  # Ray's threads must not keep a finished driver alive


if __name__ == "__main__":
    sys.exit(main())
