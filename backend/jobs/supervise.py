"""The worker's side of a cluster sweep: a Ray driver in a child, outlived by the worker.

Why a child: Ray's driver cannot survive its head. With the head gone, calls to it block, and
after 60 s Ray ends the whole driver process ("GCS may have been killed ... The program will
terminate"); a head started again is a new cluster the old driver cannot use. So the worker never
imports Ray: it holds the job's lease, starts `python -m backend.cluster.drive` to dispatch and
store, and watches three things: the child's outcome file, the head's port, and the child's
heartbeat (a head restarted on the same port answers the port but not the old driver). When the
head goes away the child is killed, the Jobs page gets one sentence, the port is tried again with
backoff, and a new child resumes once it answers: configurations already stored are skipped
(finished_config_keys), those in flight are sent again, and the results table's unique key keeps
each one single even if a lost task's result was stored just before the head went.

It lives in jobs/, not in backend/cluster/, because it is the worker's own code: it starts the
driver by module name and never imports the cluster package, which stands above the jobs. The
`ray` launcher (backend/jobs/launchers.py) runs it, then has the job's kind conclude.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import settings
from backend.counts import counted
from backend.errors import UserError
from backend.jobs.context import JobContext
from backend.jobs.lease import Backoff
from backend.jobs.measuring import ordered_configurations
from backend.launch.folders import owned_folder
from backend.launch.services import start_service, stop_service
from backend.specs import SweepSpec
from storage.repo import jobs as job_store
from storage.repo import results as result_store
from storage.repo.jobs import JobRow

log = logging.getLogger("optiboard.worker")

WATCH_S = 0.5  # how often the worker looks at the child and the head's port
HANG_S = 45.0  # no heartbeat for this long while the port answers: the driver is stuck
CRASHES_BEFORE_FAILING = 3  # child deaths in a row while the head answered
SETTLED_S = 60.0  # a driver that ran this long before losing its head: the next loss is new


class ClusterUnavailable(UserError):
    """The configured Ray cluster did not answer; `reason` is what the connection said.

    Defined here, below backend/cluster/, because the worker raises it too (gave_up) and the
    worker never imports the cluster package."""

    reason: str = ""


def still_unreachable(address: str, reason: str, not_stored: int, retry_cap_s: float) -> str:
    """The Jobs page's line while the worker waits for a head that went away."""
    first = (reason.strip().splitlines() or ["no answer"])[0][:200]
    return (
        f"Ray cluster at {address} is unreachable ({first}); the "
        f"{_not_yet_stored(not_stored)} {'is' if not_stored == 1 else 'are'} kept and sent "
        f"again once it answers, tried every 1 to {retry_cap_s:g} s."
    )


def answers_again(address: str, not_stored: int) -> str:
    """The job's line once the head answers again and a new driver child resumes."""
    return f"Ray cluster at {address} answers again; resuming the {_not_yet_stored(not_stored)}."


def _not_yet_stored(count: int) -> str:
    """'1 configuration not yet stored', '2 configurations not yet stored'."""
    return f"{counted(count, 'configuration')} not yet stored"


def gave_up(address: str, reason: str, waited_s: float) -> ClusterUnavailable:
    """The job's one sentence once the worker stops waiting for the head."""
    first = (reason.strip().splitlines() or ["no answer"])[0][:200]
    return ClusterUnavailable(
        f"The Ray cluster at {address} did not answer for {waited_s:.0f} s ({first}); start its "
        "head with `ray start --head` and retry the job, or clear OPTIBOARD_RAY_ADDRESS to run "
        "on this machine."
    )


