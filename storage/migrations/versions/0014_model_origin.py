"""models.origin, source_model_id, source_job_id: which model and which job made a library model

Revision ID: 0014_model_origin
Revises: 0013_worker_stopped

Create Date: 2026-12-08 09:40:00

A generation job's weight-only copy ("llama (int4 rtn b32 sym)") and a second copy of an upload
("mlp (copy of #3)") were library models like any upload: only an artifact's meta
("variant_of") or the name said where they came from, and no row said which job made them.
Both ids are foreign keys with ON DELETE SET NULL: deleting the source model (which deletes its
jobs) keeps the variant, whose origin then reads "source model deleted".

Rows already there are filled in Python, one code path for SQLite and PostgreSQL: a model whose
artifact meta names "variant_of" is a variant of that model (if it is still there), made by the
job whose events say "stored <name> as model <id>" (a job of that source); among the other
rows, one whose sha256 an older row has is a copy of the oldest such row.

SQLite adds the columns in place with their REFERENCES clause written out (Alembic's add_column
on SQLite refuses a foreign key and its batch copy would drop the models table, which with
foreign keys on deletes every artifact and job through their ON DELETE CASCADE, 0011 says
more); the downgrade drops them in place (SQLite 3.35 and later, which 0011 already requires).
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0014_model_origin"
down_revision = "0013_worker_stopped"
branch_labels = None
depends_on = None

models = sa.table(
    "models",
    sa.column("id", sa.Integer),
    sa.column("sha256", sa.String),
    sa.column("origin", sa.String),
    sa.column("source_model_id", sa.Integer),
    sa.column("source_job_id", sa.Integer),
)
artifacts = sa.table("artifacts", sa.column("model_id", sa.Integer), sa.column("meta", sa.JSON))
jobs = sa.table("jobs", sa.column("id", sa.Integer), sa.column("model_id", sa.Integer))
events = sa.table("events", sa.column("job_id", sa.Integer), sa.column("message", sa.Text))
STORED = re.compile(r"stored .* as model (\d+)")  # backend/jobs/generation.py's event
REFERENCES = {"source_model_id": "models", "source_job_id": "jobs"}


def upgrade() -> None:
    connection = op.get_bind()
    op.add_column(
        "models", sa.Column("origin", sa.String(16), nullable=False, server_default="upload")
    )
    for column, parent in REFERENCES.items():
        if connection.dialect.name == "sqlite":
            op.execute(
                f"ALTER TABLE models ADD COLUMN {column} INTEGER "
                f"REFERENCES {parent} (id) ON DELETE SET NULL"
            )
        else:
            op.add_column(
                "models",
                sa.Column(column, sa.Integer, sa.ForeignKey(f"{parent}.id", ondelete="SET NULL")),
            )
    op.create_index("ix_models_source_model_id", "models", ["source_model_id"])
    _fill(connection)


def _fill(connection: sa.Connection) -> None:
    """Each older row's origin, from what it already said about itself (the docstring)."""
    rows = connection.execute(sa.select(models.c.id, models.c.sha256).order_by(models.c.id)).all()
    present = {row_id for row_id, _ in rows}
    made_from = {}
    for model_id, meta in connection.execute(sa.select(artifacts.c.model_id, artifacts.c.meta)):
        source = meta.get("variant_of") if isinstance(meta, dict) else None
        if isinstance(source, int):
            made_from[model_id] = source
    makers = _makers(connection)
    first_of = {}
    for model_id, sha256 in rows:
        if model_id in made_from:
            source = made_from[model_id] if made_from[model_id] in present else None
            job = makers.get((model_id, source)) if source is not None else None
            values = {"origin": "variant", "source_model_id": source, "source_job_id": job}
        elif sha256 in first_of:
            values = {"origin": "copy", "source_model_id": first_of[sha256]}
        else:
            first_of[sha256] = model_id
            continue
        connection.execute(models.update().where(models.c.id == model_id).values(**values))


def _makers(connection: sa.Connection) -> dict[tuple[int, int], int]:
    """(model stored, the job's own model) -> the first job whose events say it stored it."""
    query = (
        sa.select(events.c.job_id, jobs.c.model_id, events.c.message)
        .join(jobs, jobs.c.id == events.c.job_id)
        .where(events.c.message.like("stored % as model %"))
        .order_by(events.c.job_id)
    )
    found: dict[tuple[int, int], int] = {}
    for job_id, source, message in connection.execute(query):
        match = STORED.fullmatch(message or "")
        if match:
            found.setdefault((int(match[1]), source), job_id)
    return found


def downgrade() -> None:
    """The columns go, in place; the artifacts' meta and the names still say what they said."""
    op.drop_index("ix_models_source_model_id", table_name="models")
    for column in ("source_job_id", "source_model_id", "origin"):
        op.drop_column("models", column)  # in place on both: see the docstring
