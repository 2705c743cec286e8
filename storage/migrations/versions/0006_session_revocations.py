"""session_revocations: signed-out session cookies, kept until they would have expired

Revision ID: 0006_session_revocations
Revises: 0005_serving_points

Create Date: 2026-12-03 14:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_session_revocations"
down_revision = "0005_serving_points"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_revocations",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_session_revocations_expires_at", "session_revocations", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_session_revocations_expires_at", table_name="session_revocations")
    op.drop_table("session_revocations")
