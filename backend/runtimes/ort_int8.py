"""Which int8 matmul kernels an ONNX Runtime session runs on this CPU, and the sentence saying so.

ONNX Runtime's x86 kernels multiply uint8 activations by int8 weights (U8S8). Without VNNI they
add pairs of products in 16 bits, which saturates on large enough values: on an AVX2 EPYC a
static INT8 MLP gave cosine 0.88 against FP32, and 0.9999 with session.x64quantprecision=1,
which turns int8 weights with values past +-64 into uint8 (U8U8, exact, slower). ORT applies it
at optimization levels extended and all only. The knob is OrtOptions.int8_matmul; this module
turns it into the session's setting and the result's words.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any

from backend.hardware import has_vnni
from backend.runtimeoptions import Int8Matmul
from backend.specs import Configuration

X64_QUANT_PRECISION = "session.x64quantprecision"  # ORT's session config key (U8U8 when "1")
X86_MACHINES = ("x86_64", "amd64", "i386", "i686")
UNREWRITTEN_LEVELS = ("disable", "basic")  # the rewrite is a level-2 (extended) transformer


@dataclass(frozen=True)
class Int8MatmulChoice:
    """What a session runs: `ran` is "u8u8", "u8s8" or "not x86"; `note` says why, where a
    reader of the numbers needs to know ("" where ORT's default ran where it is exact)."""

    exact: bool  # session.x64quantprecision set
    ran: str
    note: str


def choose(
    wanted: Int8Matmul,
    level: str = "all",
    cpu: dict[str, bool] | None = None,
    machine: str | None = None,
    seven_bit: bool = False,
) -> Int8MatmulChoice:
    """The kernels for `wanted` at graph optimization `level` on this CPU (or the flags and
    machine given); seven_bit: the variant's int8 weights were quantized to 7 bits."""
    machine = (machine or platform.machine()).lower()
    if machine not in X86_MACHINES:
        note = (
            f"{X64_QUANT_PRECISION} has no effect on this {machine} CPU, so INT8 ran on "
            "ONNX Runtime's own kernels for it."
            if wanted != Int8Matmul.AUTO
            else ""
        )
        return Int8MatmulChoice(False, "not x86", note)
    vnni = has_vnni(cpu)
    if seven_bit:  # no sum can pass int16, and ORT's rewrite skips weights within +-64
        note = (
            ""
            if vnni
            else "INT8 weights are 7-bit (reduce_range), so ONNX Runtime's fast U8S8 kernels "
            "cannot saturate on this CPU without VNNI: they ran as they are, exactly."
        )
        return Int8MatmulChoice(False, "u8s8", note)
    if level in UNREWRITTEN_LEVELS:
        note = (
            ""
            if vnni
            else f"At optimization level {level} ONNX Runtime does not apply "
            f"{X64_QUANT_PRECISION} (its weight rewrite runs at extended and all), so the int8 "
            "kernels left in the graph (a dynamic INT8 graph's MatMulInteger) run as U8S8, "
            "which add products in 16 bits on this CPU without VNNI and can saturate; static "
            "INT8's Q/DQ nodes are not fused at this level and compute in float."
        )
        return Int8MatmulChoice(False, "u8s8", note)
    return _at_full_level(wanted, vnni)


def _at_full_level(wanted: Int8Matmul, vnni: bool) -> Int8MatmulChoice:
    """The kernels at levels extended and all, where ORT applies the setting."""
    if wanted == Int8Matmul.U8U8:
        also = ", which this CPU's VNNI runs exactly too" if vnni else ""
        return Int8MatmulChoice(
            True,
            "u8u8",
            f"INT8 matmuls ran as U8U8 ({X64_QUANT_PRECISION}=1), as asked: exact, and slower "
            f"than ONNX Runtime's default U8S8{also}.",
        )
    if vnni:
        return Int8MatmulChoice(False, "u8s8", "")
    if wanted == Int8Matmul.U8S8:
        return Int8MatmulChoice(
            False,
            "u8s8",
            "INT8 matmuls ran as U8S8, as asked: this CPU has no VNNI, so they add products in "
            "16 bits, which can saturate and change the outputs; the accuracy columns say "
            "whether they did here.",
        )
    return Int8MatmulChoice(
        True,
        "u8u8",
        f"INT8 matmuls ran as U8U8 ({X64_QUANT_PRECISION}=1): this CPU has no VNNI, where ONNX "
        "Runtime's default U8S8 kernels add products in 16 bits and can saturate; U8U8 is exact "
        "but slower (--int8-matmul u8s8 measures the fast kernels; --reduce-range keeps them "
        "exact with 7-bit weights).",
    )


def configure(session_options: Any, config: Configuration) -> Int8MatmulChoice:
    """Set the int8 kernels `config` asks for on ONNX Runtime's SessionOptions; what runs, why."""
    choice = choose(
        config.onnxruntime.int8_matmul,
        config.optimization_level,
        seven_bit=config.int8_reduce_range,
    )
    if choice.exact:
        session_options.add_session_config_entry(X64_QUANT_PRECISION, "1")
    return choice
