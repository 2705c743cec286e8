"""Hugging Face folder -> OpenVINO IR folder that openvino_genai.LLMPipeline loads, and NNCF
INT4/INT8 weight compression of it; both in a sandboxed, limited child.

The export does what optimum-intel does for a decoder, without optimum: trace the transformers
model with its KV cache as inputs and outputs (ov.convert_model), name them, let the batch and
sequence axes vary, reorder the cache by a `beam_idx` input, make the cache internal state
(apply_make_stateful_transformation) with zero-length initial values, and write the OpenVINO
tokenizer and detokenizer (openvino_tokenizers.convert_tokenizer) beside it. The compression is
nncf.compress_weights on that IR. Every folder states what its IR holds: bytes of constants per
element type, read in the child from the saved model.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import settings
from backend.errors import UserError
from backend.hfcheck import check_hf_folder, require_builder
from backend.launch import sandbox
from backend.launch.children import call_in_child
from backend.launch.converter import require_sandbox, versions
from backend.models.hfconvert import OFFLINE_ENV

MODEL_XML = "openvino_model.xml"
NNCF_MODES = ("INT4_SYM", "INT4_ASYM", "INT8_SYM", "INT8_ASYM")
COPIED = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")
TOKENIZER_IRS = (
    "openvino_tokenizer.xml",
    "openvino_tokenizer.bin",
    "openvino_detokenizer.xml",
    "openvino_detokenizer.bin",
)


@dataclass(frozen=True)
class NncfConfig:
    """nncf.compress_weights settings: mode, group size and the share of layers in INT4."""

    mode: str = "INT4_SYM"
    group_size: int = 32  # -1: per channel
    ratio: float = 1.0  # the rest of the ratio-defining layers stay INT8

    def __post_init__(self) -> None:
        if self.mode not in NNCF_MODES:
            raise UserError(
                f"NNCF mode {self.mode!r} is not offered; choose one of {', '.join(NNCF_MODES)}."
            )
        if self.group_size not in (-1, 16, 32, 64, 128, 256):
            raise UserError(
                f"Group size {self.group_size} is not supported; choose -1 (per channel), 16, "
                "32, 64, 128 or 256."
            )
        if not 0.0 < self.ratio <= 1.0:
            raise UserError(f"Ratio {self.ratio} is not in (0, 1]; choose e.g. 0.8 or 1.0.")

    @property
    def label(self) -> str:
        group = "per-channel" if self.group_size == -1 else f"g{self.group_size}"
        return f"nncf {self.mode.lower()} {group} r{self.ratio:g}"


@dataclass(frozen=True)
class IrFacts:
    """Bytes of an IR's constants per element type (int4_t, uint8_t, float16, ...), as saved."""

    bytes_by_type: dict[str, int] = field(default_factory=dict)
    matmuls: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_by_type.values())

    def summary(self) -> str:
        parts = ", ".join(
            f"{kind} {size / (1 << 20):.2f} MB"
            for kind, size in sorted(self.bytes_by_type.items(), key=lambda kv: -kv[1])
        )
        return f"{self.matmuls} MatMuls; constants: {parts}"


@dataclass(frozen=True)
class OpenVinoFolder:
    """An OpenVINO GenAI folder, what its IR holds, and what made it."""

    folder: Path
    facts: IrFacts
    versions: dict[str, str]
    compression: NncfConfig | None = None

    def statement(self) -> str:
        made = self.compression.label if self.compression else "FP32 export"
        return f"{made} (OpenVINO {self.versions.get('openvino', '?')}): {self.facts.summary()}."

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "folder": str(self.folder)}


def export_openvino(source: Path, output: Path, timeout_s: float | None = None) -> OpenVinoFolder:
    """Export the checked HF folder `source` to an OpenVINO GenAI folder `output` (new)."""
    source, output = Path(source).resolve(), Path(output).resolve()
    check_hf_folder(source, source.name)
    require_builder()
    value = _run("child_export", source, output, [str(source), str(output)], timeout_s)
    return OpenVinoFolder(output, IrFacts(**value["facts"]), value["versions"])


