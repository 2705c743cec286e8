"""jobs.submitted_by: who queued the job, so queued jobs can be capped per user

Revision ID: 0008_job_submitter
Revises: 0007_signin_throttles

Create Date: 2026-12-04 13:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_job_submitter"
down_revision = "0007_signin_throttles"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("submitted_by", sa.String(255), nullable=True))
        batch.create_index("ix_jobs_submitted_by", ["submitted_by"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_submitted_by")
        batch.drop_column("submitted_by")
