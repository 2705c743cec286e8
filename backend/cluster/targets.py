"""Hardware targets: how a node says what it is, and what a configuration asks Ray for.

A node joins with `python -m backend.cluster join --target <name>`, which starts Ray with two
custom resources: `target:<name>` (which machine kind this is) and `measure_slot: 1` (one
measurement owns the node's CPUs at a time). Why a slot and not `num_cpus = node CPUs`: nodes of
one target may differ in core count, Ray's own CPU accounting is shared with its helpers, and a
slot says exactly "no two measurements on this node's cores" whatever the size of the machine. A
CPU measurement asks for the whole slot; a GPU measurement asks for one GPU and a small share of
the slot, so GPU measurements run side by side on their own devices but never beside a CPU one.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from backend.specs import Configuration

TARGET_PREFIX = "target:"
MEASURE_SLOT = "measure_slot"
GPU_PROVIDERS = frozenset({"cuda", "tensorrt"})
GPU_SLOT_SHARE = 0.01  # up to 100 GPU measurements of one node may share its slot
TARGET_SHARE = 0.001  # the target resource is a label: any number of tasks may hold it


def target_resource(target: str) -> str:
    return f"{TARGET_PREFIX}{target}"


def needs_gpu(config: Configuration) -> bool:
    return config.provider in GPU_PROVIDERS


@dataclass(frozen=True)
class Ask:
    """What one task (one replica) of a configuration asks Ray for."""

    num_cpus: float
    num_gpus: float
    resources: dict[str, float]

    def options(self) -> dict[str, Any]:
        return {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus, "resources": self.resources}

    def bundle(self) -> dict[str, float]:
        """The same ask as a placement-group bundle (replicas reserve all bundles at once)."""
        bundle = dict(self.resources)
        if self.num_gpus:
            bundle["GPU"] = self.num_gpus
        return bundle


def ask_for(config: Configuration) -> Ask:
    """One replica's resources: GPU + slot share, or the whole slot split among CPU replicas."""
    resources: dict[str, float] = {}
    if config.target:
        resources[target_resource(config.target)] = TARGET_SHARE
    if needs_gpu(config):
        resources[MEASURE_SLOT] = GPU_SLOT_SHARE
        return Ask(num_cpus=0, num_gpus=1, resources=resources)
    resources[MEASURE_SLOT] = 1.0 / config.replicas
    return Ask(num_cpus=0, num_gpus=0, resources=resources)


def node_resources(target: str) -> dict[str, float]:
    """The custom resources a node of this target starts with."""
    return {target_resource(target): 1.0, MEASURE_SLOT: 1.0}


def join_command(address: str, target: str, num_gpus: int | None = None) -> list[str]:
    """`ray start` for a worker node of this target (GPUs are detected by Ray unless given)."""
    import json

    command = ["ray", "start", f"--address={address}"]
    command.append(f"--resources={json.dumps(node_resources(target))}")
    if num_gpus is not None:
        command.append(f"--num-gpus={num_gpus}")
    return command


def targets_of(resources: dict[str, float]) -> list[str]:
    return sorted(k.removeprefix(TARGET_PREFIX) for k in resources if k.startswith(TARGET_PREFIX))


def unplaceable(config: Configuration, nodes: list[dict[str, Any]]) -> str | None:
    """Why no alive node can ever run this configuration (Ray would wait forever), or None."""
    ask = ask_for(config)
    alive = [n for n in nodes if n.get("Alive")]
    fitting = [
        n
        for n in alive
        if all(n["Resources"].get(k, 0) >= v * config.replicas for k, v in ask.resources.items())
    ]
    where = f"of target {config.target!r} " if config.target else ""
    join = f"python -m backend.cluster join --target {config.target or '<name>'}"
    if not fitting:
        return f"No node {where}is in the Ray cluster; start one with `{join}` or pick another."
    gpus = ask.num_gpus * config.replicas
    if gpus and not any(n["Resources"].get("GPU", 0) >= gpus for n in fitting):
        return (
            f"No node {where}has {gpus:g} GPU(s) for this configuration; "
            "pick a CPU provider, fewer replicas, or join a node with GPUs."
        )
    return None


def describe_node() -> dict[str, Any]:
    """What this node is: runs on the node itself, inside a Ray task (see survey())."""
    import ray

    from backend.hardware import cpu_features
    from backend.host import describe_environment
    from backend.launch import isolation
    from backend.runtimes import all_provider_statuses

    context = ray.get_runtime_context()
    node_id = context.get_node_id()
    resources = next((n["Resources"] for n in ray.nodes() if n["NodeID"] == node_id), {})
    providers = [
        {"runtime": runtime, **s.__dict__}
        for runtime, statuses in all_provider_statuses().items()
        for s in statuses
    ]
    return {
        "node_id": node_id,
        "target": ",".join(targets_of(resources)),
        "hostname": socket.gethostname(),
        "hardware": {
            **describe_environment(),
            "cpu_flags": cpu_features(),
            "gpus_in_ray": resources.get("GPU", 0),
            "isolation": isolation.this_host().to_dict(),  # what its children run under
        },
        "providers": providers,
    }


def survey(timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """Ask every alive node to describe itself (a task pinned to it); the head stores them.

    A node too busy to answer within timeout_s, or one that left while asked, is left out of
    this survey, not an error: its measurements still run (or go elsewhere), and it is listed
    again once it answers.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(describe_node)
    refs = [
        remote.options(
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
        ).remote()
        for n in ray.nodes()
        if n.get("Alive") and targets_of(n["Resources"])
    ]
    ready, late = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    for ref in late:
        ray.cancel(ref, force=True)
    answers = []
    for ref in ready:
        try:
            answers.append(ray.get(ref))
        except ray.exceptions.RayError:  # the node left while asked: it is not there to list
            continue
    return answers


@dataclass(frozen=True)
class TargetInfo:
    """One hardware target as its nodes announced it, for the Optimize page."""

    name: str
    nodes: int
    description: str  # CPU and GPU models, e.g. "Xeon 8480 · 8x NVIDIA H200 (143 GB)"
    providers: dict[str, list[str]]  # runtime -> providers available on every node of it


def available() -> list[TargetInfo]:
    """Targets of the nodes alive at the last survey; empty without a configured cluster."""
    import settings
    from storage.repo import cluster as cluster_store

    if not settings.RAY_ADDRESS.get():
        return []
    by_target: dict[str, list] = {}
    for node in cluster_store.list_nodes():
        for name in filter(None, node.target.split(",")):
            by_target.setdefault(name, []).append(node)
    infos = []
    for name, nodes in sorted(by_target.items()):
        hardware = nodes[0].hardware
        gpus = hardware.get("gpus") or []
        parts = [str(hardware.get("cpu", "?"))]
        if gpus:
            memory = gpus[0].get("memory_total_mb", 0) / 1024
            parts.append(f"{len(gpus)}x {gpus[0].get('name')} ({memory:.0f} GB)")
        providers: dict[str, set[str]] | None = None
        for node in nodes:
            here: dict[str, set[str]] = {}
            for p in node.providers:
                if p.get("available"):
                    here.setdefault(p["runtime"], set()).add(p["name"])
            providers = (
                here
                if providers is None
                else {r: providers[r] & here.get(r, set()) for r in providers}
            )
        listed = {r: sorted(names) for r, names in (providers or {}).items() if names}
        infos.append(TargetInfo(name, len(nodes), " · ".join(parts), listed))
    return infos
