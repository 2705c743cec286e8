"""Weight-only quantization of a GenAI folder's decoder with ONNX Runtime's MatMulNBits quantizer.

MatMul weights become 4- or 8-bit blocks with one scale (and, asymmetric, one zero point) per
block; activations stay float and the `accuracy_level` attribute picks the kernel's compute type
(4: int8 activations on CPU). Algorithms, as onnxruntime.quantization.matmul_nbits_quantizer
offers them: `rtn` (DefaultWeightOnlyQuantConfig: round to nearest, 4 or 8 bits, symmetric or
not), `hqq` (HQQWeightOnlyQuantConfig: half-quadratic optimisation of scales and zero points,
4 bits, always with zero points, needs torch) and `gptq` (GPTQWeightOnlyQuantConfig: error-
compensating rounding fed by calibration text, cut into windows with the model's own tokenizer,
4 bits).  The quantizer loads the whole model, so it runs in a sandboxed child (refused
with the reason where none works); the variant states what its graph holds (facts.py), not what
was asked.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import settings
from backend.errors import UserError
from backend.generate.facts import WeightFacts, weight_facts
from backend.launch import sandbox
from backend.launch.children import call_in_child
from backend.launch.converter import require_sandbox
from backend.models.genai import read_genai_config

ALGORITHMS = ("rtn", "hqq", "gptq")
CALIBRATION_WINDOW = 64  # tokens per GPTQ calibration sample
CALIBRATION_SAMPLES = 8
CALIBRATION_TEXT_CAP = 1 << 20  # characters of calibration text passed to the child
BLOCK_SIZES = (16, 32, 64, 128, 256)
DATA_SUFFIX = ".data"


@dataclass(frozen=True)
class WeightOnlyConfig:
    """One weight-only variant: algorithm, bits, block size, symmetry and accuracy level."""

    algorithm: str = "rtn"
    bits: int = 4
    block_size: int = 32
    symmetric: bool = True
    accuracy_level: int | None = None  # None: the quantizer's default (left unset in the graph)
    calibration_text: str = field(default="", repr=False)  # gptq only

    def __post_init__(self) -> None:
        if self.algorithm == "hqq":
            object.__setattr__(self, "symmetric", False)  # HQQ always stores zero points
        if self.algorithm not in ALGORITHMS:
            raise UserError(
                f"Weight-only algorithm {self.algorithm!r} is not offered; choose one of "
                f"{', '.join(ALGORITHMS)}."
            )
        if self.bits not in (4, 8) or (self.algorithm != "rtn" and self.bits != 4):
            raise UserError(
                f"{self.algorithm.upper()} does not make {self.bits}-bit weights; choose 4 bits"
                + (" or 8 bits." if self.algorithm == "rtn" else ".")
            )
        if self.block_size not in BLOCK_SIZES:
            raise UserError(
                f"Block size {self.block_size} is not supported; choose one of "
                f"{', '.join(map(str, BLOCK_SIZES))}."
            )
        if self.accuracy_level is not None and self.accuracy_level not in (0, 1, 2, 3, 4):
            raise UserError(f"Accuracy level {self.accuracy_level} is not 0 to 4; choose one.")
        if self.algorithm == "gptq" and not self.calibration_text.strip():
            raise UserError(
                "GPTQ needs calibration text (a few paragraphs like the model's real input); "
                "give some, or choose RTN or HQQ, which need none."
            )
        if len(self.calibration_text) > CALIBRATION_TEXT_CAP:
            raise UserError(
                f"The calibration text is {len(self.calibration_text):,} characters; give at most "
                f"{CALIBRATION_TEXT_CAP:,} (GPTQ uses {CALIBRATION_SAMPLES} windows of "
                f"{CALIBRATION_WINDOW} tokens)."
            )

    @property
    def label(self) -> str:
        symmetry = "sym" if self.symmetric else "asym"
        level = f" acc{self.accuracy_level}" if self.accuracy_level is not None else ""
        return f"int{self.bits} {self.algorithm} b{self.block_size} {symmetry}{level}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WeightOnlyVariant:
    """A quantized GenAI folder, what its graph holds and what it was made from."""

    folder: Path
    config: WeightOnlyConfig
    facts: WeightFacts
    source_facts: WeightFacts
    onnxruntime_version: str

    @property
    def matmul_ratio(self) -> float:
        """MatMul weight bytes after / before (int4 block 32 symmetric: 0.156)."""
        return self.facts.matmul_bytes / max(self.source_facts.matmul_bytes, 1)

    def statement(self) -> str:
        """What ran and the bytes it left, in one sentence with the numbers."""
        before = self.source_facts.total_bytes / (1 << 20)
        after = self.facts.total_bytes / (1 << 20)
        return (
            f"{self.config.label} with ONNX Runtime {self.onnxruntime_version}'s MatMulNBits "
            f"quantizer: {self.facts.summary()}; MatMul weights {self.matmul_ratio:.3f}x of the "
            f"source's, all weights {after:.2f} MB (from {before:.2f} MB)."
        )


def decoder_name(folder: Path) -> str:
    return read_genai_config(folder, folder.name)["model"]["decoder"]["filename"]


def quantize_folder(
    source: Path, output: Path, config: WeightOnlyConfig, timeout_s: float | None = None
) -> WeightOnlyVariant:
    """Write a weight-only quantized copy of the GenAI folder `source` to `output` (new)."""
    source, output = Path(source).resolve(), Path(output).resolve()
    decoder = decoder_name(source)
    source_facts = weight_facts(source / decoder)
    if not source_facts.float_matmuls:
        raise UserError(
            f"The model in {source.name} has no float MatMul weights left to quantize "
            f"({source_facts.summary()}); start from its FP32 or FP16 variant."
        )
    require_sandbox(
        "Weight-only quantizations",
        "the quantizer reads the uploaded model's weights in native code, and GPTQ runs the model",
    )
    output.mkdir(parents=True, exist_ok=False)
    try:
        outcome = call_in_child(
            "backend.generate.weightonly:child_quantize",
            str(source),
            str(output),
            decoder,
            config.to_dict(),
            timeout_s=timeout_s or settings.CONVERT_TIMEOUT_S.get(),
            what=f"Weight-only quantization ({config.label})",
            sandboxed=True,
            binds=sandbox.Binds.of(read_only=[source], writable=[output]),
        )
        result = outcome.value_or_raise(f"Weight-only quantization ({config.label})")
        for item in source.iterdir():  # config and tokenizer files come along unchanged
            if item.name not in (decoder, decoder + DATA_SUFFIX) and item.is_file():
                shutil.copyfile(item, output / item.name)
    except BaseException:
        shutil.rmtree(output, ignore_errors=True)
        raise
    facts = weight_facts(output / decoder)
    return WeightOnlyVariant(output, config, facts, source_facts, result["onnxruntime"])


# ---- child side -------------------------------------------------------------------------------


class _CalibrationWindows:
    """GPTQ's calibration feeds: windows of the text through the model's tokenizer.json, each a
    prefill with an empty KV cache (the decoder's own input names from genai_config.json)."""

    def __init__(self, folder: Path, decoder: dict[str, Any], text: str) -> None:
        import numpy as np

        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise UserError(
                "GPTQ calibration needs the tokenizers package (requirements-genai.txt), which "
                "is not installed here; choose RTN or HQQ."
            ) from None
        ids = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids
        names = decoder["inputs"]
        empty = (1, decoder["num_key_value_heads"], 0, decoder["head_size"])
        self.items = []
        for start in range(0, len(ids), CALIBRATION_WINDOW)[:CALIBRATION_SAMPLES]:
            window = np.array([ids[start : start + CALIBRATION_WINDOW]], dtype=np.int64)
            feed = {names["input_ids"]: window, names["attention_mask"]: np.ones_like(window)}
            for layer in range(decoder["num_hidden_layers"]):
                for kind in ("key", "value"):
                    name = names[f"past_{kind}_names"] % layer
                    feed[name] = np.zeros(empty, dtype=np.float32)
            self.items.append(feed)
        if not self.items:
            raise UserError("The calibration text has no tokens; give a few paragraphs of text.")

    def __iter__(self) -> Any:
        return iter(self.items)


def _algo_config(config: WeightOnlyConfig, source: Path, decoder_config: dict[str, Any]) -> Any:
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        GPTQWeightOnlyQuantConfig,
        HQQWeightOnlyQuantConfig,
    )

    if config.algorithm == "hqq":
        return HQQWeightOnlyQuantConfig(block_size=config.block_size, bits=config.bits)
    if config.algorithm == "gptq":
        reader = _CalibrationWindows(source, decoder_config, config.calibration_text)
        return GPTQWeightOnlyQuantConfig(
            calibration_data_reader=reader, block_size=config.block_size
        )
    return DefaultWeightOnlyQuantConfig(
        block_size=config.block_size,
        is_symmetric=config.symmetric,
        accuracy_level=config.accuracy_level,
        bits=config.bits,
    )


