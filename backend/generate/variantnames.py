"""A generation job's variant names: `fp32`, or a weight-only config written as a short name that
the CLI, the job spec JSON, the Optimize form and its link all carry, parsed only here.

    int{4|8}[-rtn|-hqq|-gptq][-b{16|32|64|128|256}][-asym][-acc{0..4}]

in that order, defaults left out: RTN, block 32, symmetric, the quantizer's default accuracy
level. So `int4` is RTN block 32 symmetric (the variant jobs always had), `int8-b64`,
`int4-hqq-b64` (HQQ always stores zero points, so it is asymmetric without saying so) and
`int4-gptq-b128-asym-acc4`. The canonical name (what `name_of` writes) is what jobs store and
point keys hold, so a name round-trips: name_of(parse(n)) == canonical(n).
"""

from __future__ import annotations

import re

from backend.errors import UserError
from backend.generate.weightonly import ALGORITHMS, BLOCK_SIZES, WeightOnlyConfig

FP32 = "fp32"  # the model as uploaded: the reference every other variant is judged against
PRESETS = (FP32, "int4", "int8")  # what the form offers before its pickers build more
GRAMMAR = (
    "a variant is fp32 or int4/int8 followed, in this order and each optional, by -rtn, -hqq or "
    f"-gptq, -b{{{'|'.join(map(str, BLOCK_SIZES))}}} (block size, default 32), -asym and "
    "-acc0 to -acc4 (accuracy level), e.g. int4, int8-b64, int4-hqq-b64, int4-gptq-b128-asym-acc4"
)
_PATTERN = re.compile(
    rf"int(?P<bits>\d+)(?:-(?P<algorithm>{'|'.join(ALGORITHMS)}))?(?:-b(?P<block>\d+))?"
    r"(?P<asym>-asym)?(?:-acc(?P<level>\d+))?"
)
# stands in for GPTQ's text while only a name is checked (the job gives the real text)
_CHECKING = "(calibration text is given when the job runs)"


def parse(name: str, calibration_text: str = "") -> WeightOnlyConfig | None:
    """The weight-only config a variant name means; None for fp32. A name outside the grammar,
    or one the quantizer cannot make (8-bit HQQ), is one sentence; GPTQ needs its text here."""
    text = str(name).strip().lower()
    if text == FP32:
        return None
    found = _PATTERN.fullmatch(text)
    if found is None:
        raise UserError(f"Variant {str(name)!r} does not read; {GRAMMAR}.")
    level = found["level"]
    try:
        return WeightOnlyConfig(
            algorithm=found["algorithm"] or "rtn",
            bits=int(found["bits"]),
            block_size=int(found["block"] or 32),
            symmetric=not found["asym"],
            accuracy_level=int(level) if level is not None else None,
            calibration_text=calibration_text,
        )
    except UserError as exc:
        raise UserError(f"Variant {str(name)!r}: {exc}") from None


def checked(name: str) -> WeightOnlyConfig | None:
    """parse() for a name alone (a form, a flag, a stored spec): GPTQ's calibration text comes
    with the job (the perplexity text), so a placeholder stands in for it while checking."""
    return parse(name, _CHECKING if "-gptq" in str(name).lower() else "")


def canonical(name: str) -> str:
    """The one spelling of a variant: `INT4-RTN-B32` -> `int4`, `int4-hqq-b64-asym` ->
    `int4-hqq-b64`."""
    return name_of(checked(name))


def name_of(config: WeightOnlyConfig | None) -> str:
    """The shortest name that parses back to `config` (calibration text aside)."""
    if config is None:
        return FP32
    parts = [f"int{config.bits}"]
    if config.algorithm != "rtn":
        parts.append(config.algorithm)
    if config.block_size != 32:
        parts.append(f"b{config.block_size}")
    if not config.symmetric and config.algorithm != "hqq":  # HQQ is asymmetric by itself
        parts.append("asym")
    if config.accuracy_level is not None:
        parts.append(f"acc{config.accuracy_level}")
    return "-".join(parts)


def label(name: str) -> str:
    """What a variant is, for events, Compare's series and the form: `FP32`, `INT4 RTN b32`,
    `INT4 HQQ b64 asym`, `INT4 GPTQ b128 asym acc4`; a name that does not read stays as given."""
    try:
        config = checked(name)
    except UserError:
        return str(name)
    if config is None:
        return "FP32"
    words = [f"INT{config.bits}", config.algorithm.upper(), f"b{config.block_size}"]
    if not config.symmetric:
        words.append("asym")
    if config.accuracy_level is not None:
        words.append(f"acc{config.accuracy_level}")
    return " ".join(words)


def is_gptq(name: str) -> bool:
    config = checked(name)
    return config is not None and config.algorithm == "gptq"
