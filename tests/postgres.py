"""A real PostgreSQL server for tests: initdb + pg_ctl into a temporary folder on a free port.

Shared by the conftests of tests/storage and tests/backend/queue. Each test gets a fresh database on
one server per session; `stop()`/`start()` let a test take the server away and bring it back.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.waiting import free_port

NOBODY = 65534
_names = itertools.count(1)


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server binary from PATH or Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@dataclass
class PostgresServer:
    """One running server; the database `postgres` is used only to create per-test databases."""

    root: Path
    port: int
    pg_ctl: str
    as_user: list[str]

    @property
    def data(self) -> Path:
        return self.root / "db"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://optiboard@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        log = str(self.root / "log")
        command = [*self.as_user, self.pg_ctl, "-D", str(self.data), "-o", options, "-l", log]
        subprocess.run([*command, "-w", "start"], check=True, capture_output=True)

    def stop(self, mode: str = "fast") -> None:
        command = [*self.as_user, self.pg_ctl, "-D", str(self.data), "-m", mode, "-w", "stop"]
        subprocess.run(command, check=True, capture_output=True)

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(_names)}"
        dsn = f"host=127.0.0.1 port={self.port} user=optiboard dbname=postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextmanager
def running_postgres() -> Iterator[PostgresServer | None]:
    """A started server, or None when the binaries are missing (scripts/test installs them)."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        yield None
        return
    # outside pytest's tmp tree, whose 0700 parent the unprivileged server user cannot enter
    root = Path(tempfile.mkdtemp(prefix="optiboard-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        os.chown(root, NOBODY, NOBODY)
        as_user = ["runuser", "-u", "nobody", "--"]
    server = PostgresServer(root=root, port=free_port(), pg_ctl=pg_ctl, as_user=as_user)
    subprocess.run(
        [*as_user, initdb, "-D", str(server.data), "-A", "trust", "-U", "optiboard"],
        check=True,
        capture_output=True,
    )
    server.start()
    try:
        yield server
    finally:
        subprocess.run(
            [*as_user, pg_ctl, "-D", str(server.data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One server for the whole test session; skipped where PostgreSQL is not installed."""
    with running_postgres() as server:
        if server is None:
            pytest.skip("PostgreSQL server binaries are not installed (scripts/test installs them)")
        yield server


@pytest.fixture
def postgres_url(
    postgres_server: PostgresServer, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A fresh database, made the configured one (artifacts stay in the test's data_dir)."""
    url = postgres_server.new_database()
    monkeypatch.setenv("OPTIBOARD_DATABASE_URL", url)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, data_dir: Path) -> str:
    """Run the test once on the data directory's SQLite file and once on a fresh PostgreSQL
    database (made the configured one): "sqlite" or that database's URL."""
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_url")
    return "sqlite"
