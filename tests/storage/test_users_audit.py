"""Accounts, sign-in failure counts and the audit log on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from storage.repo import audit as audit_store
from storage.repo import throttle as throttle_store
from storage.repo import users as user_store


def test_concurrent_failed_sign_ins_all_count_and_start_one_wait(database: str) -> None:
    waits: list[object] = []
    barrier = threading.Barrier(8)

    def fail() -> None:
        barrier.wait()
        waits.append(throttle_store.record_failure("client:x", free=7, longest_s=60)[1])

    threads = [threading.Thread(target=fail) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(wait is not None for wait in waits) == 1, "the eighth failure passes the seven free"
    assert throttle_store.blocked_until(["client:x"]) is not None
    throttle_store.clear(["client:x"])
    assert throttle_store.blocked_until(["client:x"]) is None


def test_names_are_unique_and_the_audit_log_keeps_its_order(database: str) -> None:
    user_store.create_user("ada", None, "admin")
    with pytest.raises(user_store.NameTaken):
        user_store.create_user("ada", None, "viewer")
    first = audit_store.open_entry("cli:root", "user_add", "ada", {"role": "admin"})
    second = audit_store.open_entry("ada", "delete", "model 1", {})
    audit_store.close_entry(first, "ok")
    audit_store.close_entry(second, "failed", "There is no model 1.")
    rows = audit_store.list_entries()
    assert [(r.id, r.outcome, r.error) for r in rows] == [
        (second, "failed", "There is no model 1."),
        (first, "ok", None),
    ]
    assert rows[1].detail == {"role": "admin"}
    assert audit_store.list_entries(actor="ada")[0].id == second


def test_revision_0002_goes_down_to_0001_and_up_again(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import inspect

    from storage.db import MIGRATIONS_DIR, make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'migrate.db'}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))

    def migrate(step: object, target: str) -> set[str]:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            step(config, target)
        return set(inspect(engine).get_table_names())

    assert {"users", "audit_log"} <= migrate(command.upgrade, "head")
    down = migrate(command.downgrade, "0001")
    assert "users" not in down and "audit_log" not in down and "jobs" in down
    assert {"users", "audit_log"} <= migrate(command.upgrade, "0002_users_audit")
