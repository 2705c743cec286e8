"""configuration stored once: drop the results.configuration copy of the payload's

Revision ID: 0011_configuration_once
Revises: 0010_baselines

Create Date: 2026-12-05 01:10:00

A result's configuration lives in its payload (backend/results.py reads it from there, parsed
once); the column was a second copy that no reader used. A row whose payload lacks the
configuration (none written by this code, but a hand-made or very old row could) gets the
column's value first, so every database reads the same afterwards. Downgrade restores the
column, filled from the payload.

SQLite drops the column in place (ALTER TABLE ... DROP COLUMN, SQLite 3.35 and later) rather
than by Alembic's batch copy: the copy drops the old table, and with foreign keys on (as
storage.db connects) that DROP deletes every result's samples through result_samples' ON DELETE
CASCADE.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_configuration_once"
down_revision = "0010_baselines"
branch_labels = None
depends_on = None

results = sa.table(
    "results",
    sa.column("id", sa.Integer),
    sa.column("configuration", sa.JSON),
    sa.column("payload", sa.JSON),
)


def upgrade() -> None:
    connection = op.get_bind()
    if connection.dialect.name == "sqlite":
        import sqlite3

        if sqlite3.sqlite_version_info < (3, 35):
            raise RuntimeError(
                f"SQLite {sqlite3.sqlite_version} cannot drop a column in place; run Optiboard "
                "with SQLite 3.35 or later (or on PostgreSQL)."
            )
    rows = connection.execute(sa.select(results.c.id, results.c.configuration, results.c.payload))
    for row_id, configuration, payload in rows.all():
        payload = dict(payload or {})
        if payload.get("configuration") is None:
            payload["configuration"] = configuration if configuration is not None else {}
            connection.execute(
                results.update().where(results.c.id == row_id).values(payload=payload)
            )
    op.drop_column("results", "configuration")  # in place on both: see the docstring


def downgrade() -> None:
    """The column back, filled from the payload; nullable (as SQLite adds a column in place),
    which the older code never noticed: it always wrote one."""
    op.add_column("results", sa.Column("configuration", sa.JSON(), nullable=True))
    connection = op.get_bind()
    for row_id, payload in connection.execute(sa.select(results.c.id, results.c.payload)).all():
        configuration = (payload or {}).get("configuration") or {}
        connection.execute(
            results.update().where(results.c.id == row_id).values(configuration=configuration)
        )
