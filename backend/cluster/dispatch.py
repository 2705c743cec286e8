"""A sweep on a Ray cluster: each configuration a task, results stored as they arrive.

The worker claims the job as always (lease, attempts, cancel, final state are the queue's); only
the middle differs (the `ray` launcher, backend/jobs/launchers.py): instead of measuring
configurations one after another here, it ships the model once, submits every configuration as a
Ray task asking for the resources its measurement needs (targets.ask_for), and stores each result
the moment it lands, through the job's public JobContext (backend/jobs/context.py). Ray runs a task
again on another node when its node or worker process dies (max_retries; application errors are
results, not retried), and the results table's unique key keeps one result per configuration.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import settings
from backend.cluster import artifacts, auth, replicas, targets
from backend.cluster.failures import node_left, sentence_for, unreachable
from backend.cluster.task import MeasureRequest, NodeOutcome, measure_on_node
from backend.counts import counted
from backend.engine.run import ConfigurationTask
from backend.errors import UserError
from backend.jobs.annotate import annotate
from backend.jobs.context import JobContext
from backend.jobs.measuring import ordered_configurations
from backend.jobs.supervise import port_reason
from backend.launch.folders import owned_folder
from backend.records import stored_results
from backend.results import ConfigurationResult, ResultStatus, StoredResult, fp32_baseline
from backend.specs import Configuration, Precision, SweepSpec
from storage.repo import cluster as cluster_store
from storage.repo import jobs as job_store
from storage.repo import models as model_store
from storage.repo.jobs import JobRow

POLL_S = 0.5
CANCEL_GRACE_S = 10.0  # after a polite cancel, the worker processes still running are killed
REJOIN_S = 60.0  # after a head restart, how long nodes have to join before a target is missing


def connect(address: str | None = None) -> None:
    """Join the configured cluster once per process, with its token (backend/cluster/auth.py);
    ClusterUnavailable with a sentence if it does not answer, UserError if this machine has no
    token or the cluster turns it down (retrying would not help)."""
    auth.ask_for_tokens()  # before Ray's first import in this process
    import ray

    if ray.is_initialized():
        return
    address = address or settings.RAY_ADDRESS.get()
    missing = auth.missing_token(os.environ)
    if missing:
        raise UserError(missing)
    _reachable(address)  # ray.init itself waits minutes for a head that is not there
    # this checkout's path, then the node's own (`join` puts the node's checkout there; Ray
    # expands ${PYTHONPATH} on the node), so nodes may keep the code at another path
    paths = f"{settings.PROJECT_ROOT}{os.pathsep}${{PYTHONPATH}}"
    runtime_env = {"env_vars": {"PYTHONPATH": paths}}
    try:
        ray.init(address=address, runtime_env=runtime_env, logging_level="warning")
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        refusal = auth.refused(address, exc)
        if refusal:
            raise UserError(refusal) from None
        raise unreachable(address, str(exc)) from None


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """The head's GCS port answers a TCP connect, or ClusterUnavailable at once."""
    reason = port_reason(address, timeout_s)
    if reason is not None:
        raise unreachable(address, reason)


@dataclass
class Pending:
    """One configuration in flight: one ref per replica, and its placement group if any."""

    config: Configuration
    refs: list[Any]
    group: Any = None
    outcomes: dict[int, NodeOutcome] = field(default_factory=dict)


def submit(config: Configuration, request: MeasureRequest) -> Pending:
    """The configuration's task(s), asking for its resources (replicas packed on one node)."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    options = {
        "max_retries": settings.CLUSTER_MAX_RETRIES.get(),
        "retry_exceptions": False,  # a measurement that fails is a result, not a node failure
        **targets.ask_for(config).options(),
    }
    if config.replicas == 1:
        return Pending(config, [_remote().options(**options).remote(request)])
    group = replicas.placement(config)
    refs = [
        _remote()
        .options(**options, scheduling_strategy=PlacementGroupSchedulingStrategy(group, i))
        .remote(replace(request, replica=i, replica_count=config.replicas, group=group.id.hex()))
        for i in range(config.replicas)
    ]
    return Pending(config, refs, group)


@lru_cache(maxsize=1)
def _remote() -> Any:
    """measure_on_node as a Ray remote function, registered once per process."""
    import ray

    return ray.remote(measure_on_node)


def node_task(config: Configuration, spec: SweepSpec) -> dict[str, Any]:
    """The configuration's task as a node reads it (ConfigurationTask.from_dict): the same
    task a local sweep sends its child, less the paths, which are the node's own."""
    task = ConfigurationTask(
        source_path="",  # the node's fetched copy of the model
        configuration=config,
        measure=spec.measure,
        output_dir="",  # the node's scratch folder
        min_cosine=spec.min_cosine,
    )
    return task.to_dict()


