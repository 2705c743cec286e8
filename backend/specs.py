"""Typed sweep and configuration specs; stored as JSON on the job, validated on construction.

Why long: each knob is declared once on its field (JSON, link, flag, form widget, label, help),
so SweepSpec's declarations are the sweep's one description; splitting them would split that.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, fields, replace
from typing import Any

from backend.cudaoptions import (  # re-exported
    ConvAlgoSearch,
    CudaOptions,
    IoMode,
    check_gpu_options,
)
from backend.errors import UserError
from backend.knobs import Cli, Widget, applies, default_of, key_parts, knob, knobs
from backend.knobs.links import KneeLink, MeasureLink
from backend.knobs.serialize import from_json, to_json
from backend.measure_settings import (  # re-exported
    DEFAULT_MIN_COSINE,
    MEASURE_PRESETS,
    MeasureSettings,
    preset_name,
)
from backend.placement import check_cluster_fields
from backend.pointknobs import LINES, OPTIMIZATION_LEVELS, PointKnobs  # re-exported
from backend.pricing import PRICE_KNOB, checked
from backend.runtimeenvs import env_knob, get_env
from backend.runtimeoptions import (  # re-exported
    Int8Matmul,
    OpenVinoOptions,
    OrtOptions,
    PerformanceHint,
)
from backend.trtoptions import TrtOptions, trt_checked, trt_for_sweep


class Precision(str, enum.Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    INT8_DYNAMIC = "int8_dynamic"
    INT8_STATIC = "int8_static"
    BF16 = "bf16"  # OpenVINO on CPUs with AVX-512 BF16 or AMX; offered only where supported

    @property
    def label(self) -> str:
        return {
            "fp32": "FP32",
            "fp16": "FP16",
            "int8_dynamic": "INT8 dynamic",
            "int8_static": "INT8 static (QDQ)",
            "bf16": "BF16",
        }[self.value]

    @property
    def is_int8(self) -> bool:
        return self in (Precision.INT8_STATIC, Precision.INT8_DYNAMIC)


GPU_PROVIDERS = ("cuda", "tensorrt")  # where device-resident I/O means something
BATCH_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # the batch sizes the Optimize form offers
RUNTIME_LABELS = {
    "onnxruntime": "ONNX Runtime",
    "openvino": "OpenVINO",
    "tensorrt": "TensorRT",
}  # where device-resident I/O means something


SAME_SET = (
    "The evaluation set is the same file as the calibration set; upload a separate .npz for "
    "evaluation, so accuracy is not measured on the samples INT8 was calibrated with."
)


def check_threads(count: int) -> None:
    """A thread count a runtime takes (a measured point's, a served model's)."""
    if count < 0:
        raise UserError("Thread count cannot be negative; 0 lets the runtime choose.")


@dataclass(frozen=True)
class Configuration(PointKnobs):
    """One point of a sweep: what to build and how to run it."""

    precision: Precision = knob(column="precision")
    provider: str = knob("cpu", column="provider")
    batch_size: int = knob(1, column="batch_size")
    backend: str = knob("onnxruntime", column="backend")
    fp32_nodes: tuple[str, ...] = ()  # INT8 static only: these nodes stay in FP32 (mixed)
    target: str = knob("", column="target")  # a cluster's hardware target; empty: any machine
    io_mode: IoMode = IoMode.END_TO_END  # GPU providers: what the timing includes

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", Precision(self.precision))
        check_cluster_fields(self.target, self.replicas)
        object.__setattr__(self, "io_mode", IoMode(self.io_mode))
        self._typed_groups()
        check_gpu_options(
            self.cuda,
            self.io_mode,
            self.provider,
            self.backend,
            self.fixed_shapes,
            self.precision == Precision.FP16,
        )
        object.__setattr__(self, "tensorrt", trt_checked(self))
        object.__setattr__(self, "fp32_nodes", tuple(sorted(set(self.fp32_nodes))))
        # 7-bit weights and the int8 matmul kernels are settings of ONNX Runtime's INT8 only: an
        # FP32 configuration named "int8mm-u8s8" was the same measurement under another name
        if not (self.precision.is_int8 and self.backend == "onnxruntime"):
            object.__setattr__(self, "int8_reduce_range", False)
            if self.onnxruntime.int8_matmul != Int8Matmul.AUTO:
                plain = replace(self.onnxruntime, int8_matmul=Int8Matmul.AUTO)
                object.__setattr__(self, "onnxruntime", plain)
        if self.fp32_nodes and (
            self.precision != Precision.INT8_STATIC or self.backend != "onnxruntime"
        ):
            raise UserError(
                "Nodes kept in FP32 apply to ONNX Runtime's static INT8 only; drop them or pick it."
            )
        if self.batch_size < 1:
            raise UserError(f"Batch size must be at least 1, not {self.batch_size}.")
        if self.calibration_samples < 1:  # was taken as 1 in silence, the key saying n0
            raise UserError(
                f"Random calibration samples must be at least 1, not {self.calibration_samples}."
            )
        if self.optimization_level not in OPTIMIZATION_LEVELS:
            raise UserError(
                f"Unknown optimization level {self.optimization_level!r}; "
                f"choose one of {', '.join(OPTIMIZATION_LEVELS)}."
            )
        check_threads(self.intra_op_threads)
        dims = tuple(sorted((str(k), int(v)) for k, v in dict(self.symbolic_dims).items()))
        for name, value in dims:
            if value < 1:
                raise UserError(f"Symbolic dimension {name!r} must be at least 1, not {value}.")
        object.__setattr__(self, "symbolic_dims", dims)

    @property
    def key(self) -> str:
        """Stable identity inside a job; the unique key that prevents duplicate results."""
        shape = "fixed" if self.fixed_shapes else "dynamic"
        dims = ",".join(f"{k}={v}" for k, v in self.symbolic_dims)
        parts = [self.backend, self.provider, self.precision.value, f"b{self.batch_size}", shape]
        parts += [self.optimization_level, f"t{self.intra_op_threads}"]
        if self.backend != "onnxruntime":  # ONNX Runtime keys stay as they were before hints
            parts += [self.openvino.performance_hint.value, f"s{self.openvino.streams}"]
        if self.simplify:
            parts.append("simplified")
        if self.int8_reduce_range:
            parts.append("w7")
        if self.fp32_nodes:
            parts.append("fp32:" + ",".join(self.fp32_nodes))
        if self.io_mode != IoMode.END_TO_END:
            parts.append(self.io_mode.value)
        parts += self._option_parts()
        if dims:
            parts.append(dims)
        if self.replicas > 1:
            parts.append(f"x{self.replicas}")
        key = "/".join(parts)
        return f"{key}@{self.target}" if self.target else key

    def _option_parts(self) -> list[str]:
        """The runtime groups' parts: only what differs from the runtime's own defaults."""
        return self.cuda.key_parts + self.tensorrt.key_parts + key_parts(self.onnxruntime)

    @property
    def label(self) -> str:
        runtime = "" if self.backend == "onnxruntime" else f"{self.backend} "
        mixed = f" mixed ({len(self.fp32_nodes)} in FP32)" if self.fp32_nodes else ""
        mixed += " 7-bit weights" if self.int8_reduce_range else ""
        replicas = f" x{self.replicas}" if self.replicas > 1 else ""
        where = f" @ {self.target}" if self.target else ""
        extra = "".join(f" {part}" for part in self._option_parts())
        io = " device-resident" if self.io_mode == IoMode.DEVICE else ""
        return (
            f"{runtime}{self.provider.upper()} {self.precision.label}{mixed}{extra}{io} "
            f"b{self.batch_size}{replicas}{where}"
        )

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Configuration:
        return from_json(cls, data)


GPU = CudaOptions.GPU


@dataclass(frozen=True)
class SweepSpec(PointKnobs):
    """A job submission: the cross product of precisions, providers and batch sizes."""

    precisions: tuple[Precision, ...] = knob(
        (Precision.FP32,),
        label="Precisions",
        help="FP32 is the reference every other precision's accuracy is compared with.",
        url="precisions",
        url_always=True,
        widget=Widget("url_precisions", start=(Precision.FP32, Precision.INT8_STATIC)),
        cli=Cli(
            "--precisions",
            "csv",
            default="fp32,int8_static",
            help="comma list of " + ", ".join(p.value for p in Precision),
        ),
    )
    providers: tuple[str, ...] = knob(
        ("cpu",),
        label="Execution providers",
        url="providers",
        url_always=True,
        widget=Widget("url_providers", labels=str.upper),  # offered: the page's, for the host
        cli=Cli("--providers", "csv", help="comma list: cpu, cuda, tensorrt"),
    )
    batch_sizes: tuple[int, ...] = knob(
        (1,),
        label="Batch sizes",
        help="Latency is per call; a call processes one batch.",
        url="batches",
        url_always=True,
        widget=Widget("url_batches", choices=BATCH_CHOICES),
        cli=Cli("--batch-sizes", "csv", help="comma list, e.g. 1,8,32"),
    )
    backend: str = knob("onnxruntime", url="backend", url_always=True)
    measure: MeasureSettings = knob(factory=MeasureSettings, link=MeasureLink())
    backends: tuple[str, ...] = knob(  # several runtimes side by side; empty means (backend,)
        (),
        label="Runtimes",
        help="Each precision is measured on each runtime, side by side; every accuracy is "
        "against the same FP32 reference.",
        url="runtimes",
        widget=Widget("url_runtimes", labels=RUNTIME_LABELS),  # offered: those usable here
        cli=Cli("--runtimes", "csv", default="onnxruntime", help="onnxruntime,openvino"),
    )
    fp32_nodes: tuple[str, ...] = knob(  # a mixed INT8 twin of each ONNX Runtime INT8 static point
        (),
        label="Mixed INT8: nodes to keep in FP32, one per line (adds a mixed point)",
        help="Names as the Graph page shows them (an unnamed node is OP_INDEX, e.g. Conv_3), "
        "from the profile or `optiboard mixed`; a name not in the graph is "
        "refused when you submit.",
        url="fp32_nodes",
        codec=LINES,
        widget="fp32_nodes",
    )
    evaluation_sha256: str | None = knob(None, url="evaluation")  # CLI: --evaluation FILE
    # 'cosine=0.99' or 'top1=0.98': after the sweep, search the fastest INT8/FP32 mix meeting it
    search_bound: str = knob(
        "",
        help="then search the fastest INT8/FP32 mix meeting e.g. cosine=0.99",
        url="search",
        cli=Cli("--search"),
    )
    # outputs with a cosine against FP32 below this (or any NaN/inf) are "wrong outputs", not ok
    min_cosine: float = knob(
        DEFAULT_MIN_COSINE,
        label="Wrong outputs below this cosine against FP32",
        help="A configuration with any NaN or infinite output, or a cosine similarity to the "
        "FP32 reference below this, is stored as 'wrong outputs': never plotted as a speedup, "
        "ranked, recommended or taken as the knee.",
        url="min_cosine",
        widget=Widget("url_min_cosine", limits=(0.0, 1.0), step=0.001, format="%.4f"),
        cli=Cli(
            "--min-cosine",
            help="outputs with a cosine against FP32 below this, or any NaN/inf, are 'wrong "
            f"outputs': never ranked, plotted or recommended (default {DEFAULT_MIN_COSINE})",
        ),
    )
    targets: tuple[str, ...] = knob(  # cluster targets: every point on each
        (),
        label="Hardware targets",
        help="Every configuration runs on each target picked; Compare shows them side by "
        "side. None picked: any node of the cluster.",
        url="targets",
        widget="url_targets",  # offered: the targets the cluster's nodes announced
    )
    io_modes: tuple[IoMode, ...] = knob(  # GPU providers; others end to end
        (IoMode.END_TO_END,),
        label="What the timing includes",
        help="End to end: host arrays in and out, as a client sees it. Device-resident: "
        "inputs and outputs already on the GPU (IOBinding). Both: the copy share is shown.",
        url="timing",
        widget=Widget("io_modes", within="cuda"),
        cli=Cli(
            "--timing",
            "csv",
            group=GPU,
            help="comma list: end_to_end (host arrays, copies timed), device (IOBinding)",
        ),
    )
    find_knee: bool = knob(  # batches 1, 2, 4 ... until throughput stops growing or memory ends
        False,
        label="Find the knee: batches 1, 2, 4 ... until throughput gains stay under 5%",
        link=KneeLink(),
        widget=Widget("find_knee", within="cuda"),
        cli=Cli(
            "--find-knee", "flag", group=GPU, help="batches 1,2,4,... until throughput flattens"
        ),
    )
    knee_max_batch: int = knob(1024, cli=Cli("--knee-max-batch", group=GPU))
    prices: tuple[tuple[str, float], ...] = knob((), **PRICE_KNOB)  # (): the setting's, when read
    # the runtime environment every measurement child runs under (backend/runtimeenvs.py)
    runtime_env: str = knob(
        "default",
        label="Runtime environment",
        help="The measurement children run under this environment's interpreter; every "
        "result records it. One that is not set up is refused when you submit, saying how.",
        widget="url_env",  # offered where environments beside the project's are set up
        **env_knob("the children run under"),
    )
    baseline_of: int | None = knob(None, url="baseline")  # a re-run of this pinned job

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(dict.fromkeys(str(t) for t in self.targets)))
        object.__setattr__(self, "prices", checked(self.prices) if self.prices else ())
        precisions = dict.fromkeys(Precision(p) for p in self.precisions)  # each once
        object.__setattr__(self, "precisions", tuple(precisions))
        object.__setattr__(self, "io_modes", tuple(dict.fromkeys(IoMode(m) for m in self.io_modes)))
        self._typed_groups()
        if self.find_knee:
            if self.knee_max_batch < 1:
                raise UserError("The largest batch of a knee search must be at least 1.")
            doubling = [2**i for i in range(self.knee_max_batch.bit_length())]
            object.__setattr__(self, "batch_sizes", tuple(doubling))
        providers = dict.fromkeys(str(p).lower() for p in self.providers)
        object.__setattr__(self, "providers", tuple(providers))
        object.__setattr__(self, "tensorrt", trt_for_sweep(self.tensorrt, self.providers))
        object.__setattr__(self, "batch_sizes", tuple(int(b) for b in self.batch_sizes))
        object.__setattr__(self, "symbolic_dims", tuple(dict(self.symbolic_dims).items()))
        backends = tuple(dict.fromkeys(str(b) for b in self.backends))
        if backends:  # one canonical form: backend is the first, backends only when several
            object.__setattr__(self, "backend", backends[0])
        object.__setattr__(self, "backends", backends if len(backends) > 1 else ())
        object.__setattr__(self, "fp32_nodes", tuple(self.fp32_nodes))
        if self.fp32_nodes and Precision.INT8_STATIC not in self.precisions:
            raise UserError("Nodes kept in FP32 need static INT8 among the precisions.")
        if self.evaluation_sha256 and self.evaluation_sha256 == self.calibration_sha256:
            raise UserError(SAME_SET)
        if self.search_bound:
            _check_search(self)
            object.__setattr__(self, "profile", True)  # the search reads each step's profile
        if not 0.0 <= float(self.min_cosine) <= 1.0:  # NaN fails too
            raise UserError(
                f"The minimum cosine against FP32 must be from 0 to 1 ({DEFAULT_MIN_COSINE} by "
                f"default), not {self.min_cosine}; outputs below it are marked wrong."
            )
        object.__setattr__(self, "min_cosine", float(self.min_cosine))
        for picked, what in (
            (self.precisions, "precision"),
            (self.providers, "execution provider"),
            (self.batch_sizes, "batch size"),
            (self.io_modes, "timing mode (end to end or device-resident)"),
        ):
            if not picked:
                raise UserError(f"Pick at least one {what}.")
        if "cuda" in self.providers and self.cuda.enable_cuda_graph:
            if IoMode.DEVICE not in self.io_modes:  # the graph would apply to no point
                check_gpu_options(self.cuda, IoMode.END_TO_END, "cuda", "onnxruntime", True, True)
        if "cuda" in self.providers and self.cuda.float16_io:
            if Precision.FP16 not in self.precisions:
                check_gpu_options(self.cuda, IoMode.DEVICE, "cuda", "onnxruntime", True, False)
        get_env(self.runtime_env)  # an unknown name in one sentence; not set up: at submit
        self.configurations()  # validates every point now, not in the worker

    @property
    def runtimes(self) -> tuple[str, ...]:
        """The runtimes this sweep runs on, in the order picked."""
        return self.backends or (self.backend,)

    def configurations(self) -> list[Configuration]:
        """Every point; with fp32_nodes, each ONNX Runtime static INT8 point gets a mixed twin.

        The shared knobs are copied by name; a runtime group reaches only the points its
        declaration says it applies to (the others keep its defaults)."""
        batches = sorted(set(self.batch_sizes))
        places = self.targets or ("",)
        shared = {f.name: getattr(self, f.name) for f in fields(PointKnobs)}
        plain = []
        for target, runtime, provider, precision, io_mode, batch in itertools.product(
            places, self.runtimes, self.providers, self.precisions, self.io_modes, batches
        ):
            if io_mode != IoMode.END_TO_END and provider not in GPU_PROVIDERS:
                continue
            groups = {
                f.name: getattr(self, f.name) if applies(k, runtime, provider) else default_of(f)
                for f, k, _ in knobs(PointKnobs)
                if k.applies
            }
            groups["cuda"] = self._cuda_for(groups["cuda"], precision, io_mode)
            plain.append(
                Configuration(
                    **(shared | groups),
                    precision=precision,
                    provider=provider,
                    batch_size=batch,
                    backend=runtime,
                    target=target,
                    io_mode=io_mode,
                )
            )
        if not self.fp32_nodes:
            return plain
        mixed = [
            replace(c, fp32_nodes=self.fp32_nodes)
            for c in plain
            if c.precision == Precision.INT8_STATIC and c.backend == "onnxruntime"
        ]
        return plain + mixed

    @staticmethod
    def _cuda_for(cuda: CudaOptions, precision: Precision, io_mode: IoMode) -> CudaOptions:
        """Float16 I/O on FP16 points only, graphs on device-resident points only (labels say
        which); off ONNX Runtime's cuda provider the group is at its defaults already."""
        return replace(
            cuda,
            float16_io=cuda.float16_io and precision == Precision.FP16,
            enable_cuda_graph=cuda.enable_cuda_graph and io_mode == IoMode.DEVICE,
        )

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSpec:
        return from_json(cls, data)


def _check_search(spec: SweepSpec) -> None:
    """A mixed-precision search needs ONNX Runtime's static INT8 and a bound it can read
    (the bound's own checks live in backend.engine.mixed.AccuracyBound)."""
    metric, _, value = spec.search_bound.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if metric not in ("cosine", "top1") or not 0.0 < number <= 1.0:
        raise UserError(
            f"Write the search bound as cosine=0.99 or top1=0.98, not {spec.search_bound!r}."
        )
    if Precision.INT8_STATIC not in spec.precisions or "onnxruntime" not in spec.runtimes:
        raise UserError(
            "A mixed-precision search needs ONNX Runtime's static INT8 among the precisions."
        )


__all__ = [
    "DEFAULT_MIN_COSINE",
    "BATCH_CHOICES",
    "GPU_PROVIDERS",
    "MEASURE_PRESETS",
    "OPTIMIZATION_LEVELS",
    "Configuration",
    "ConvAlgoSearch",
    "CudaOptions",
    "IoMode",
    "MeasureSettings",
    "Int8Matmul",
    "OpenVinoOptions",
    "OrtOptions",
    "PerformanceHint",
    "Precision",
    "RUNTIME_LABELS",
    "SweepSpec",
    "TrtOptions",
    "preset_name",
]
