"""What ran a number, in words: the runtime and its version, the hardware and the host.

Every measured result stores its process's environment (backend.host.describe_environment and
the runtime's own version); these turn it into the columns and lines that pages, exports and
the command line show beside the numbers, so no figure is read without what produced it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def software(environment: dict[str, Any]) -> str:
    """'onnxruntime 1.32.0 (default env), Python 3.11.7'; '' for a result that never ran."""
    runtime, version = environment.get("backend"), environment.get("backend_version")
    if not runtime:
        return ""
    text = f"{runtime} {version}" if version else str(runtime)
    if env := environment.get("runtime_env"):
        text += f" ({env} env)"
    if python := environment.get("python"):
        text += f", Python {python}"
    return text


def hardware(environment: dict[str, Any], provider: str = "cpu") -> str:
    """The device that ran it: the GPU(s) for a GPU provider, else the CPU and its cores."""
    gpus = environment.get("gpus") or []
    if provider != "cpu" and gpus:
        names = list(dict.fromkeys(str(g.get("name", "GPU")) for g in gpus))
        return " + ".join(names) + (f" (x{len(gpus)})" if len(gpus) > 1 else "")
    cpu = environment.get("cpu")
    if not cpu:
        return ""
    cores = environment.get("cpu_count_logical")
    return f"{cpu}, {cores} logical cores" if cores else str(cpu)


def ran_on(environment: dict[str, Any]) -> str:
    """Where it ran: a cluster's target · host · node (· GPU), else the local host's name."""
    where = environment.get("cluster") or {}
    if not where:
        return str(environment.get("hostname") or "")
    parts = [where.get("target") or "any", where.get("hostname") or "?"]
    parts.append(f"node {str(where.get('node_id', ''))[:8]}")
    if where.get("gpu_ids"):
        parts.append(f"GPU {','.join(where['gpu_ids'])}")
    return " · ".join(parts)


def what_ran(rows: Iterable[tuple[str, str, str]]) -> list[str]:
    """One line per distinct (software, hardware, host) among rows, in first-seen order:
    'onnxruntime 1.32.0 (default env), Python 3.11.7 on AMD EPYC, 2 logical cores (host vm)'."""
    lines = []
    for soft, hard, host in dict.fromkeys(rows):
        if not soft and not hard:
            continue
        line = soft or "an unrecorded runtime"
        line += f" on {hard}" if hard else ""
        line += f" (host {host})" if host else ""
        lines.append(line)
    return lines


def ran_line(runtime: str, facts: dict[str, Any], environment: dict[str, Any] | None = None) -> str:
    """What ran a generation runtime's points, as the CLI and the dashboard say it: versions,
    providers, device, environment and, per runtime, the precision it computed and kept its KV
    cache in; then the hardware and host (points stored before they kept their host's
    environment have none)."""
    versions = ", ".join(f"{k} {v}" for k, v in facts.get("versions", {}).items())
    placed = facts.get("device_type", "")
    if placed.lower() in (p.lower() for p in facts.get("providers", [])):
        placed = ""  # ORT GenAI's "CPU" beside provider "cpu" said it twice
    providers = ", ".join(facts.get("providers", []))
    line = f"{runtime}: {versions}; providers {providers} {placed}".rstrip()
    if "runtime_env" in facts:
        line += f"; environment {facts['runtime_env']}"
    if "compiled" in facts:  # the torch runtime: what it loaded and how it ran
        line += (
            f"; {facts['inference_precision']} weights and KV cache, attention "
            f"{facts['attention']}, "
            + (f"{facts['projections']}, " if "projections" in facts else "")
            + f"{facts['compiled']}, CUDA graphs "
            f"{'on' if facts['cuda_graphs'] else 'off'}"
        )
    elif "kv_cache_precision" in facts:  # OpenVINO's plugin defaults, ORT GenAI's graph types
        source = facts.get("precision_from", "the plugin's defaults")
        line += (
            f"; computes in {facts['inference_precision']}, KV cache in "
            f"{facts['kv_cache_precision']} ({source})"
        )
        if "int4_compute" in facts:
            line += f", {facts['int4_compute']}"
    if environment and (device := hardware(environment, environment.get("device", "cpu"))):
        line += f"; on {device}" + (f" (host {host})" if (host := ran_on(environment)) else "")
    return line
