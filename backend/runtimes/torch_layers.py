"""What the torch runtime changes in a loaded transformers model for its decode step, each with the
same numbers as the layers it replaces (tests/backend/runtimes/test_torch_layers.py):

- grouped_decode_attention: a grouped-query model's one-token step matches each key/value head of
  the cache against its own query heads, instead of sdpa's masked grouped path, which copies every
  key/value head of the whole cache once per query head of its group, every layer, every token;
- fuse_projections: an attention layer's q, k and v projections (three small matmuls over the
  same input, each too small at batch 1 to stream its weights at the memory's speed) as one.
"""

from __future__ import annotations

from typing import Any

import torch

GROUPED_DECODE = "optiboard-grouped-decode"  # its name in transformers' attention registry
ATTENTION_RAN = "sdpa; decode steps of grouped-query heads: one matmul per key/value head"
FUSED_RAN = "q, k and v projections of each attention layer as one matmul"
PROJECTIONS = ("q_proj", "k_proj", "v_proj")


def grouped_decode_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[Any, None]:
    """A one-token step's attention with each key/value head matched against its group of query
    heads by a reshape, instead of sdpa's path for a masked grouped-query step on CUDA, which
    copies every key and value head of the whole cache once per query head in its group, every
    layer, every token. The arithmetic is transformers' eager attention (scores in the model's
    dtype, softmax in fp32), the mask sdpa's. Prefill, chunks, ungrouped models and a layer
    that hands sdpa more than a mask (a position bias, attention sinks, a soft cap): sdpa."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    more = any(kwargs.get(name) is not None for name in ("position_bias", "s_aux", "softcap"))
    if query.shape[2] != 1 or groups == 1 or dropout or more:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    import torch

    batch, heads, _, dim = query.shape
    scale = dim**-0.5 if scaling is None else scaling
    grouped = query.view(batch, key.shape[1], groups, dim)  # query head h reads kv head h // groups
    scores = torch.matmul(grouped, key.transpose(-1, -2)) * scale
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
    elif attention_mask is not None:
        scores = scores + attention_mask
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    return torch.matmul(weights, value).reshape(batch, 1, heads, dim), None


def register_attention() -> None:
    """grouped_decode_attention under its name, with sdpa's mask (a boolean one per step)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(GROUPED_DECODE, grouped_decode_attention)
    AttentionMaskInterface.register(GROUPED_DECODE, sdpa_mask)


def fuse_projections(model: Any) -> int:
    """Every attention layer's q_proj, k_proj and v_proj (plain Linear layers over one input)
    as one Linear holding the three weights end to end: q_proj computes all three and keeps k's
    and v's parts for k_proj and v_proj, which hand them back when given the same input (and
    compute their own otherwise, from views of the one). The three weights move into the one
    and the old layers are released: no memory added. Returns how many layers were fused."""
    fused = 0
    for layer in list(model.modules()):
        parts = [getattr(layer, name, None) for name in PROJECTIONS]
        if not all(type(p) is torch.nn.Linear for p in parts):
            continue
        if len({p.in_features for p in parts}) != 1 or len({p.bias is None for p in parts}) != 1:
            continue
        whole = _FusedProjections(*parts)
        layer.q_proj = whole
        layer.k_proj, layer.v_proj = _KeptPart(whole, 1), _KeptPart(whole, 2)
        fused += 1
    return fused


class _FusedProjections(torch.nn.Module):
    """q_proj's place: the three projections' weights end to end, one matmul, q's part out."""

    def __init__(self, *parts: torch.nn.Linear) -> None:
        super().__init__()
        self.sizes = [p.out_features for p in parts]
        weight = torch.cat([p.weight.detach() for p in parts])
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        biases = [p.bias for p in parts]
        self.bias = (
            None
            if biases[0] is None
            else torch.nn.Parameter(torch.cat([b.detach() for b in biases]), requires_grad=False)
        )
        self.kept: list[torch.Tensor | None] = [None, None, None]
        self.given: torch.Tensor | None = None

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        whole = torch.nn.functional.linear(hidden, self.weight, self.bias)
        self.kept = list(whole.split(self.sizes, -1))
        self.given = hidden
        return self.kept[0]

    def part(self, index: int, hidden: torch.Tensor) -> torch.Tensor:
        kept = self.kept[index]
        if hidden is self.given and kept is not None:
            return kept
        start = sum(self.sizes[:index])
        rows = slice(start, start + self.sizes[index])
        bias = None if self.bias is None else self.bias[rows]
        return torch.nn.functional.linear(hidden, self.weight[rows], bias)


class _KeptPart(torch.nn.Module):
    """k_proj's or v_proj's place: its part of what q_proj computed from the same input."""

    def __init__(self, whole: _FusedProjections, index: int) -> None:
        super().__init__()
        self.whole, self.index = [whole], index  # a list: not registered twice as a child

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.whole[0].part(self.index, hidden)
