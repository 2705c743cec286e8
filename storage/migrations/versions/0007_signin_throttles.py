"""signin_throttles: failed sign-ins per client address and per account, replacing the lockout

Revision ID: 0007_signin_throttles
Revises: 0006_session_revocations

Create Date: 2026-12-04 12:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_signin_throttles"
down_revision = "0006_session_revocations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signin_throttles",
        sa.Column("key", sa.String(400), primary_key=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("blocked_until", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_signin_throttles_updated_at", "signin_throttles", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_signin_throttles_updated_at", table_name="signin_throttles")
    op.drop_table("signin_throttles")
