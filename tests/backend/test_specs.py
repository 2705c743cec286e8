import pytest

from backend.errors import UserError
from backend.specs import Configuration, MeasureSettings, Precision, SweepSpec


def test_sweep_is_the_cross_product_of_its_axes() -> None:
    spec = SweepSpec(
        precisions=("fp32", "int8_static"), providers=("cpu", "cuda"), batch_sizes=(1, 8, 8)
    )
    configs = spec.configurations()
    assert len(configs) == 2 * 2 * 2
    assert len({c.key for c in configs}) == 8


def test_an_axis_value_given_twice_is_one_point() -> None:
    """fp32,fp32 queued two configurations with one key until 2026-12-07: the worker stored one
    and the finished job said 1/2."""
    spec = SweepSpec(
        precisions=("fp32", "int8_static", "fp32"), providers=("cpu", "CPU"), batch_sizes=(1, 1)
    )
    assert spec.precisions == (Precision.FP32, Precision.INT8_STATIC)
    assert spec.providers == ("cpu",)
    configs = spec.configurations()
    assert len(configs) == len({c.key for c in configs}) == 2


def test_spec_round_trips_through_json_dict() -> None:
    spec = SweepSpec(
        precisions=(Precision.FP16,),
        batch_sizes=(4,),
        symbolic_dims=(("seq", 64),),
        measure=MeasureSettings(max_seconds=3),
    )
    again = SweepSpec.from_dict(spec.to_dict())
    assert again == spec
    config = again.configurations()[0]
    assert Configuration.from_dict(config.to_dict()) == config
    assert "seq=64" in config.key


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_sizes": (0,)}, "Batch size must be at least 1"),
        ({"calibration_samples": 0}, "Random calibration samples must be at least 1, not 0"),
        ({"precisions": ("int4",)}, "int4"),
        ({"optimization_level": "max"}, "Unknown optimization level"),
        ({"symbolic_dims": (("seq", 0),)}, "'seq' must be at least 1"),
        ({"providers": ()}, "at least one execution provider"),
    ],
)
def test_invalid_sweeps_are_refused_with_a_clear_reason(kwargs: dict, message: str) -> None:
    with pytest.raises((UserError, ValueError), match=message):
        SweepSpec(**kwargs)
