"""Keeping a claimed job's lease alive, and waiting out a database that does not answer."""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from storage.db import DatabaseUnavailable
from storage.repo import jobs as job_store
from storage.repo import workers as worker_store
from storage.repo.jobs import Lease

log = logging.getLogger("optiboard.worker")


class LeaseKeeper:
    """Renews a job's lease from a background thread for as long as the job runs.

    A thread rather than renewals between steps, so the lease also holds while something long
    blocks the worker: copying a large optimized model into the artifact store, an fsync, a slow
    child start. Whether the lease still holds is decided by the database (a conditional UPDATE
    on the lease's worker and attempt); once lost it stays lost.
    """

    def __init__(self, lease: Lease, lease_seconds: float, every_s: float | None = None) -> None:
        self.lease = lease
        self.lease_seconds = lease_seconds
        self.every_s = every_s if every_s is not None else max(lease_seconds / 3, 0.05)
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"lease-job{lease.job_id}", daemon=True
        )

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def renew_now(self) -> bool:
        """One renewal; False once the job belongs to someone else (or is gone)."""
        if self.lost:
            return False
        try:
            held = job_store.renew_lease(
                self.lease.job_id,
                self.lease.worker_id,
                self.lease_seconds,
                attempt=self.lease.attempt,
            )
            worker_store.worker_heartbeat(self.lease.worker_id, self.lease.job_id)
        except DatabaseUnavailable as exc:  # the database decides; try again next round
            log.warning("lease renewal of job %s failed: %s", self.lease.job_id, exc)
            return True
        if not held:
            self._lost.set()
        return held

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            if not self.renew_now():
                return

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()


class Backoff:
    """Capped exponential waits (1, 2, 4 ... cap_s seconds) while the database is down."""

    def __init__(self, cap_s: float) -> None:
        self.cap_s = cap_s
        self.failures = 0

    def next_delay(self) -> float:
        delay = min(self.cap_s, 2.0**self.failures)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0
