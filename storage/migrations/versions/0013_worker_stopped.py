"""workers.stopped_at: a worker that exits says so, instead of looking alive until its heartbeat
ages out

Revision ID: 0013_worker_stopped
Revises: 0012_job_kind

Create Date: 2026-12-07 20:55:00

A `worker --once` (and the CLI commands that run the queue in place) ended with its row still
counted among the workers alive for the heartbeat window (30 s): the sidebar said "2 workers
alive" beside the one running, and a page let a job be queued for a worker that was gone. The
column is empty for every row already there (alive or not, their heartbeats decide, as before).
Added and dropped in place on SQLite (0012 says why).
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_worker_stopped"
down_revision = "0012_job_kind"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("stopped_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("workers", "stopped_at")
