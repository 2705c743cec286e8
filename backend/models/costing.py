"""A stored model's compute cost as a viewer asks for it: counted in a limited child, never in the
web process.

ONNX and ONNX Runtime's symbolic shape inference size tensors from the dimensions the viewer
types (ORT's materialises ConstantOfShape outputs: a Shape->Concat->ConstantOfShape graph holds
seq^2 integers), so the counting runs in a child under the launcher's memory and CPU limits and a
time limit, sandboxed whenever bubblewrap works here (as upload parsing is). Before that, each
dimension is capped here (a sentence, no child), and the child refuses inputs over the input
limit before inference starts (cost.py).
"""

from __future__ import annotations

from pathlib import Path

from backend.errors import UserError
from backend.launch.children import run_parse
from backend.models.cost import ModelCost

MAX_DIM = 1 << 20  # 1,048,576: longer than any sequence a graph's cost is read at


def check_dims(batch_size: int, dims: dict[str, int]) -> None:
    """One sentence for a batch outside 1..MAX_DIM or a dimension outside 0..MAX_DIM (an empty
    past_sequence_length is a prompt's first pass); nothing is started."""
    ranges = {"batch size": (batch_size, 1)} | {name: (value, 0) for name, value in dims.items()}
    for name, (value, least) in ranges.items():
        if not least <= value <= MAX_DIM:
            raise UserError(
                f"{name} = {value:,} is outside {least} to {MAX_DIM:,}, the range compute cost "
                f"is counted for; give a {'larger' if value < least else 'smaller'} value."
            )


def cost_in_child(path: Path, batch_size: int, dims: dict[str, int], shown: str) -> ModelCost:
    """model_cost of the file at `path` in a limited child; UserError says why there is none."""
    check_dims(batch_size, dims)
    path = Path(path).resolve()
    value = run_parse(
        "backend.models.costing:child_cost",
        str(path),
        batch_size,
        dims,
        what=f"Counting the compute cost of {shown!r}",
        read_only=[path],
    )
    return ModelCost.from_dict(value)


# ---- child side -------------------------------------------------------------------------------


def child_cost(path: str, batch_size: int, dims: dict[str, int]) -> dict:
    from backend.models.cost import model_cost

    return model_cost(Path(path), batch_size, dims).to_dict()
