"""Ground truth: ONNX's own backend node tests, predicted and really run on ONNX Runtime CPU.

A sample of every 12th case keeps this quick; bench/compat_groundtruth.py runs all of them.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from backend.compat.groundtruth import collect_cases, decode_input, encode_input, run_cases

STRIDE = 12


def test_cpu_prediction_agrees_with_real_runs_on_a_sample_of_onnx_node_tests(data_dir):
    cases = collect_cases()
    assert len(cases) > 1500
    sample = cases[::STRIDE]
    confusion = run_cases(sample, jobs=2)
    counts = confusion.counts
    print("confusion:", counts, f"agreement {confusion.agreement:.2%}")
    for op, outcomes in confusion.disagreements_by_op().items():
        print(f"  {op}: {[o.name for o in outcomes]}")
    assert sum(counts.values()) == len(sample)
    assert not [o.name for o in confusion.outcomes if o.error == "not run"]
    assert counts["TP"] > 100  # the sample really runs many ops
    assert counts["TN"] >= 5  # the prediction does say "fails" where ORT fails
    assert confusion.agreement >= 0.97


def test_inputs_survive_the_json_lines_file_with_their_exact_dtypes():
    cases = {c.name: c for c in collect_cases()}
    names = (
        "test_attention_4d_causal_bf16",  # ml_dtypes bfloat16 arrays
        "test_cast_FLOAT_to_BFLOAT16",  # a TensorProto
        "test_sequence_insert_at_back",  # a sequence
        "test_string_concat",  # object arrays of strings
    )
    for name in names:
        for value in cases[name].inputs:
            back = decode_input(encode_input(value))
            if isinstance(value, list):
                assert [v.dtype for v in back] == [v.dtype for v in value]
                continue
            original = (
                numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value
            )
            original = np.asarray(original)
            assert back.dtype == original.dtype and back.shape == original.shape
            assert back.tobytes() == original.tobytes() or back.dtype.kind == "O"
    assert decode_input(encode_input(None)) is None
