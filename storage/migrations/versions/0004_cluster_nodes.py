"""cluster_nodes: Ray nodes as they announced themselves (hardware target, machine, providers)

Revision ID: 0004_cluster_nodes
Revises: 0003_typed_results

Create Date: 2026-12-03 10:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_cluster_nodes"
down_revision = "0003_typed_results"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_nodes",
        sa.Column("node_id", sa.String(64), primary_key=True),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("hardware", sa.JSON(), nullable=False),
        sa.Column("providers", sa.JSON(), nullable=False),
        sa.Column("alive", sa.Boolean(), nullable=False),
        sa.Column("announced_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_cluster_nodes_target", "cluster_nodes", ["target"])


def downgrade() -> None:
    op.drop_index("ix_cluster_nodes_target", table_name="cluster_nodes")
    op.drop_table("cluster_nodes")
