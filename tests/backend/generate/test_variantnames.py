"""Variant names: every weight-only config the quantizer offers has one name that parses back to
it, old specs' `int4`/`int8` read as they always did, and a name outside the grammar is one
sentence that names the grammar, before anything is stored (pure: no model, no child)."""

from __future__ import annotations

import argparse
import itertools

import pytest

from backend.errors import UserError
from backend.generate import variantnames
from backend.generate.jobspec import GenerationJobSpec
from backend.generate.ovexport import NncfConfig
from backend.generate.weightonly import ALGORITHMS, BLOCK_SIZES, WeightOnlyConfig
from backend.jobs.generation import nncf_config
from backend.knobs.flags import add_knob_arguments, knob_values


def every_config() -> list[WeightOnlyConfig]:
    found = []
    grid = itertools.product(ALGORITHMS, (4, 8), BLOCK_SIZES, (True, False), (None, 0, 4))
    for algorithm, bits, block, symmetric, level in grid:
        try:
            found.append(
                WeightOnlyConfig(algorithm, bits, block, symmetric, level, calibration_text="t")
            )
        except UserError:
            continue  # 8-bit HQQ/GPTQ: not made
    return found


def test_every_config_has_one_name_that_parses_back() -> None:
    configs = set(every_config())
    # RTN 4/8-bit and GPTQ: block x symmetry x level; HQQ is always asymmetric
    assert len(configs) == 2 * 5 * 2 * 3 + 5 * 2 * 3 + 5 * 3
    assert len({variantnames.name_of(c) for c in configs}) == len(configs)
    for config in configs:
        name = variantnames.name_of(config)
        assert variantnames.parse(name, "t") == config
        assert variantnames.canonical(name.upper()) == name


@pytest.mark.parametrize(
    ("name", "canonical", "label"),
    [
        ("fp32", "fp32", "FP32"),
        ("int4", "int4", "INT4 RTN b32"),  # what jobs always quantized
        ("int8", "int8", "INT8 RTN b32"),
        ("int4-rtn-b32", "int4", "INT4 RTN b32"),
        ("int8-b64", "int8-b64", "INT8 RTN b64"),
        ("int4-hqq-b64", "int4-hqq-b64", "INT4 HQQ b64 asym"),
        ("int4-hqq-b64-asym", "int4-hqq-b64", "INT4 HQQ b64 asym"),
        ("int4-gptq-b128-asym-acc4", "int4-gptq-b128-asym-acc4", "INT4 GPTQ b128 asym acc4"),
    ],
)
def test_names_and_labels(name: str, canonical: str, label: str) -> None:
    assert variantnames.canonical(name) == canonical
    assert variantnames.label(name) == label


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("fp16", "does not read; a variant is fp32 or int4/int8"),
        ("int4-b64-hqq", "does not read"),  # out of order
        ("int4-b48", "Block size 48 is not supported"),
        ("int8-hqq", "HQQ does not make 8-bit weights"),
        ("int4-acc5", "Accuracy level 5 is not 0 to 4"),
    ],
)
def test_a_bad_name_is_one_sentence(name: str, says: str) -> None:
    with pytest.raises(UserError, match=says):
        variantnames.canonical(name)
    with pytest.raises(UserError, match=says):
        GenerationJobSpec(variants=("fp32", name))
    assert variantnames.label(name) == name  # shown as given where it cannot be read


def test_the_spec_flag_and_old_specs_read_the_names() -> None:
    old = GenerationJobSpec.from_dict({"kind": "generation", "variants": ["int8", "int4", "fp32"]})
    assert old.variants == ("int8", "int4", "fp32")
    assert old.ordered_variants == ("fp32", "int4", "int8")  # as jobs always ran them
    assert old.point_keys()[1] == "int4|ort-genai|128,64,1"
    parser = argparse.ArgumentParser()
    add_knob_arguments(parser, GenerationJobSpec)
    args = parser.parse_args(["--variants", "fp32, int4-HQQ-b64-asym,int4,int4-rtn"])
    spec = GenerationJobSpec(**knob_values(GenerationJobSpec, args))
    assert spec.variants == ("fp32", "int4-hqq-b64", "int4")  # canonical, each once
    assert GenerationJobSpec.from_dict(spec.to_dict()) == spec
    assert GenerationJobSpec().variants == ("fp32", "int4")  # the flag's default
    with pytest.raises(UserError, match="--variants|does not read"):
        knob_values(GenerationJobSpec, parser.parse_args(["--variants", "int4,q4"]))


def test_openvino_genai_gets_the_nncf_compression_a_name_means() -> None:
    """RTN names map to NNCF's data-free modes (INT8 per channel, as NNCF requires); HQQ, GPTQ
    and an accuracy level are ONNX Runtime's and are one sentence for openvino-genai."""
    assert nncf_config(None) is None
    assert nncf_config(variantnames.parse("int4")) == NncfConfig("INT4_SYM", 32)
    assert nncf_config(variantnames.parse("int4-b64-asym")) == NncfConfig("INT4_ASYM", 64)
    assert nncf_config(variantnames.parse("int8-b128")) == NncfConfig("INT8_SYM", -1)
    with pytest.raises(UserError, match="HQQ is ONNX Runtime's quantizer"):
        nncf_config(variantnames.parse("int4-hqq-b64"))
    with pytest.raises(UserError, match="so choose int4-b64 \\(no -acc\\)"):
        nncf_config(variantnames.parse("int4-b64-acc4"))
