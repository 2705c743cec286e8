"""latency stored once: drop the p50/p90/p99 copies of the payload's latency

Revision ID: 0003_typed_results
Revises: 0002_users_audit

Create Date: 2026-12-03 06:40:00

The payload's LatencyStats (derived from the raw samples) is the one source of truth; readers
compute every latency column from it. Downgrade restores the columns, filled from the payload.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_typed_results"
down_revision = "0002_users_audit"
branch_labels = None
depends_on = None

COLUMNS = ("p50_ms", "p90_ms", "p99_ms")


def upgrade() -> None:
    # in place (SQLite 3.35+), not by Alembic's batch copy: with foreign keys on, as storage.db
    # connects, the copy's DROP of the old table deleted every result's samples (ON DELETE
    # CASCADE of result_samples); tests/storage/test_migrations.py upgrades as the app does
    for column in COLUMNS:
        op.drop_column("results", column)


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        for column in COLUMNS:
            batch.add_column(sa.Column(column, sa.Float(), nullable=True))
    results = sa.table(
        "results",
        sa.column("id", sa.Integer),
        sa.column("payload", sa.JSON),
        *(sa.column(c, sa.Float) for c in COLUMNS),
    )
    connection = op.get_bind()
    for row_id, payload in connection.execute(sa.select(results.c.id, results.c.payload)):
        latency = (payload or {}).get("latency") or {}
        values = {c: latency.get(c.removesuffix("_ms")) for c in COLUMNS}
        connection.execute(results.update().where(results.c.id == row_id).values(**values))