def _load_weights(model: Any, folder: Path) -> None:
    """Read external data into the tensors ourselves: onnx's loader refuses hard-linked files,
    which is what a library model's folder is made of (generate.library.genai_folder)."""
    import onnx
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, uses_external_data

    for tensor in _get_all_tensors(model):
        if not uses_external_data(tensor):
            continue
        info = ExternalDataInfo(tensor)
        path = (folder / info.location).resolve()
        if not path.is_relative_to(folder.resolve()) or not path.is_file():
            raise UserError(f"The weights file {info.location!r} is not in the model folder.")
        with open(path, "rb") as handle:
            handle.seek(info.offset or 0)
            tensor.raw_data = handle.read(info.length) if info.length else handle.read()
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]


def child_quantize(source: str, output: str, decoder: str, config: dict[str, Any]) -> dict:
    """Load the decoder with its weights, quantize its MatMuls, save it with external data."""
    import onnx
    import onnxruntime
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    chosen = WeightOnlyConfig(**config)
    folder = Path(source)
    decoder_config = read_genai_config(folder, folder.name)["model"]["decoder"]
    model = onnx.load(str(folder / decoder), load_external_data=False)
    _load_weights(model, folder)
    quantizer = MatMulNBitsQuantizer(
        model,
        bits=chosen.bits,
        block_size=chosen.block_size,
        is_symmetric=chosen.symmetric,
        accuracy_level=chosen.accuracy_level,
        algo_config=_algo_config(chosen, folder, decoder_config),
    )
    quantizer.process()
    result = getattr(quantizer.model, "model", quantizer.model)
    if chosen.algorithm == "hqq" and chosen.accuracy_level is not None:
        for node in result.graph.node:  # HQQ's config has no accuracy level; set it on the nodes
            if node.op_type == "MatMulNBits":
                node.attribute.append(
                    onnx.helper.make_attribute("accuracy_level", chosen.accuracy_level)
                )
    onnx.save_model(
        result,
        str(Path(output) / decoder),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=decoder + DATA_SUFFIX,
        size_threshold=1024,
    )
    return {"onnxruntime": onnxruntime.__version__}
