"""jobs.kind: what a job runs, a column instead of a key read out of its spec JSON

Revision ID: 0012_job_kind
Revises: 0011_configuration_once

Create Date: 2026-12-05 07:30:00

Every row is filled from its spec's "kind" key, which every kind but the sweep wrote (a spec
without one is a sweep, as every sweep ever stored). The rows are read in Python rather than
with a JSON expression in SQL, so the one code path serves SQLite and PostgreSQL alike. The
spec keeps its "kind" key: older workers read it there.

SQLite adds the column in place (ALTER TABLE ... ADD COLUMN) and the downgrade drops it in
place too (SQLite 3.35 and later, which 0011 already requires), never by Alembic's batch copy:
dropping the copied jobs table with foreign keys on would delete every job's results, events,
points and baselines through their ON DELETE CASCADE (0011 says more).
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_job_kind"
down_revision = "0011_configuration_once"
branch_labels = None
depends_on = None

jobs = sa.table(
    "jobs",
    sa.column("id", sa.Integer),
    sa.column("spec", sa.JSON),
    sa.column("kind", sa.String),
)


def upgrade() -> None:
    op.add_column("jobs", sa.Column("kind", sa.String(16), nullable=False, server_default="sweep"))
    connection = op.get_bind()
    for job_id, spec in connection.execute(sa.select(jobs.c.id, jobs.c.spec)).all():
        kind = spec.get("kind") if isinstance(spec, dict) else None
        if kind and kind != "sweep":
            connection.execute(jobs.update().where(jobs.c.id == job_id).values(kind=str(kind)))


def downgrade() -> None:
    """The column goes; the kind stays in each spec, where the older code reads it."""
    op.drop_column("jobs", "kind")  # in place on both: see the docstring
