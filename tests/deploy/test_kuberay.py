"""deploy/kuberay is checked against the code, so the manifest cannot drift from it.

What the nodes announce is what backend/cluster/targets.py asks for; every OPTIBOARD_* name is a
declared setting; images, working folders, commands, ports and the Ray version are the ones the
Dockerfile, scripts/ and requirements actually provide. (The Kubernetes API server is not here:
the schema is checked by KubeRay's CRD where `kubectl apply` runs.)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import settings
from backend.cluster import auth, targets
from backend.specs import Configuration

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "deploy" / "kuberay"


def _documents(name: str) -> dict[str, dict[str, Any]]:
    docs = list(yaml.safe_load_all((FOLDER / name).read_text()))
    return {d["kind"]: d for d in docs if d}


@pytest.fixture(scope="module")
def manifest() -> dict[str, dict[str, Any]]:
    return _documents("raycluster.yaml")


def _cluster(manifest: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return manifest["RayCluster"]


def _containers(cluster: dict[str, Any]) -> list[dict[str, Any]]:
    spec = cluster["spec"]
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def _announced(group: dict[str, Any]) -> dict[str, float]:
    """The custom resources as KubeRay passes them to `ray start --resources` (quotes trimmed)."""
    return json.loads(group["rayStartParams"]["resources"].strip("'\"` "))


def _as_ray_node(group: dict[str, Any]) -> dict[str, Any]:
    """What Ray would list for one node of the group (ray.nodes() shape)."""
    (container,) = group["template"]["spec"]["containers"]
    gpus = int(container["resources"].get("limits", {}).get("nvidia.com/gpu", 0))
    return {
        "Alive": True,
        "Resources": {**_announced(group), "GPU": gpus} if gpus else _announced(group),
    }


def test_each_worker_group_announces_what_the_code_asks_for(manifest) -> None:
    groups = {g["groupName"]: g for g in _cluster(manifest)["spec"]["workerGroupSpecs"]}
    assert set(groups) == {"cpu-xeon", "gpu-h200"}
    for group in groups.values():
        announced = _announced(group)
        (target,) = targets.targets_of(announced)
        Configuration(precision="fp32", target=target)  # a name a sweep accepts
        assert announced == targets.node_resources(target)  # what `cluster join` starts with
    cpu_node, gpu_node = _as_ray_node(groups["cpu-xeon"]), _as_ray_node(groups["gpu-h200"])
    on_cpu = Configuration(precision="fp32", target="xeon")
    on_gpu = Configuration(precision="fp16", provider="cuda", target="h200")
    assert targets.unplaceable(on_cpu, [cpu_node]) is None
    assert targets.unplaceable(on_gpu, [gpu_node]) is None
    assert "GPU" in targets.unplaceable(replace_target(on_gpu, "xeon"), [cpu_node])
    two = Configuration(precision="fp16", provider="cuda", target="h200", replicas=2)
    assert "2 GPU(s)" in targets.unplaceable(two, [gpu_node])  # one GPU per pod here
    (gpu_container,) = groups["gpu-h200"]["template"]["spec"]["containers"]
    limits = gpu_container["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == gpu_container["resources"]["requests"]["nvidia.com/gpu"]


def replace_target(config: Configuration, target: str) -> Configuration:
    return Configuration.from_dict({**config.to_dict(), "target": target})


def test_images_folders_and_commands_are_the_ones_the_repository_builds(manifest) -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    (workdir,) = re.findall(r"^WORKDIR (\S+)$", dockerfile, re.M)
    cluster = _cluster(manifest)
    for container in _containers(cluster):
        repository, _, tag = container["image"].partition(":")
        assert repository == "optiboard" and tag in {"latest", "gpu"}
        assert container["workingDir"] == workdir
        assert _env(container)["PATH"]["value"].startswith(f"{workdir}/.venv/bin:")
        if "ray-" in container["name"]:
            assert _env(container)["PYTHONPATH"]["value"] == workdir  # Ray's workers import us
            assert "command" not in container  # KubeRay generates `ray start`
    (gpu,) = [g for g in cluster["spec"]["workerGroupSpecs"] if g["groupName"].startswith("gpu")]
    assert gpu["template"]["spec"]["containers"][0]["image"] == "optiboard:gpu"
    head = {
        c["name"]: c for c in cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    }
    assert list(head)[0] == "ray-head"  # KubeRay's Ray container is the first one
    worker_script = ROOT / head["worker"]["command"][0]
    assert os.access(worker_script, os.X_OK)
    assert "-m backend.queue.worker" in worker_script.read_text()
    dashboard = head["dashboard"]["command"]
    assert dashboard[:4] == [".venv/bin/python", "-m", "streamlit", "run"]
    assert (ROOT / dashboard[4]).is_file()
    (port,) = [a.split("=")[1] for a in dashboard if a.startswith("--server.port=")]
    (exposed,) = head["dashboard"]["ports"]
    assert exposed["containerPort"] == int(port)
    service = manifest["Service"]["spec"]
    assert service["selector"]["ray.io/cluster"] == cluster["metadata"]["name"]
    assert service["ports"][0]["targetPort"] == exposed["name"]


def test_every_setting_named_exists_and_the_head_is_reached_where_it_listens(manifest) -> None:
    cluster = _cluster(manifest)
    for container in _containers(cluster):
        for name in _env(container):
            assert not name.startswith("OPTIBOARD_") or name in settings.SETTINGS, name
    head_spec = cluster["spec"]["headGroupSpec"]
    head = {c["name"]: c for c in head_spec["template"]["spec"]["containers"]}
    gcs_port = int(head_spec["rayStartParams"].get("port", "6379"))
    assert any(p["containerPort"] == gcs_port for p in head["ray-head"]["ports"])
    assert head_spec["rayStartParams"]["num-cpus"] == "0"  # the head measures nothing
    # Ray's job API runs commands on the head: loopback only (kubectl port-forward to see it)
    assert head_spec["rayStartParams"]["dashboard-host"] == "127.0.0.1"
    for name in ("worker", "dashboard"):
        env = _env(head[name])
        assert env[settings.RAY_ADDRESS.name]["value"] == f"127.0.0.1:{gcs_port}"
        ref = env[settings.DATABASE_URL.name]["valueFrom"]["secretKeyRef"]
        secret = _documents("secret.example.yaml")["Secret"]
        assert secret["metadata"]["name"] == ref["name"] and ref["key"] in secret["stringData"]
        assert secret["stringData"][ref["key"]].startswith("postgresql+psycopg://")
        data = env[settings.DATA_DIR.name]["value"]
        assert data in {m["mountPath"] for m in head[name]["volumeMounts"]}
    # the worker's Ray driver finds the head's raylet socket under the shared /tmp/ray
    for name in ("ray-head", "worker"):
        assert "/tmp/ray" in {m["mountPath"] for m in head[name]["volumeMounts"]}
    for group in cluster["spec"]["workerGroupSpecs"]:
        (container,) = group["template"]["spec"]["containers"]
        cache = _env(container)[settings.CLUSTER_CACHE_DIR.name]["value"]
        assert cache in {m["mountPath"] for m in container["volumeMounts"]}


def test_the_ray_version_is_the_pinned_one_and_the_cluster_page_points_here(manifest) -> None:
    import ray

    pinned = re.search(r"^ray==(\S+)$", (ROOT / "requirements-base.txt").read_text(), re.M)
    assert _cluster(manifest)["spec"]["rayVersion"] == pinned.group(1) == ray.__version__
    page = (ROOT / "docs" / "cluster.md").read_text()
    assert "deploy/kuberay/raycluster.yaml" in page
    assert "deploy/kuberay/secret.example.yaml" in page


def test_every_ray_process_asks_for_the_token_and_the_dashboard_holds_none(manifest) -> None:
    """Ray's token authentication (backend/cluster/auth.py): without it anyone who reaches the
    cluster runs code on every node; the dashboard, the one process users reach, never talks to
    Ray and does not get the token."""
    secret = _documents("secret.example.yaml")["Secret"]
    containers = _containers(_cluster(manifest))
    ray_processes = [c for c in containers if c["name"] != "dashboard"]
    groups = len(_cluster(manifest)["spec"]["workerGroupSpecs"])
    assert sorted(c["name"] for c in ray_processes) == [
        "ray-head",
        *["ray-worker"] * groups,
        "worker",
    ]
    for container in ray_processes:
        env = _env(container)
        assert env[auth.MODE]["value"] == "token"
        ref = env[auth.TOKEN]["valueFrom"]["secretKeyRef"]
        assert secret["metadata"]["name"] == ref["name"] and ref["key"] in secret["stringData"]
    (dashboard,) = (c for c in containers if c["name"] == "dashboard")
    assert auth.TOKEN not in _env(dashboard)
