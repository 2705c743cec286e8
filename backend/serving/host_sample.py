"""One load point on the real server with what it cost: Triton's executions behind it (its own
statistics endpoint, by batch size) and the CPU that the generator and the server spent.

The cost measurement (serving.costmodel) reads every simulation input from such samples.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any

from backend.host import own_cpu_s
from backend.launch.services import group_stats
from backend.serving.loadgen import run_load
from backend.serving.server import ServerEndpoint
from backend.serving.types import LoadPoint, LoadSpec
from backend.specs import MEASURE_PRESETS


@dataclass(frozen=True)
class Executions:
    """Triton's per-execution statistics between two snapshots, by batch size."""

    count: dict[int, int]  # batch size -> executions
    busy_ms: dict[int, float]  # batch size -> mean compute_input + compute_infer + output
    requests: int  # successful requests
    queue_ms: float  # mean per request
    response_ms: float  # mean compute_input + compute_output per request

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Executions:
        by_size = {k: {int(b): v for b, v in data[k].items()} for k in ("count", "busy_ms")}
        return cls(**{**data, **by_size})


@dataclass(frozen=True)
class HostSample:
    """One measured load point, Triton's executions behind it, and the generator's CPU."""

    point: LoadPoint
    executions: Executions
    client_cpu_ms: float  # the load generator's CPU time per request (user + system)
    server_cpu_ms: float  # Triton's CPU time per request (server, backend stubs, ONNX Runtime)
    wall_s: float  # how long the sample ran, warm-up included (as the CPU times)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "point": self.point.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostSample:
        executions = Executions.from_dict(data["executions"])
        return cls(
            **{**data, "point": LoadPoint.from_dict(data["point"]), "executions": executions}
        )


def _stats(endpoint: ServerEndpoint) -> dict:
    url = f"http://{endpoint.http_url}/v2/models/{endpoint.model}/stats"
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())["model_stats"][0]


def _executions(before: dict, after: dict) -> Executions:
    def by_size(stats: dict) -> dict[int, tuple[int, int]]:
        return {
            int(b["batch_size"]): (
                int(b["compute_infer"]["count"]),
                sum(int(b[k]["ns"]) for k in ("compute_input", "compute_infer", "compute_output")),
            )
            for b in stats["batch_stats"]
        }

    def total(stats: dict, key: str) -> tuple[int, int]:
        item = stats["inference_stats"][key]
        return int(item["count"]), int(item["ns"])

    old, new = by_size(before), by_size(after)
    count, busy = {}, {}
    for size, (executions, ns) in sorted(new.items()):
        done = executions - old.get(size, (0, 0))[0]
        if done:
            count[size] = done
            busy[size] = (ns - old.get(size, (0, 0))[1]) / done / 1e6
    requests = total(after, "success")[0] - total(before, "success")[0]

    def per_request(*keys: str) -> float:
        ns = sum(total(after, k)[1] - total(before, k)[1] for k in keys)
        return ns / max(requests, 1) / 1e6

    return Executions(
        count,
        busy,
        requests,
        per_request("queue"),
        per_request("compute_input", "compute_output"),
    )


def group_cpu_ms(group: int) -> float:
    """CPU time (user + system) of every live process in a process group, from /proc."""
    ticks = sum(int(fields[11]) + int(fields[12]) for fields in group_stats(group))
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def sample_load(endpoint: ServerEndpoint, spec: LoadSpec, server_group: int) -> HostSample:
    """Run one load point in this process (a child: its CPU is the generator's alone) and
    read the CPU that the server's process group spent meanwhile."""
    before, started = _stats(endpoint), time.perf_counter()
    client0, server0 = 1000 * own_cpu_s(), group_cpu_ms(server_group)
    point = run_load(endpoint, spec, MEASURE_PRESETS["quick"])
    client1, server1 = 1000 * own_cpu_s(), group_cpu_ms(server_group)
    wall, after = time.perf_counter() - started, _stats(endpoint)
    executions = _executions(before, after)
    requests = max(executions.requests, 1)
    return HostSample(
        point, executions, (client1 - client0) / requests, (server1 - server0) / requests, wall
    )
