"""Auth tests that check clocks run against a real PostgreSQL server (tests/postgres.py)."""

from tests.postgres import postgres_server, postgres_url  # noqa: F401
