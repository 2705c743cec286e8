"""serving_point_samples: each load point's raw per-request timings, kept apart from the point

Revision ID: 0015_point_samples
Revises: 0014_model_origin

Create Date: 2026-12-09 10:20:00

A serving study's point kept its percentiles but no request's latency, so its p50 and p99 could
not be recomputed or its distribution drawn, while a sweep's result kept its raw samples
(result_samples). One row per load point, written in the point's own transaction; its job's
deletion (ON DELETE CASCADE through serving_points) deletes it. The arrays are binary
(backend/serving/samples.py says how they are packed, and `encoding` names it): as JSON lists
they took about 20 bytes a request. Points stored before this revision have no row.

A new table, on SQLite too: no column of an existing table changes, so nothing is copied and
nothing cascades away (0011 says why that matters). Downgrade drops the table, points kept.
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_point_samples"
down_revision = "0014_model_origin"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "serving_point_samples",
        sa.Column(
            "point_id",
            sa.Integer(),
            sa.ForeignKey("serving_points.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("encoding", sa.String(32), nullable=False),
        sa.Column("kept", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.LargeBinary(), nullable=False),
        sa.Column("sent_s", sa.LargeBinary(), nullable=False),
        sa.Column("scheduled_s", sa.LargeBinary(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("serving_point_samples")
