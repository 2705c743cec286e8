"""A transformers decoder as the stateful OpenVINO model openvino_genai.LLMPipeline expects: inputs
input_ids, attention_mask, position_ids and beam_idx, logits out, the KV cache as internal state.

Runs in the export child only (torch and transformers are imported by the caller).
"""

from __future__ import annotations

from typing import Any

TRACE_BATCH, TRACE_NEW, TRACE_PAST = 1, 3, 2  # example shapes: nonzero past, several new tokens


def _causal_mask(attention_mask: Any, new_tokens: Any) -> Any:
    """The 4-D additive mask [batch, 1, new, past + new] built from the 2-D one: transformers
    uses a 4-D mask as given, instead of building it with torch.vmap, which tracing rejects."""
    import torch

    total = attention_mask.shape[1]
    keys = torch.arange(total)
    queries = torch.arange(new_tokens) + (total - new_tokens)
    allowed = (keys[None, :] <= queries[:, None])[None, None] & attention_mask[
        :, None, None, :
    ].bool()
    blocked = torch.full(allowed.shape, torch.finfo(torch.float32).min)
    return torch.where(allowed, torch.zeros_like(blocked), blocked)


def _wrapper(model: Any, layers: int) -> Any:
    """forward(input_ids, attention_mask, position_ids, *past) -> (logits, *present), with the
    past tensors placed in a DynamicCache directly (its lazy start concatenates an empty 1-D
    tensor, which OpenVINO's tracer rejects)."""
    import torch
    from transformers import DynamicCache

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):  # noqa: ANN001
            cache = DynamicCache(config=model.config)
            for index, layer in enumerate(cache.layers):
                key, value = past[2 * index], past[2 * index + 1]
                layer.dtype, layer.device = key.dtype, key.device
                layer.keys, layer.values = key, value
                layer.is_initialized = True
            out = self.model(
                input_ids=input_ids,
                attention_mask=_causal_mask(attention_mask, input_ids.shape[1]),
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=True,
            )
            present = []
            for layer in out.past_key_values.layers[:layers]:
                present += [layer.keys, layer.values]
            return (out.logits, *present)

    return Decoder()


def stateful_decoder(model: Any) -> Any:
    """The ov.Model of a transformers causal LM: stateful KV cache, reorderable by beam_idx."""
    from openvino._offline_transformations import apply_make_stateful_transformation

    config = model.config
    layers = config.num_hidden_layers
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    past = [f"past_key_values.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    present = [f"present.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    ir = _traced(model, layers, kv_heads, head)
    for port, name in zip(
        ir.inputs, ["input_ids", "attention_mask", "position_ids", *past], strict=True
    ):
        port.get_tensor().set_names({name})
    for port, name in zip(ir.outputs, ["logits", *present], strict=True):
        port.get_tensor().set_names({name})
    _dynamic_axes(ir, kv_heads, head)
    _reorder_by_beam_idx(ir)
    apply_make_stateful_transformation(ir, dict(zip(past, present, strict=True)))
    _empty_initial_state(ir)
    return ir


def _traced(model: Any, layers: int, kv_heads: int, head: int) -> Any:
    """ov.convert_model of the wrapper on example inputs with a nonzero past."""
    import openvino as ov
    import torch

    model.eval()
    b, s, p = TRACE_BATCH, TRACE_NEW, TRACE_PAST
    example = [
        torch.ones(b, s, dtype=torch.long),
        torch.ones(b, p + s, dtype=torch.long),
        torch.arange(p, p + s).unsqueeze(0),
    ]
    example += [torch.zeros(b, kv_heads, p, head) for _ in range(2 * layers)]
    with torch.no_grad():
        return ov.convert_model(_wrapper(model, layers), example_input=tuple(example))


def _dynamic_axes(ir: Any, kv_heads: int, head: int) -> None:
    """Batch and sequence free; the cache's heads and head size fixed."""
    import openvino as ov

    shapes = {}
    for port in ir.inputs:
        cache = port.get_any_name().startswith("past_key_values")
        shapes[port] = ov.PartialShape([-1, kv_heads, -1, head] if cache else [-1, -1])
    ir.reshape(shapes)


def _reorder_by_beam_idx(ir: Any) -> None:
    """A beam_idx input that gathers every past tensor along the batch (what beam search needs)."""
    import openvino as ov
    import openvino.opset13 as ops

    beam_idx = ops.parameter([-1], ov.Type.i32, name="beam_idx")
    beam_idx.output(0).get_tensor().set_names({"beam_idx"})
    for parameter in list(ir.get_parameters()):
        if parameter.output(0).get_any_name().startswith("past_key_values"):
            consumers = parameter.output(0).get_target_inputs()
            reordered = ops.gather(parameter, beam_idx, ops.constant(0))
            for consumer in consumers:
                consumer.replace_source_output(reordered.output(0))
    ir.add_parameters([beam_idx])
    ir.validate_nodes_and_infer_types()


def _empty_initial_state(ir: Any) -> None:
    """Each cache state starts as zeros of [batch of input_ids, heads, 0, head size]."""
    import numpy as np
    import openvino.opset13 as ops

    batch = ops.gather(
        ops.shape_of(ir.input("input_ids"), output_type="i64"),
        ops.constant(np.array([0], dtype=np.int64)),
        ops.constant(0),
    )
    for op in ir.get_ops():
        if op.get_type_name() == "ReadValue":
            dims = [d.min_length for d in op.get_output_partial_shape(0)]
            parts = [batch] + [ops.constant(np.array([d], dtype=np.int64)) for d in dims[1:]]
            zero = ops.constant(np.array(0.0, dtype=np.float32))
            op.set_arguments([ops.broadcast(zero, ops.concat(parts, 0))])
    ir.validate_nodes_and_infer_types()