def _failed(config: Configuration, error: str, status: ResultStatus) -> ConfigurationResult:
    return ConfigurationResult(
        config_key=config.key,
        configuration=config,
        status=status,
        error=error,
        providers_requested=[config.provider],
    )


class ClusterSweep:
    """A sweep's configurations on a cluster; each result is annotated and stored exactly as
    for a local measurement (backend/jobs/sweep.py), and the worker concludes the job."""

    def __init__(self, context: JobContext, resumed: bool = False) -> None:
        self.context = context
        self.resumed = resumed  # after a head restart: nodes may still be joining
        self.pending: dict[str, Pending] = {}
        # results held back until the FP32 result they are explained against has landed
        self.waiting: list[tuple[ConfigurationResult, list[artifacts.FileBlob]]] = []
        # the job's results, read once at the start and added to as each lands: FP32 baselines
        self.held: list[StoredResult] = []

    def dispatch(self) -> None:
        """Dispatch and collect (the worker concludes); a cluster gone mid-sweep is
        ClusterUnavailable, which the worker waits out (backend/jobs/supervise.py)."""
        import ray

        connect()
        try:
            self._run(self.context.job)
        except (ray.exceptions.RaySystemError, ConnectionError) as exc:
            raise unreachable(settings.RAY_ADDRESS.get() or "its address", str(exc)) from None

    def _run(self, job: JobRow) -> None:
        import ray

        spec = SweepSpec.from_dict(job.spec)
        self.held = stored_results(job.id)
        done = {r.config_key for r in self.held}
        todo = [c for c in ordered_configurations(spec) if c.key not in done]
        if done:
            job_store.log_event(
                job.id, f"resuming: {counted(len(done), 'configuration')} already stored"
            )
        if self.resumed:
            self._await_targets(todo)
        cluster_store.record_nodes(targets.survey())
        nodes = ray.nodes()
        request = self._request_template(job, spec)
        pending = self.pending
        for config in todo:
            reason = targets.unplaceable(config, nodes)
            if reason:
                self._land(job, _failed(config, reason, ResultStatus.UNAVAILABLE), [])
                continue
            pending[config.key] = submit(config, replace(request, task=node_task(config, spec)))
        sent = counted(len(pending), "configuration")
        job_store.log_event(job.id, f"{sent} sent to the Ray cluster")
        self._collect(job, pending, nodes)

    def _await_targets(self, todo: list[Configuration], timeout_s: float = REJOIN_S) -> None:
        """After a head restart, give the nodes time to join again before a configuration is
        called unplaceable (and stored as unavailable for good)."""
        import ray

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            nodes = ray.nodes()
            if not any(targets.unplaceable(c, nodes) for c in todo):
                return
            time.sleep(1.0)

    def _request_template(self, job: JobRow, spec: SweepSpec) -> MeasureRequest:
        """The model (and calibration file) shipped once for the whole sweep."""
        artifact = model_store.model_file(job.model_id)
        model = artifacts.ship(self.context.artifacts.path_for(artifact.sha256), artifact.sha256)
        calibration = None
        if spec.calibration_sha256:
            path = self.context.artifacts.path_for(spec.calibration_sha256)
            calibration = artifacts.ship(path, spec.calibration_sha256)
        return MeasureRequest(
            task={},  # each configuration's own: node_task
            model=model,
            calibration=calibration,
            timeout_s=spec.measure.max_seconds + settings.CONFIG_TIMEOUT_S.get(),
        )

    def _collect(self, job: JobRow, pending: dict[str, Pending], nodes: list[dict]) -> None:
        """Store results as they land; watch for lost nodes; stop everything on cancel."""
        import ray

        owner = {ref: p for p in pending.values() for ref in p.refs}
        alive = {n["NodeID"]: n for n in nodes if n.get("Alive")}
        while owner:
            if self.context.should_stop():
                self._cancel(list(owner))
                break
            ready, _ = ray.wait(list(owner), num_returns=1, timeout=POLL_S)
            alive = self._watch_nodes(job, alive)
            for ref in ready:
                entry = owner.pop(ref)
                self._arrived(job, entry, ref)
                if len(entry.outcomes) == len(entry.refs):  # every replica is back
                    del pending[entry.config.key]
                    self._finish_entry(job, entry)
        for entry in pending.values():
            if entry.group is not None:
                ray.util.remove_placement_group(entry.group)
        self._land_ready(job, everything=True)

    def _arrived(self, job: JobRow, entry: Pending, ref: Any) -> None:
        """One replica's outcome, or the sentence for why its task ended without one."""
        import ray

        index = entry.refs.index(ref)
        try:
            entry.outcomes[index] = ray.get(ref)
        except ray.exceptions.RayError as exc:
            if not isinstance(exc, ray.exceptions.RayTaskError):
                _reachable(settings.RAY_ADDRESS.get())  # a head gone: not this task's failure
            retries = settings.CLUSTER_MAX_RETRIES.get()
            failed = _failed(entry.config, sentence_for(exc, retries), ResultStatus.FAILED)
            data = failed.to_dict(with_samples=True, with_configuration=False)
            entry.outcomes[index] = NodeOutcome(result=data)

    def _finish_entry(self, job: JobRow, entry: Pending) -> None:
        import ray

        if entry.group is not None:
            ray.util.remove_placement_group(entry.group)
        outcomes = [entry.outcomes[i] for i in sorted(entry.outcomes)]
        if entry.config.replicas > 1:
            result = replicas.merge(entry.config, outcomes)
        else:
            result = ConfigurationResult.from_dict(outcomes[0].result, configuration=entry.config)
        self.waiting.append((result, outcomes[0].files))
        self._land_ready(job)

    def _land_ready(self, job: JobRow, everything: bool = False) -> None:
        """Store every waiting result whose FP32 baseline is not still running (all: at the end).

        The local worker measures FP32 first so each other precision is explained against it;
        here they finish in any order, so a result waits for its baseline (seconds, usually).
        """
        still = []
        fp32_first = sorted(
            self.waiting, key=lambda w: w[0].configuration.precision != Precision.FP32
        )
        for result, files in fp32_first:
            config = result.configuration
            baseline = replace(config, precision=Precision.FP32, fp32_nodes=()).key
            if everything or config.precision == Precision.FP32 or baseline not in self.pending:
                self._land(job, result, files)
            else:
                still.append((result, files))
        self.waiting = still

    def _land(self, job: JobRow, result: ConfigurationResult, files: list) -> None:
        """Annotate and store one result exactly as the local worker does."""
        config = result.configuration
        cpu = (result.environment.get("cluster") or {}).get("cpu_flags") or {}
        model = model_store.get_model(job.model_id)
        baseline = fp32_baseline(self.held, config) if config.precision != Precision.FP32 else None
        with owned_folder(f"job{job.id}") as folder:
            artifacts.unpack_outputs(files, result.environment, folder)
            histogram = model.op_histogram if model else {}
            annotate(result, config, histogram, cpu, baseline)
            stored = self.context.store_result(result)
        if stored is not None:
            self.held.append(stored)

    def _watch_nodes(self, job: JobRow, alive: dict[str, dict]) -> dict[str, dict]:
        """Log one sentence per node that left since the last look."""
        import ray

        now = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
        for node_id in set(alive) - set(now):
            target = ",".join(targets.targets_of(alive[node_id]["Resources"]))
            job_store.log_event(job.id, node_left(node_id, target), level="warning")
        return now

    def _cancel(self, refs: list[Any]) -> None:
        """Politely first (the launcher kills its child on the way out), then by force."""
        import ray

        for ref in refs:
            ray.cancel(ref, force=False)
        deadline = time.monotonic() + CANCEL_GRACE_S
        remaining = refs
        while remaining and time.monotonic() < deadline:
            _, remaining = ray.wait(remaining, num_returns=len(remaining), timeout=POLL_S)
        for ref in remaining:
            ray.cancel(ref, force=True)
