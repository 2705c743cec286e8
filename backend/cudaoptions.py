"""GPU timing modes and the CUDA provider's own options, as typed configuration fields.

Kept apart from specs.py (which re-exports them) so that module stays short; the rules that tie
them to a Configuration (provider, precision, fixed shapes) live in specs._check_gpu_options.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from backend.errors import UserError
from backend.knobs import Cli, as_member, knob


class IoMode(enum.StrEnum):
    """What a GPU timing includes: host arrays in and out, or inputs/outputs already on the GPU."""

    END_TO_END = "end_to_end"  # as a client sees it: host -> device copies included
    DEVICE = "device"  # IOBinding, as a server with GPU preprocessing sees it

    @property
    def label(self) -> str:
        return {"end_to_end": "end to end", "device": "device-resident"}[self.value]


class ConvAlgoSearch(enum.StrEnum):
    """cuDNN convolution algorithm search, the CUDA provider's cudnn_conv_algo_search."""

    EXHAUSTIVE = "EXHAUSTIVE"
    HEURISTIC = "HEURISTIC"
    DEFAULT = "DEFAULT"


@dataclass(frozen=True)
class CudaOptions:
    """The CUDA provider's own knobs; defaults are ONNX Runtime's, so a default adds no key part."""

    WHAT = "CUDA"
    GPU = "GPU (the cuda provider)"  # the command line's group title

    conv_algo_search: ConvAlgoSearch = knob(
        ConvAlgoSearch.EXHAUSTIVE,
        label="cuDNN convolution search",
        widget="cudnn_search",
        cli=Cli("--cudnn-search", choices=tuple(c.value for c in ConvAlgoSearch), group=GPU),
        native="cudnn_conv_algo_search",
    )
    use_tf32: bool = knob(  # ORT's default: FP32 MatMul/Conv run on TF32 Tensor Cores
        True,
        label="TF32 for FP32 math",
        widget="tf32",
        cli=Cli("--no-tf32", "invert", group=GPU, help="FP32 without TF32 Tensor Cores"),
        native="use_tf32",
    )
    prefer_nhwc: bool = knob(
        False,
        label="Prefer NHWC layout",
        widget="nhwc",
        cli=Cli("--nhwc", "flag", group=GPU, help="prefer_nhwc layout for convolutions"),
        native="prefer_nhwc",
    )
    enable_cuda_graph: bool = knob(
        False,
        label="CUDA graphs (device-resident, fixed shapes)",
        widget="cuda_graph",
        cli=Cli("--cuda-graph", "flag", group=GPU, help="enable_cuda_graph (needs device)"),
        native="enable_cuda_graph",
    )
    float16_io: bool = knob(  # FP16 only: inputs and outputs float16 instead of float32 kept
        False,
        label="FP16 with float16 inputs and outputs",
        widget="fp16_io",
        cli=Cli("--fp16-io", "flag", group=GPU, help="FP16 with float16 inputs/outputs"),
    )
    # cuDNN may take as much workspace as its fastest algorithm wants (ORT's default); off caps
    # the algorithm search at 32 MB, which can pick slower convolutions
    conv_max_workspace: bool = knob(
        True,
        label="cuDNN convolution with the maximum workspace",
        widget="conv_max_workspace",
        cli=Cli(
            "--small-workspace", "invert", group=GPU, help="cuDNN conv without the max workspace"
        ),
        native="cudnn_conv_use_max_workspace",
    )
    # Conv bias added inside the convolution (cuDNN frontend) instead of a separate AddTensor
    # kernel after it; ORT's default is off
    fuse_conv_bias: bool = knob(
        False,
        label="Fuse conv bias into cuDNN's convolution (FP16 needs NHWC)",
        help="One kernel per convolution instead of a separate bias-add after each; "
        "+48% on ResNet-50 FP16 b1024 on an H200.",
        widget="fuse_conv_bias",
        cli=Cli(
            "--fuse-conv-bias",
            "flag",
            group=GPU,
            help="conv bias inside cuDNN's conv (FP16: --nhwc)",
        ),
        native="fuse_conv_bias",
    )

    def __post_init__(self) -> None:
        as_member(self, "conv_algo_search", "cuDNN algorithm search")

    @property
    def is_default(self) -> bool:
        return self == CudaOptions()

    @property
    def key_parts(self) -> list[str]:
        """Only what differs from ONNX Runtime's defaults, so old result keys stay the same."""
        parts = []
        if self.conv_algo_search != ConvAlgoSearch.EXHAUSTIVE:
            parts.append(f"conv:{self.conv_algo_search.value.lower()}")
        parts += [] if self.use_tf32 else ["notf32"]
        parts += ["nhwc"] if self.prefer_nhwc else []
        parts += ["cudagraph"] if self.enable_cuda_graph else []
        parts += ["f16io"] if self.float16_io else []
        parts += [] if self.conv_max_workspace else ["smallws"]
        parts += ["fusebias"] if self.fuse_conv_bias else []
        return parts

    def to_dict(self) -> dict[str, Any]:
        from backend.knobs.serialize import to_json

        return to_json(self)

    @classmethod
    def from_value(cls, value: CudaOptions | dict[str, Any] | None) -> CudaOptions:
        from backend.knobs.serialize import from_json

        return from_json(cls, value, what=cls.WHAT)


def check_gpu_options(
    cuda: CudaOptions,
    io_mode: IoMode,
    provider: str,
    runtime: str,
    fixed_shapes: bool,
    fp16: bool,
) -> None:
    """Refuse the combinations the CUDA provider cannot run, each with one sentence."""
    if io_mode == IoMode.DEVICE and provider not in ("cuda", "tensorrt"):
        raise UserError(
            f"Device-resident timing needs a GPU provider (cuda or tensorrt), not "
            f"{provider!r}; use end-to-end timing there."
        )
    if cuda.is_default:
        return
    if provider != "cuda" or runtime != "onnxruntime":
        raise UserError(
            "CUDA options (graphs, cuDNN search and workspace, TF32, NHWC, bias fusion, float16 "
            "I/O) apply to ONNX "
            "Runtime's cuda provider only; pick it or leave them at their defaults."
        )
    if cuda.enable_cuda_graph and not fixed_shapes:
        raise UserError(
            "CUDA graphs replay fixed shapes only; turn fixed shapes on or CUDA graphs off."
        )
    if cuda.enable_cuda_graph and io_mode != IoMode.DEVICE:
        raise UserError(
            "CUDA graphs need inputs and outputs bound on the GPU; use device-resident timing "
            "or turn CUDA graphs off."
        )
    if cuda.fuse_conv_bias and fp16 and not cuda.prefer_nhwc:
        raise UserError(  # seen on an H200: ORT 1.31.1, cuDNN 9.14, ResNet-50's first Conv
            "Conv bias fusion in FP16 needs prefer_nhwc (cuDNN's frontend finds no engine for "
            "it on NCHW tensors); turn NHWC on or bias fusion off."
        )
    if cuda.float16_io and not fp16:
        raise UserError("float16 inputs and outputs apply to FP16 only; pick FP16 or turn it off.")
