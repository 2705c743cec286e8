"""The registry of launchers: where a claimed job's measurements run.

`local` runs the kind on this host, each measurement in a limited, sandboxed child process.
`ray` hands a sweep to the Ray cluster at OPTIBOARD_RAY_ADDRESS: a driver child
(`python -m backend.cluster.drive`) sends each configuration as a Ray task and stores each result
under the worker's lease, while the worker holds the lease and waits out head outages
(backend/jobs/supervise.py); the kind then concludes from what was stored. The worker never
imports Ray or the cluster package.
"""

from __future__ import annotations

from typing import Protocol

import settings
from backend.jobs.context import JobContext, JobOutcome
from backend.jobs.kinds import Kind
from backend.jobs.supervise import Supervisor


class Launcher(Protocol):
    """Runs one claimed job of a kind to its end."""

    name: str

    def launch(self, kind: Kind, context: JobContext) -> JobOutcome: ...


class LocalChild:
    """On this host: the kind runs here, each measurement in a limited child."""

    name = "local"

    def launch(self, kind: Kind, context: JobContext) -> JobOutcome:
        return kind.run(context)


class RayCluster:
    """On the configured Ray cluster, through a driver child the worker outlives."""

    name = "ray"

    def launch(self, kind: Kind, context: JobContext) -> JobOutcome:
        Supervisor(context).run()  # ClusterUnavailable (one sentence) once it gives up
        return kind.conclude(context)


LAUNCHERS: dict[str, Launcher] = {LocalChild.name: LocalChild(), RayCluster.name: RayCluster()}


def launcher_for(kind: Kind) -> Launcher:
    """Ray when a cluster is configured and the kind runs there; this host otherwise."""
    if settings.RAY_ADDRESS.get() and RayCluster.name in kind.launchers:
        return LAUNCHERS[RayCluster.name]
    return LAUNCHERS[LocalChild.name]
