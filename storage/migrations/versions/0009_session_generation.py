"""users.session_generation: a counter carried by every session; bumping it ends them all

Revision ID: 0009_session_generation
Revises: 0008_job_submitter

Create Date: 2026-12-04 13:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_session_generation"
down_revision = "0008_job_submitter"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(
            sa.Column("session_generation", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("session_generation")
