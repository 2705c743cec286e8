"""The worker's Prometheus metrics: jobs by state, configurations done and failed, durations,
queue depth, each finished job and configuration labelled by kind (sweep or serving study), and
the serving studies' load points by verdict. Served by prometheus-client on
OPTIBOARD_WORKER_METRICS_PORT (0: off, the default, because several workers on one host would
fight over one port) at OPTIBOARD_WORKER_METRICS_ADDRESS (loopback unless a Prometheus elsewhere
is meant to scrape it).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

import settings
from storage.states import JobState

# Seconds: a configuration takes from a fraction of a second to the OPTIBOARD_CONFIG_TIMEOUT_S cap.
CONFIGURATION_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800)
SWEEP = "sweep"
JOB_BUCKETS = (1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600)


class WorkerMetrics:
    """One registry per worker process (not prometheus-client's global one, so tests and
    several instances never collide)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.enabled = False
        self.jobs_finished = Counter(
            "optiboard_jobs_finished",
            "Jobs this worker ran to an end, by kind (sweep, serving, generation) and final state",
            ["kind", "state"],
            registry=self.registry,
        )
        self.configurations = Counter(
            "optiboard_configurations",
            "Configurations this worker measured (a serving study's: one Triton server each), "
            "by kind and outcome (ok, failed, unavailable, cancelled, ...)",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.configuration_seconds = Histogram(
            "optiboard_configuration_seconds",
            "Wall time of one configuration (its child process, start to result; a serving "
            "study's: server start to stop), by kind",
            ["kind"],
            buckets=CONFIGURATION_BUCKETS,
            registry=self.registry,
        )
        self.job_seconds = Histogram(
            "optiboard_job_seconds",
            "Wall time of one job on this worker, claim to end, by kind",
            ["kind"],
            buckets=JOB_BUCKETS,
            registry=self.registry,
        )
        self.jobs = Gauge(
            "optiboard_jobs",
            "Jobs in the database by state (all workers), read at each poll",
            ["state"],
            registry=self.registry,
        )
        self.serving_points = Counter(
            "optiboard_serving_points",
            "Load points serving studies measured on Triton, by verdict (stable, unstable, "
            "saturated: the load generator could not keep up)",
            ["verdict"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "optiboard_queue_depth",
            "Jobs waiting to be claimed (all workers), read at each poll",
            registry=self.registry,
        )

    def start(self, port: int, address: str) -> None:
        start_http_server(port, addr=address, registry=self.registry)
        self.enabled = True

    def start_from_settings(self) -> bool:
        """Serve the metrics when a port is set; True when they are served."""
        port = settings.WORKER_METRICS_PORT.get()
        if port and not self.enabled:
            self.start(port, settings.WORKER_METRICS_ADDRESS.get())
        return self.enabled

    def configuration_done(self, outcome: str, seconds: float, kind: str = SWEEP) -> None:
        self.configurations.labels(kind=kind, outcome=outcome).inc()
        self.configuration_seconds.labels(kind=kind).observe(seconds)

    def job_finished(self, state: JobState, seconds: float, kind: str = SWEEP) -> None:
        self.jobs_finished.labels(kind=kind, state=state.value).inc()
        self.job_seconds.labels(kind=kind).observe(seconds)

    def serving_point(self, stable: bool, saturated: bool) -> None:
        verdict = "saturated" if saturated else "stable" if stable else "unstable"
        self.serving_points.labels(verdict=verdict).inc()

    def observe_jobs(self, counts: dict[str, int]) -> None:
        for state in JobState:
            self.jobs.labels(state=state.value).set(counts.get(state.value, 0))
        self.queue_depth.set(counts.get(JobState.QUEUED.value, 0))


WORKER = WorkerMetrics()
