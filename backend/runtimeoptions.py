"""The OpenVINO and ONNX Runtime session knobs, as typed groups nested in a configuration.

Like cudaoptions.py and trtoptions.py: each group reaches its runtime as an object, inside the
Configuration a session is opened with (backend.runtimes.base.SessionOptions), never as
strings. A knob added here is one declaration; the runtime reads it where it opens its session.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from backend.errors import UserError
from backend.knobs import Cli, Widget, as_member, knob


class PerformanceHint(enum.StrEnum):
    """OpenVINO's PERFORMANCE_HINT: one request as fast as possible, or most requests per second."""

    LATENCY = "latency"
    THROUGHPUT = "throughput"


class Int8Matmul(enum.StrEnum):
    """Which kernels ONNX Runtime's CPU provider multiplies uint8 activations by int8 weights with.

    On x86 without VNNI its default (U8S8) adds pairs of products in 16 bits, which can saturate
    and change the outputs; session.x64quantprecision=1 makes the weights uint8 (U8U8), exact but
    slower. With VNNI the sums are 32-bit and U8S8 is exact.
    """

    AUTO = "auto"  # U8U8 where this CPU lacks VNNI, ORT's default U8S8 where it has it
    U8S8 = "u8s8"
    U8U8 = "u8u8"

    @property
    def label(self) -> str:
        return {
            "auto": "auto (U8U8 where the CPU lacks VNNI)",
            "u8s8": "U8S8 (ORT's default, fast; can saturate without VNNI)",
            "u8u8": "U8U8 (session.x64quantprecision, exact, slower)",
        }[self.value]


@dataclass(frozen=True)
class OpenVinoOptions:
    """OpenVINO's compile options; stored top-level (performance_hint, streams) before 2026-12."""

    WHAT = "OpenVINO"

    performance_hint: PerformanceHint = knob(
        PerformanceHint.LATENCY,
        label="OpenVINO performance hint",
        help="Latency: one request as fast as possible; throughput: most requests per second.",
        url="hint",
        url_always=True,
        widget="url_hint",
        cli=Cli("--hint", choices=tuple(h.value for h in PerformanceHint), group="OpenVINO"),
        applies=("openvino",),
        native="PERFORMANCE_HINT",
    )
    streams: int = knob(
        0,
        label="OpenVINO streams (0 = as the hint chooses)",
        help="Inference streams; 0 lets the performance hint choose.",
        url="streams",
        url_always=True,
        widget=Widget("url_streams", limits=(0, 64)),
        cli=Cli("--streams", group="OpenVINO"),
        applies=("openvino",),
        native="NUM_STREAMS",
    )

    def __post_init__(self) -> None:
        as_member(self, "performance_hint", "performance hint")
        if self.streams < 0:
            raise UserError("Streams cannot be negative; 0 lets the runtime choose.")


@dataclass(frozen=True)
class OrtOptions:
    """ONNX Runtime's own session options (onnxruntime.SessionOptions), any provider.

    Defaults are ONNX Runtime's, so a default adds nothing to a configuration's key.
    """

    WHAT = "ONNX Runtime session"

    enable_mem_pattern: bool = knob(
        True,
        label="Memory pattern (enable_mem_pattern)",
        help="ONNX Runtime's memory pattern optimization (on by default): it plans one block "
        "for a run's intermediate tensors from the shapes it saw; off allocates them one by one.",
        url="mem_pattern",
        cli=Cli("--no-mem-pattern", "invert", group="ONNX Runtime session"),
        widget="mem_pattern",
        key=lambda on: "nomempattern",
        column="enable_mem_pattern",
        applies=("onnxruntime",),
        native="enable_mem_pattern",
    )
    enable_cpu_mem_arena: bool = knob(
        True,
        label="CPU memory arena (enable_cpu_mem_arena)",
        help="ONNX Runtime's CPU arena (on by default): it keeps freed blocks for reuse, which "
        "saves allocations but holds memory at its peak; off returns each block, lowering peak "
        "RSS at some cost in speed.",
        url="cpu_arena",
        cli=Cli("--no-cpu-arena", "invert", group="ONNX Runtime session"),
        widget="cpu_arena",
        key=lambda on: "nocpuarena",
        column="enable_cpu_mem_arena",
        applies=("onnxruntime",),
        native="enable_cpu_mem_arena",
    )
    int8_matmul: Int8Matmul = knob(
        Int8Matmul.AUTO,
        label="INT8 matmul kernels on x86 (session.x64quantprecision)",
        help="How ONNX Runtime multiplies int8 on an x86 CPU. Without VNNI its default U8S8 "
        "kernels add products in 16 bits and can saturate, which changes the outputs; U8U8 is "
        "exact and slower. Auto runs U8U8 where the measuring CPU lacks VNNI and U8S8 where it "
        "has it; each result says which ran.",
        url="int8_matmul",
        widget="int8_matmul",
        cli=Cli(
            "--int8-matmul",
            choices=tuple(m.value for m in Int8Matmul),
            group="ONNX Runtime session",
        ),
        key=lambda mode: f"int8mm-{mode}",
        column="int8_matmul",
        applies=("onnxruntime",),
        native="session.x64quantprecision",
    )

    def __post_init__(self) -> None:
        as_member(self, "int8_matmul", "INT8 matmul kernels")
