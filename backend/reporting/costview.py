"""The static cost of a model as the Graph page and the CLI show it: totals and a node table."""

from __future__ import annotations

from typing import Any

from backend.commas import comma_list
from backend.counts import scaled
from backend.errors import UserError
from backend.models.cost import ModelCost, example_dims, free_dims, missing_dims_sentence


def parse_dims(text: str) -> dict[str, int]:
    """'seq=128, past=0' -> {'seq': 128, 'past': 0}; one sentence for anything else."""
    dims: dict[str, int] = {}
    for part in comma_list(text):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit() or not name.strip():
            raise UserError(f"Dimensions take NAME=VALUE pairs such as seq=128, not {part!r}.")
        dims[name.strip()] = int(value)
    return dims


def dims_example(inputs: list[dict[str, Any]]) -> str:
    """The 'Other dimensions' box's example in the graph's own names: 'sequence_length=128,
    past_sequence_length=0', or seq=128 for a graph with no free dimension past the batch."""
    return example_dims(free_dims(inputs, {})) or "seq=128"


def dims_still_needed(inputs: list[dict[str, Any]], text: str) -> str | None:
    """What the count still needs before a child is started for it: the sentence naming every
    free dimension without a value (None: nothing), so a graph with free dimensions opens on
    a prompt instead of a refusal nobody caused."""
    missing = free_dims(inputs, parse_dims(text))
    return missing_dims_sentence(missing, "This graph") if missing else None


def totals(cost: ModelCost) -> dict[str, str]:
    return {
        "FLOPs": scaled(cost.flops),
        "FLOPs per sample": scaled(cost.flops_per_sample),
        "Parameters": scaled(cost.params),
        "Activations": scaled(cost.activation_bytes, "B"),
        "Batch": str(cost.batch_size),
    }


def node_rows(cost: ModelCost) -> list[dict[str, Any]]:
    """One row per node, largest FLOPs first; share is of the model's total."""
    total = cost.flops or 1
    rows = [
        {
            "node": node.name,
            "op": node.op_type,
            "FLOPs": node.flops,
            "share": node.flops / total,
            "parameters": node.params,
            "activation bytes": node.activation_bytes,
            "counted": node.counted,
        }
        for node in cost.nodes
    ]
    return sorted(rows, key=lambda row: -row["FLOPs"])


def uncounted_note(cost: ModelCost) -> str:
    if not cost.uncounted_ops:
        return ""
    return (
        "Counted as 0 FLOPs (no rule for these operators, or their shapes are unknown): "
        + ", ".join(cost.uncounted_ops)
        + "."
    )


def fixed_batch(inputs: list[dict[str, Any]]) -> int | None:
    """The batch a graph's inputs fix (a fixed-batch variant's 8), or None where a leading
    dimension is free and the count's batch size gives it its value."""
    leading = [value.get("shape")[0] for value in inputs if value.get("shape")]
    if not leading or not all(isinstance(d, int) and d > 0 for d in leading):
        return None
    return int(leading[0])
