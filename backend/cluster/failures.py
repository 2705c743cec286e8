"""The cluster's failures as one sentence each: what happened and what to do (never a traceback).

The worker's own (a head it waits for, a head it gave up on) and ClusterUnavailable live below,
in backend/jobs/supervise.py, since the worker never imports this package.
"""

from __future__ import annotations

from backend.jobs.supervise import ClusterUnavailable


def unreachable(address: str, reason: str) -> ClusterUnavailable:
    first = (reason.strip().splitlines() or ["no answer"])[0][:200]
    exc = ClusterUnavailable(
        f"The Ray cluster at {address} did not answer ({first}); start its head with "
        "`ray start --head` or clear OPTIBOARD_RAY_ADDRESS to run on this machine."
    )
    exc.reason = first
    return exc


def node_left(node_id: str, target: str) -> str:
    where = f" (target {target})" if target else ""
    return (
        f"Node {node_id[:8]}{where} left the cluster; Ray runs its configurations again on "
        "another node of the same target."
    )


def sentence_for(exc: BaseException, retries: int) -> str:
    """One sentence for an error a configuration's task ended with."""
    from ray import exceptions as rx

    if isinstance(exc, rx.TaskCancelledError):
        return "Cancelled while it ran on the cluster."
    if isinstance(exc, rx.NodeDiedError | rx.WorkerCrashedError | rx.LocalRayletDiedError):
        return (
            f"The node running this configuration died and Ray's {retries} retries ran out; "
            "add nodes of this target or retry the job."
        )
    if isinstance(exc, rx.ObjectLostError | rx.OwnerDiedError):
        return "The model's copy in the cluster's object store was lost; retry the job."
    if isinstance(exc, rx.OutOfMemoryError):
        return "The node ran out of memory during this configuration; pick a smaller batch."
    if isinstance(exc, rx.RayTaskError):
        cause = exc.cause if exc.cause is not None else exc
        text = str(cause).strip().splitlines()
        return f"The task failed on its node: {text[-1] if text else type(cause).__name__}"
    if isinstance(exc, rx.RayError):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"The cluster could not run this configuration ({first[:200]}); retry the job."
    raise exc
