"""A Hugging Face Llama folder as an OpenVINO GenAI folder: a stateful IR with a KV cache.

OpenVINO GenAI's LLMPipeline opens IR only, and the GenAI builder's ONNX cannot be saved as IR
(its GroupQueryAttention is an internal op there), so the IR comes from the PyTorch model: traced
with explicit past key/values, made stateful (the KV cache becomes the model's own state), given
the beam_idx input and the zero-length initial state LLMPipeline expects (what optimum-intel's
exporter does), plus the tokenizer as openvino_tokenizers IRs. Weights come only from
safetensors. It runs the model's code, so the product runs it in the sandboxed child.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import settings
from backend.errors import UserError
from backend.launch import sandbox
from backend.launch.children import call_in_child
from backend.launch.limits import ChildLimits

COPIED = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")


def _flat_model(model: Any, layers: int) -> Any:
    """The HF model with past key/values as flat tensors in and present ones out."""
    import torch
    from transformers.cache_utils import DynamicCache

    class Flat(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):  # type: ignore[no-untyped-def]
            cache = DynamicCache(config=model.config)
            for i in range(layers):  # filled directly: update() would cat onto an empty tensor
                layer = cache.layers[i]
                layer.dtype, layer.device = past[2 * i].dtype, past[2 * i].device
                layer.keys, layer.values = past[2 * i], past[2 * i + 1]
                layer.is_initialized = True
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=True,
            )
            present = []
            for layer in out.past_key_values.layers[:layers]:
                present += [layer.keys, layer.values]
            return (out.logits, *present)

    return Flat()


def _stateful(ov_model: Any, layers: int, kv_heads: int, head_dim: int) -> None:
    """Names, dynamic shapes, beam_idx reordering, KV as state with a zero-length start."""
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops
    from openvino._offline_transformations import apply_make_stateful_transformation

    kv = [f"{i}.{part}" for i in range(layers) for part in ("key", "value")]
    for port, name in zip(
        ov_model.inputs,
        ["input_ids", "attention_mask", "position_ids"] + [f"past_key_values.{n}" for n in kv],
        strict=True,
    ):
        port.get_tensor().set_names({name})
    for port, name in zip(ov_model.outputs, ["logits"] + [f"present.{n}" for n in kv], strict=True):
        port.get_tensor().set_names({name})
    token_shape, cache_shape = (
        ov.PartialShape([-1, -1]),
        ov.PartialShape([-1, kv_heads, -1, head_dim]),
    )
    ov_model.reshape(
        {
            p: cache_shape if p.get_any_name().startswith("past") else token_shape
            for p in ov_model.inputs
        }
    )
    beam = ops.parameter([-1], ov.Type.i32, name="beam_idx")
    beam.output(0).get_tensor().set_names({"beam_idx"})
    for parameter in list(ov_model.get_parameters()):
        if parameter.output(0).get_any_name().startswith("past_key_values"):
            consumers = list(parameter.output(0).get_target_inputs())
            reordered = ops.gather(parameter.output(0), beam, ops.constant(np.int64(0)))
            for consumer in consumers:
                consumer.replace_source_output(reordered.output(0))
    ov_model.add_parameters([beam])
    apply_make_stateful_transformation(
        ov_model, {f"past_key_values.{n}": f"present.{n}" for n in kv}
    )
    shape = ops.shape_of(ov_model.input("input_ids"), output_type="i64")
    batch = ops.gather(
        shape, ops.constant(np.array([0], dtype=np.int64)), ops.constant(np.int64(0))
    )
    for op in ov_model.get_ops():
        if op.get_type_name() == "ReadValue":
            dims = [d.get_min_length() for d in op.get_output_partial_shape(0)][1:]
            parts = [batch] + [ops.constant(np.array([d], dtype=np.int64)) for d in dims]
            zero = ops.constant(np.zeros((), dtype=np.float32))
            op.set_arguments([ops.broadcast(zero, ops.concat(parts, 0))])
    ov_model.validate_nodes_and_infer_types()


def export_openvino(hf_folder: str, out_folder: str) -> dict[str, Any]:
    """Convert in this process (the child's target); returns what it wrote."""
    os.environ.setdefault("USE_TF", "0")
    import openvino as ov
    import torch
    from openvino_tokenizers import convert_tokenizer
    from transformers import AutoTokenizer, LlamaForCausalLM

    source, out = Path(hf_folder), Path(out_folder)
    if not (source / "model.safetensors").is_file():
        raise UserError(f"{source.name} has no model.safetensors; weights come only from it.")
    model = LlamaForCausalLM.from_pretrained(source, dtype=torch.float32, use_safetensors=True)
    config = model.eval().config
    layers, kv_heads = config.num_hidden_layers, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    past, new = 3, 4  # a trace with both a past and several new tokens keeps both dims general
    example = (
        torch.randint(3, config.vocab_size, (1, new)),
        torch.ones(1, past + new, dtype=torch.long),
        torch.arange(past, past + new).unsqueeze(0),
        *[torch.zeros(1, kv_heads, past, head_dim) for _ in range(2 * layers)],
    )
    with torch.no_grad():
        ov_model = ov.convert_model(_flat_model(model, layers), example_input=example)
    _stateful(ov_model, layers, kv_heads, head_dim)
    out.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov_model, out / "openvino_model.xml", compress_to_fp16=False)
    tokenizer, detokenizer = convert_tokenizer(
        AutoTokenizer.from_pretrained(source), with_detokenizer=True
    )
    ov.save_model(tokenizer, out / "openvino_tokenizer.xml")
    ov.save_model(detokenizer, out / "openvino_detokenizer.xml")
    for name in COPIED:
        if (source / name).is_file():
            shutil.copy2(source / name, out / name)
    return {"files": sorted(p.name for p in out.iterdir()), "openvino": ov.__version__}


def export_openvino_in_child(hf_folder: Path, out_folder: Path) -> dict[str, Any]:
    """export_openvino in the sandboxed, limited child: the HF folder read-only, out writable."""
    state = sandbox.available()
    if not state.ok:
        raise UserError(f"Converting a model runs only inside the sandbox, and {state.reason}.")
    out_folder.mkdir(parents=True, exist_ok=True)
    outcome = call_in_child(
        "backend.generate.openvino_export:export_openvino",
        str(Path(hf_folder).resolve()),
        str(out_folder.resolve()),
        timeout_s=settings.CONVERT_TIMEOUT_S.get(),
        what="The OpenVINO export",
        sandboxed=True,
        binds=sandbox.Binds.of(read_only=[Path(hf_folder)], writable=[out_folder]),
        limits=ChildLimits.from_settings(),
    )
    return outcome.value_or_raise("The OpenVINO export")
