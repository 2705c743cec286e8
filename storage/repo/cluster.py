"""Ray nodes as they announced themselves; the Optimize page's target list is read from here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from storage.clock import db_utcnow
from storage.db import session_scope
from storage.repo.rows import row_of
from storage.schema import ClusterNode


@dataclass(frozen=True)
class ClusterNodeRow:
    node_id: str
    target: str
    hostname: str
    hardware: dict[str, Any]
    providers: list[Any]
    alive: bool
    announced_at: datetime


def record_nodes(announcements: list[dict[str, Any]]) -> None:
    """Store what every alive node said; nodes that did not answer this time are marked gone."""
    seen = {a["node_id"] for a in announcements}
    with session_scope() as session:
        for a in announcements:
            node = session.get(ClusterNode, a["node_id"]) or ClusterNode(node_id=a["node_id"])
            node.target, node.hostname = a["target"], a["hostname"]
            node.hardware, node.providers = a["hardware"], a["providers"]
            node.alive, node.announced_at = True, db_utcnow()
            session.add(node)
        session.execute(
            update(ClusterNode).where(ClusterNode.node_id.not_in(seen)).values(alive=False)
        )


def list_nodes(alive_only: bool = True) -> list[ClusterNodeRow]:
    with session_scope() as session:
        query = select(ClusterNode).order_by(ClusterNode.target, ClusterNode.node_id)
        if alive_only:
            query = query.where(ClusterNode.alive.is_(True))
        return [row_of(ClusterNodeRow, n) for n in session.scalars(query)]