def compress_openvino(
    source: Path, output: Path, config: NncfConfig, timeout_s: float | None = None
) -> OpenVinoFolder:
    """nncf.compress_weights of the OpenVINO GenAI folder `source` into `output` (new)."""
    source, output = Path(source).resolve(), Path(output).resolve()
    if not (source / MODEL_XML).is_file():
        raise UserError(f"{source.name} holds no {MODEL_XML}; export the model to OpenVINO first.")
    args = [str(source), str(output), asdict(config)]
    value = _run("child_compress", source, output, args, timeout_s)
    facts = IrFacts(**value["facts"])
    return OpenVinoFolder(output, facts, value["versions"], config)


def _run(target: str, source: Path, output: Path, args: list[Any], timeout_s: float | None):
    require_sandbox(
        "OpenVINO exports",
        "they read the uploaded files, which only ever happens inside that sandbox",
    )
    output.mkdir(parents=True, exist_ok=False)
    try:
        outcome = call_in_child(
            f"backend.generate.ovexport:{target}",
            *args,
            timeout_s=timeout_s or settings.CONVERT_TIMEOUT_S.get(),
            what="The OpenVINO export" if target == "child_export" else "NNCF compression",
            sandboxed=True,
            binds=sandbox.Binds.of(read_only=[source], writable=[output], env=OFFLINE_ENV),
        )
        return outcome.value_or_raise("The OpenVINO step")
    except BaseException:
        shutil.rmtree(output, ignore_errors=True)
        raise


# ---- child side -------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    return versions("openvino", "nncf", "openvino_tokenizers", "openvino_genai", "torch")


def ir_facts(model: Any) -> dict[str, Any]:
    """Bytes of every constant per element type, and the MatMul count, of an ov.Model."""
    by_type: dict[str, int] = {}
    matmuls = 0
    for op in model.get_ops():
        kind = op.get_type_name()
        if kind == "MatMul":
            matmuls += 1
        elif kind == "Constant":
            name = op.get_element_type().get_type_name()
            by_type[name] = by_type.get(name, 0) + int(op.get_byte_size())
    return {"bytes_by_type": by_type, "matmuls": matmuls}


def child_export(source: str, output: str) -> dict[str, Any]:
    import os

    os.environ.setdefault("USE_TF", "0")
    import openvino as ov
    import torch
    from openvino_tokenizers import convert_tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from backend.generate.ovstate import stateful_decoder

    model = AutoModelForCausalLM.from_pretrained(
        source, dtype=torch.float32, use_safetensors=True, trust_remote_code=False
    )
    ir = stateful_decoder(model)
    ov.save_model(ir, str(Path(output) / MODEL_XML), compress_to_fp16=False)
    tokenizer, detokenizer = convert_tokenizer(
        AutoTokenizer.from_pretrained(source), with_detokenizer=True
    )
    ov.save_model(tokenizer, str(Path(output) / "openvino_tokenizer.xml"))
    ov.save_model(detokenizer, str(Path(output) / "openvino_detokenizer.xml"))
    for name in COPIED:
        if (Path(source) / name).is_file():
            shutil.copyfile(Path(source) / name, Path(output) / name)
    return {"facts": ir_facts(ir), "versions": _versions()}


def child_compress(source: str, output: str, config: dict[str, Any]) -> dict[str, Any]:
    import nncf
    import openvino as ov

    chosen = NncfConfig(**config)
    model = ov.Core().read_model(str(Path(source) / MODEL_XML))
    compressed = nncf.compress_weights(
        model,
        mode=getattr(nncf.CompressWeightsMode, chosen.mode),
        group_size=chosen.group_size,
        ratio=chosen.ratio,
    )
    ov.save_model(compressed, str(Path(output) / MODEL_XML), compress_to_fp16=False)
    # what the export wrote beside its IR, and nothing else: the FP32 folder's own facts file
    # (variants.FACTS_FILE) describes the FP32 IR, not this one
    for name in (*TOKENIZER_IRS, *COPIED):
        if (Path(source) / name).is_file():
            shutil.copyfile(Path(source) / name, Path(output) / name)
    return {"facts": ir_facts(compressed), "versions": _versions()}