class HeadLost(Exception):
    """The head went away (or restarted) while a driver child was running."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def port_reason(address: str, timeout_s: float = 2.0) -> str | None:
    """Why the head's GCS port does not answer a TCP connect, or None when it answers."""
    if address == "auto":  # a head on this machine, found by Ray itself in the child
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UserError(
            f"OPTIBOARD_RAY_ADDRESS {address!r} is not host:port; set it to the head's "
            "address, e.g. 10.0.0.5:6379."
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


@dataclass
class RayDriverChild:
    """One Ray driver child (`python -m backend.cluster.drive`) and its two files."""

    process: subprocess.Popen
    folder: Path
    started: float

    @property
    def outcome_path(self) -> Path:
        return self.folder / "outcome.json"

    @property
    def beat_path(self) -> Path:
        return self.folder / "beat"

    def last_beat(self) -> float:
        try:
            return self.beat_path.stat().st_mtime
        except FileNotFoundError:
            return self.started

    def outcome(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.outcome_path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def kill(self) -> None:
        """The whole process group at once: the driver has nothing to save once its head is gone."""
        stop_service(self.process)


def start_driver_child(job: JobRow, resumed: bool, folder: Path) -> RayDriverChild:
    command = [
        sys.executable,
        "-m",
        "backend.cluster.drive",
        f"--job={job.id}",
        f"--worker={job.worker_id}",
        f"--attempt={job.attempts}",
        f"--folder={folder}",
    ] + (["--resumed"] if resumed else [])
    process = start_service(command, cwd=settings.PROJECT_ROOT)
    return RayDriverChild(process, folder, time.time())


class Supervisor:
    """Runs one claimed job's cluster sweep to the end, through as many head outages as it takes."""

    def __init__(self, context: JobContext) -> None:
        self.context = context
        self.job = context.job
        self.address = settings.RAY_ADDRESS.get()
        self.crashes = 0
        self.backoff = Backoff(settings.RAY_RETRY_MAX_S.get())
        self.outage_began: float | None = None  # one outage, one sentence, one give-up clock
        self.resuming_logged = True  # "answers again" is said once per outage

    def run(self) -> None:
        """Until the sweep is dispatched to its end or the job stops; the kind concludes."""
        resumed = False
        while not self.context.should_stop():
            reason = port_reason(self.address)
            if reason is not None:
                self._wait_for_head(reason)
                resumed = True
                continue
            started = time.monotonic()
            try:
                if self._drive_once(resumed):
                    break
            except HeadLost as lost:
                if time.monotonic() - started > SETTLED_S:  # it ran: a new outage begins
                    self.backoff.reset()
                    self.outage_began = None
                self._wait_for_head(lost.reason)
            resumed = True

    def _drive_once(self, resumed: bool) -> bool:
        """True when the child dispatched the sweep to its end (or the job stopped)."""
        with owned_folder(f"drive{self.job.id}") as folder:  # swept if the worker is SIGKILLed
            driver = start_driver_child(self.job, resumed, folder)
            try:
                return self._watch(driver)
            finally:
                driver.kill()

    def _watch(self, driver: RayDriverChild) -> bool:
        while driver.process.poll() is None:
            if self.context.lost_lease:
                return True  # the conclusion says so; the child's writes are fenced anyway
            reason = port_reason(self.address)
            if reason is not None:
                raise HeadLost(reason)
            if time.time() - driver.last_beat() > HANG_S:
                raise HeadLost(f"the driver heard nothing from the head for {HANG_S:.0f} s")
            time.sleep(WATCH_S)
        outcome = driver.outcome()
        if outcome is None:  # killed by Ray itself (a head that restarted), or crashed
            self.crashes += 1
            if self.crashes >= CRASHES_BEFORE_FAILING:
                raise RuntimeError(
                    f"the cluster driver ended {self.crashes} times without an outcome "
                    f"(exit status {driver.process.returncode}); see the worker's log"
                )
            raise HeadLost(f"the driver ended with exit status {driver.process.returncode}")
        self.crashes = 0
        if outcome["kind"] == "lost":
            raise HeadLost(outcome["message"])
        if outcome["kind"] == "user_error":
            raise UserError(outcome["message"])
        if outcome["kind"] == "error":
            raise RuntimeError(outcome["message"])
        return True

    def _not_stored(self) -> int:
        spec = SweepSpec.from_dict(self.job.spec)
        done = result_store.finished_config_keys(self.job.id)
        return sum(1 for c in ordered_configurations(spec) if c.key not in done)

    def _wait_for_head(self, reason: str) -> None:
        """One sentence on the Jobs page per outage, then tries with backoff until the port
        answers. A driver that fails again soon after (a head whose port is up before the rest
        of it) continues the same outage: same sentence, longer waits, same give-up clock."""
        give_up = settings.RAY_GIVE_UP_S.get()
        if self.outage_began is None:
            self.outage_began = time.monotonic()
            self.resuming_logged = False
            job_store.log_event(
                self.job.id,
                still_unreachable(self.address, reason, self._not_stored(), self.backoff.cap_s),
                level="warning",
            )
        waited_once = False
        while reason is not None or not waited_once:
            waited_once = True
            waited = time.monotonic() - self.outage_began
            if give_up and waited >= give_up:
                raise gave_up(self.address, reason or "no driver could connect", waited)
            delay = self.backoff.next_delay()
            if give_up:
                delay = min(delay, max(give_up - waited, 0.1))
            log.warning("Ray head %s: %s; next try in %.0f s", self.address, reason, delay)
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline:
                if self.context.should_stop():
                    return
                time.sleep(min(WATCH_S, max(deadline - time.monotonic(), 0)))
            reason = port_reason(self.address)
        if not self.resuming_logged:
            self.resuming_logged = True
            job_store.log_event(self.job.id, answers_again(self.address, self._not_stored()))
