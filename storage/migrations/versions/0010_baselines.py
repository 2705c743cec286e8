"""baselines: jobs pinned as baselines, which later re-runs are judged against

Revision ID: 0010_baselines
Revises: 0009_session_generation

Create Date: 2026-12-04 19:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_baselines"
down_revision = "0009_session_generation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "baselines",
        sa.Column(
            "job_id",
            sa.Integer(),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("pinned_by", sa.String(255), nullable=False),
        sa.Column("pinned_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("baselines")
