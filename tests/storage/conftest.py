"""Storage tests also run on a real PostgreSQL server (tests/postgres.py)."""

from tests.postgres import database, postgres_server, postgres_url  # noqa: F401
