"""One real local Ray cluster per test module (Ray's own cluster utilities), and PostgreSQL.

Nodes are heavy on a 2-core machine, so each module starts one cluster: a head of target
`alpha` and two nodes of target `beta`, one CPU each, no dashboard, an 80 MB object store. Each
node has its own model cache folder (through the raylet's environment), so a test can see on
which node a model arrived, and that it arrived once per node. Every Ray process of these tests
asks for Ray's token authentication and holds one token (`ray_tokens`), as the product's own
`join` and worker connection do.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend.cluster import auth
from backend.cluster.targets import node_resources
from tests.pages.conftest import fresh_page_caches, route_through_app_py  # noqa: F401
from tests.postgres import postgres_server, postgres_url  # noqa: F401

STORE_BYTES = 80 * 1024 * 1024


@dataclass
class RayCluster:
    cluster: Any
    head: Any
    betas: list[Any]
    caches: dict[str, Path]  # node id -> that node's model cache folder

    def cache_of(self, node: Any) -> Path:
        return self.caches[node.node_id]


def _node_args(target: str, cache: Path) -> dict[str, Any]:
    return {
        "num_cpus": 1,
        "resources": node_resources(target),
        "object_store_memory": STORE_BYTES,
        "env_vars": {"OPTIBOARD_CLUSTER_CACHE_DIR": str(cache)},
    }


@pytest.fixture(scope="session")
def ray_tokens() -> Iterator[str]:
    """Token authentication on, with one token for the whole run (Ray reads the mode and the
    token once per process), for every Ray process the tests start: heads, nodes, drivers."""
    saved = {name: os.environ.get(name) for name in (auth.MODE, auth.TOKEN)}
    os.environ.update({auth.MODE: "token", auth.TOKEN: secrets.token_hex(16)})
    try:
        yield os.environ[auth.TOKEN]
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def ray_cluster(ray_tokens: str) -> Iterator[RayCluster]:
    import ray
    from ray.cluster_utils import Cluster

    from backend.cluster.dispatch import connect

    root = Path(tempfile.mkdtemp(prefix="optiboard-ray-test-"))
    head_cache = root / "alpha"
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**_node_args("alpha", head_cache), "include_dashboard": False},
    )
    betas = [cluster.add_node(**_node_args("beta", root / f"beta{i}")) for i in range(2)]
    cluster.wait_for_nodes()
    caches = {cluster.head_node.node_id: head_cache}
    caches.update({node.node_id: root / f"beta{i}" for i, node in enumerate(betas)})
    connect(cluster.address)  # the worker's own way in
    try:
        yield RayCluster(cluster, cluster.head_node, betas, caches)
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)
