"""Row timestamps come from the database's clock, not from the writing process's clock.

The writer runs in a child under faketime a day ahead (a real skew: libfaketime shifts every clock
call of that process); PostgreSQL has its own clock, so the stored times must be the server's.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from storage.clock import db_utcnow
from storage.db import session_scope
from storage.repo import audit, jobs, models, throttle, users
from tests.skewed_clock import run_skewed

WRITER = """
from datetime import datetime
from storage.repo import audit, jobs, models, throttle, users
print(datetime.now().isoformat())
users.create_user("ada", None, "editor")
users.record_success("ada")
for _ in range(11):  # the eleventh wait, 2^10 s, is capped at 600 s
    throttle.record_failure("client:bob", free=0, longest_s=600)
model = models.create_model(
    name="m", sha256="a" * 64, format="onnx", size_bytes=1, metadata={},
    artifacts=[models.NewArtifact("original", "a" * 64, 1, "m.onnx")],
)
jobs.create_job(model.id, {}, total=1, kind="sweep")
audit.close_entry(audit.open_entry("alice", "delete model", "m", {}), "done")
jobs.log_event(None, "written under faketime")
"""


def _database_now() -> datetime:
    with session_scope() as session:
        return session.scalar(text("select timezone('utc', now())"))


def test_rows_written_by_a_process_with_a_skewed_clock_carry_the_database_time(
    postgres_url: str,
) -> None:
    skewed = datetime.fromisoformat(run_skewed("+1d", WRITER).split()[0])
    assert skewed - datetime.now() > timedelta(hours=23)  # the skew really applied
    now = _database_now()

    (model,) = models.list_models()
    (job,) = jobs.list_jobs()
    (entry,) = audit.list_entries()
    events = jobs.list_events()  # create_job logs one too
    stamps = {
        "model": model.created_at,
        "artifact": models.list_artifacts(model.id)[0].created_at,
        "job": job.created_at,
        "audit": entry.at,
        "audit finished": entry.finished_at,
        **{f"event {e.message!r}": e.created_at for e in events},
    }
    ada = users.get_user("ada")
    stamps["last sign-in"] = ada.last_signin_at
    stamps["user"] = ada.created_at
    waits_until = throttle.blocked_until(["client:bob"])  # by the database's clock, which set it
    assert waits_until is not None
    stamps["throttle end - 600 s"] = waits_until - timedelta(seconds=600)
    for what, stamp in stamps.items():
        assert stamp is not None and abs(now - stamp) < timedelta(minutes=5), (what, stamp, now)


def test_the_database_time_is_the_statements_not_the_transactions_start(database: str) -> None:
    """A write that waited inside its transaction (on a row lock, under load) is dated when it
    runs: a sign-in throttle's 1 s wait must not have ended before it was stored."""

    def read(session: Session) -> datetime:
        value = session.scalar(select(db_utcnow()))
        return datetime.fromisoformat(value) if isinstance(value, str) else value

    with session_scope() as session:
        first = read(session)
        time.sleep(0.3)
        later = read(session)
    assert later - first >= timedelta(seconds=0.25)
