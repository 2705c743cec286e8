"""serving_points: each load point (and latency curve) a serving study measured on Triton

Revision ID: 0005_serving_points
Revises: 0004_cluster_nodes

Create Date: 2026-12-03 13:50:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_serving_points"
down_revision = "0004_cluster_nodes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "serving_points",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "job_id", sa.Integer(), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("point_key", sa.String(255), nullable=False),
        sa.Column("configuration", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("job_id", "point_key", name="uq_serving_point"),
    )
    op.create_index("ix_serving_points_job_id", "serving_points", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_serving_points_job_id", table_name="serving_points")
    op.drop_table("serving_points")
