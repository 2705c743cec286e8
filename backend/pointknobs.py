"""The knobs every point of a sweep shares, declared once: SweepSpec and Configuration inherit them.

SweepSpec.configurations() copies them to each point by name; a runtime group (openvino,
onnxruntime, cuda, tensorrt) reaches only the points its `applies` names.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.cudaoptions import CudaOptions
from backend.knobs import Cli, Codec, Widget, group_types, knob
from backend.knobs.serialize import from_json
from backend.runtimeoptions import OpenVinoOptions, OrtOptions
from backend.trtoptions import TrtOptions

OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "all")
SHAPES = Codec(lambda fixed: "fixed" if fixed else "dynamic", lambda text: text != "dynamic")
LINES = Codec("\n".join, lambda text: tuple(n for n in text.split("\n") if n))  # names hold commas


@dataclass(frozen=True, kw_only=True)
class PointKnobs:
    """The knobs every point of a sweep shares, declared once for SweepSpec and Configuration
    (both inherit them); configurations() copies them by name."""

    fixed_shapes: bool = knob(
        True,
        label="Shapes",
        url="shapes",
        codec=SHAPES,
        url_always=True,
        widget=Widget(
            "url_shapes",
            choices=(True, False),
            labels={
                True: "Fixed: bake the batch size and dims into the graph",
                False: "Dynamic: keep symbolic dims in the graph",
            },
        ),
        cli=Cli("--dynamic", "invert", help="keep the batch axis dynamic"),
        column="fixed_shapes",
    )
    symbolic_dims: tuple[tuple[str, int], ...] = knob(
        (),
        label="Values for the model's other symbolic dimensions (the first is the batch):",
        help="value for a symbolic dimension other than batch, e.g. seq=128",
        url="dims",
        widget=Widget("dim", limits=(1, 1 << 31), start=16),  # start: each named one's
        cli=Cli("--dim", "pairs", metavar="NAME=VALUE"),
    )
    optimization_level: str = knob(
        "all",
        label="Graph optimization level",
        help="ONNX Runtime's graph optimizations; 'all' includes layout changes.",
        url="opt",
        url_always=True,
        widget=Widget("url_opt", choices=OPTIMIZATION_LEVELS),
        cli=Cli("--opt-level", choices=OPTIMIZATION_LEVELS),
        column="optimization_level",
    )
    intra_op_threads: int = knob(
        0,
        label="Intra-op threads (0 = let the runtime choose)",
        url="threads",
        url_always=True,
        widget=Widget("url_threads", limits=(0, 256)),
        cli=Cli("--threads", help="intra-op threads; 0 = runtime's"),
        column="intra_op_threads",
    )
    simplify: bool = knob(
        False,
        label="Simplify the graph first (onnxslim)",
        url="simplify",
        url_always=True,
        widget="url_simplify",
        cli=Cli("--simplify", "flag", help="simplify with onnxslim first"),
        column="simplify",
    )
    calibration_sha256: str | None = knob(None, url="calibration")  # CLI: --calibration FILE
    calibration_samples: int = knob(
        16,
        label="Random calibration samples",
        help="static INT8: how many calibration samples to use",
        url="cal_samples",
        url_always=True,
        widget=Widget("url_cal_samples", limits=(1, 1024)),
        cli=Cli("--calibration-samples"),
    )
    int8_reduce_range: bool = knob(
        False,
        label="7-bit INT8 weights (reduce_range)",
        help="ONNX Runtime's INT8: quantize the weights to 7 bits, so its fast U8S8 kernels "
        "cannot saturate on a CPU without VNNI: exact there in any ONNX Runtime, Triton's "
        "included, at some cost in accuracy.",
        url="reduce_range",
        widget="reduce_range",
        cli=Cli("--reduce-range", "flag", help="7-bit INT8 weights (ONNX Runtime's INT8)"),
        column="int8_reduce_range",
        applies=("onnxruntime",),
    )
    profile: bool = knob(  # a separate profiled pass after the clean timing (never mixed in)
        False,
        label="Profile every configuration per node",
        help="ONNX Runtime's own profiler, in a separate pass after the clean timing: the why "
        "lines then cite it and the Jobs page shows per-node bars.",
        url="profile",
        widget="url_profile",
        cli=Cli("--profile", "flag", help="per-node profile (separate pass)"),
    )
    replicas: int = knob(  # data-parallel copies (cluster)
        1,
        label="Replicas (data-parallel copies on one node's devices)",
        help="N copies run at once on N GPUs (or share the CPU) of one node; the result "
        "gives aggregate and per-device throughput.",
        url="replicas",
        widget=Widget("replicas", limits=(1, 64)),
        column="replicas",
    )
    openvino: OpenVinoOptions = knob(
        factory=OpenVinoOptions,
        applies=("openvino",),
        was=("performance_hint", "streams"),
        widget="openvino",  # no label: its knobs sit in the form's column
    )
    onnxruntime: OrtOptions = knob(
        factory=OrtOptions,
        label="ONNX Runtime session settings",  # a nested group's label: its expander's title
        applies=("onnxruntime",),
        widget="onnxruntime",
    )
    cuda: CudaOptions = knob(
        factory=CudaOptions,
        label="CUDA provider settings",
        url="cuda",
        applies=("onnxruntime/cuda",),
        widget=Widget("cuda", expanded=True),
    )
    tensorrt: TrtOptions = knob(
        factory=TrtOptions,
        label="TensorRT provider settings",
        url="trt",
        widget=Widget("tensorrt", expanded=True),
        applies=("onnxruntime/tensorrt",),
        help="tensorrt provider, repeatable: fp16=1 int8=1 int8_calibration_table=FILE "
        "timing_cache=1 engine_cache=1 engine_cache_path=DIR max_workspace_size=4GiB "
        "builder_optimization_level=0..5 (or ORT's trt_* names)",
        cli=Cli("--trt-option", "options", group="TensorRT (the tensorrt provider)"),
    )

    def _typed_groups(self) -> None:
        """Nested groups given as dicts (a link, a stored job) become their typed objects."""
        for name, group in group_types(type(self)).items():
            value = getattr(self, name)
            object.__setattr__(self, name, from_json(group, value, what=getattr(group, "WHAT", "")))
