"""The Optimize page's cluster pickers: hardware targets and replicas (widgets only).

Shown only where a Ray cluster is configured and its nodes have announced their targets
(backend/cluster/targets.py). Kept apart from pages/optimize.py so the page reads as its flow.
"""

from __future__ import annotations

import streamlit as st

from backend.cluster.targets import TargetInfo
from backend.specs import SweepSpec
from pages.components.url_state import bound_multiselect, set_url


def target_picker(available: dict[str, TargetInfo]) -> list[str]:
    """The targets every configuration runs on, bound to ?targets=; none picked: any node."""
    return bound_multiselect(
        "Hardware targets",
        list(available),
        "targets",
        format_func=lambda n: f"{n} · {available[n].nodes} node(s) · {available[n].description}",
        help="Every configuration runs on each target picked; Compare shows them side by "
        "side. None picked: any node of the cluster.",
    )


def replicas_input(prefill: SweepSpec) -> int:
    """Data-parallel copies per configuration on one node, bound to ?replicas= when above 1."""
    replicas = int(
        st.number_input(
            "Replicas (data-parallel copies on one node's devices)",
            min_value=1,
            max_value=64,
            value=prefill.replicas,
            key="replicas",
            help="N copies run at once on N GPUs (or share the CPU) of one node; the result "
            "gives aggregate and per-device throughput.",
        )
    )
    set_url("replicas", replicas if replicas > 1 else None)
    return replicas
