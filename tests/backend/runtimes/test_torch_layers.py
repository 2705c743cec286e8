"""The torch runtime's layer changes give the numbers of the layers they replace: grouped decode
attention against sdpa's (which copies every key/value head of the cache for each query head of
its group) on real tensors, and q/k/v fused into one matmul on the tests' trained Llama."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402

from backend.runtimes.torch_layers import fuse_projections, grouped_decode_attention  # noqa: E402


class _Layer(torch.nn.Module):
    """What transformers' attention functions read from the layer that calls them."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, True


@pytest.mark.parametrize("mask_kind", ["bool", "additive", "none"])
def test_one_token_attention_matches_sdpa_over_a_partly_filled_cache(mask_kind: str) -> None:
    gen = torch.Generator().manual_seed(0)
    query = torch.randn(2, 8, 1, 16, generator=gen)  # 8 query heads over 2 key/value heads
    key, value = (torch.randn(2, 2, 24, 16, generator=gen) for _ in range(2))
    filled = torch.arange(24) < torch.tensor([[9], [17]])  # each sequence's cache, in part
    mask = {
        "bool": filled.view(2, 1, 1, 24),
        "additive": torch.where(filled, 0.0, torch.finfo(torch.float32).min).view(2, 1, 1, 24),
        "none": None,
    }[mask_kind]
    layer = _Layer(groups=4)
    ours, _ = grouped_decode_attention(layer, query, key, value, mask, scaling=0.25)
    theirs, _ = sdpa_attention_forward(layer, query, key, value, mask, scaling=0.25)
    assert ours.shape == theirs.shape == (2, 1, 8, 16)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    # a query head reads only its own key/value head: moving another head's keys changes nothing
    moved = key.clone()
    moved[:, 1] += 3.0
    again, _ = grouped_decode_attention(layer, query, moved, value, mask, scaling=0.25)
    torch.testing.assert_close(again[:, :, :4], ours[:, :, :4])
    assert not torch.allclose(again[:, :, 4:], ours[:, :, 4:])


def test_prefill_and_ungrouped_layers_are_sdpa_itself() -> None:
    gen = torch.Generator().manual_seed(1)
    query = torch.randn(1, 4, 5, 8, generator=gen)
    key, value = (torch.randn(1, 2, 5, 8, generator=gen) for _ in range(2))
    ours, _ = grouped_decode_attention(_Layer(2), query, key, value, None)
    theirs, _ = sdpa_attention_forward(_Layer(2), query, key, value, None)
    assert torch.equal(ours, theirs)
    # one token, but a position bias: what sdpa does with it, not a plain grouped product
    one, bias = query[:, :, :1], torch.randn(1, 4, 1, 5, generator=gen)
    ours, _ = grouped_decode_attention(_Layer(2), one, key, value, None, position_bias=bias)
    theirs, _ = sdpa_attention_forward(_Layer(2), one, key, value, None, position_bias=bias)
    plain, _ = grouped_decode_attention(_Layer(2), one, key, value, None)
    assert torch.equal(ours, theirs) and not torch.allclose(ours, plain)


def test_fused_projections_give_the_models_logits_and_keep_no_second_copy(tiny_llama) -> None:
    plain, fused = (
        AutoModelForCausalLM.from_pretrained(str(tiny_llama.folder), attn_implementation="sdpa")
        for _ in range(2)
    )
    weights = sum(p.numel() for p in fused.parameters())
    assert fuse_projections(fused) == tiny_llama.spec.layers
    assert sum(p.numel() for p in fused.parameters()) == weights  # moved, not copied
    attention = fused.model.layers[0].self_attn
    assert not list(attention.k_proj.parameters()) and not list(attention.v_proj.parameters())
    ids = torch.tensor([[1, 5, 9, 13, 17, 21, 25, 29]])
    with torch.inference_mode():
        torch.testing.assert_close(fused(ids).logits, plain(ids).logits, rtol=1e-5, atol=1e-5)
        # k_proj given another input than q_proj's computes its own part, not the kept one
        other = torch.randn(1, 3, tiny_llama.spec.hidden)
        attention.q_proj(torch.randn(1, 3, tiny_llama.spec.hidden))
        expected = plain.model.layers[0].self_attn.k_proj(other)
        torch.testing.assert_close(attention.k_proj(other), expected, rtol=1e-5, atol=1e-6)


def test_projections_with_biases_are_fused_and_mismatched_ones_are_left_alone() -> None:
    torch.manual_seed(0)
    with_bias, mixed = torch.nn.Module(), torch.nn.Module()
    for layer, biases in ((with_bias, (True, True, True)), (mixed, (True, False, True))):
        for name, out, bias in zip(("q_proj", "k_proj", "v_proj"), (8, 4, 4), biases, strict=True):
            setattr(layer, name, torch.nn.Linear(6, out, bias=bias))
    x = torch.randn(2, 6)
    before = [getattr(with_bias, n)(x) for n in ("q_proj", "k_proj", "v_proj")]
    root = torch.nn.ModuleList([with_bias, mixed])
    assert fuse_projections(root) == 1  # one bias missing: three separate matmuls stay
    assert type(mixed.k_proj) is torch.nn.Linear
    with torch.inference_mode():
        after = [getattr(with_bias, n)(x) for n in ("q_proj", "k_proj", "v_proj")]
    for old, new in zip(before, after, strict=True):
        torch.testing.assert_close(new, old)
