"""Typed sweep and configuration specs; stored as JSON on the job, validated on construction."""

from __future__ import annotations

import enum
import itertools
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from backend.cudaoptions import (  # re-exported
    ConvAlgoSearch,
    CudaOptions,
    IoMode,
    check_gpu_options,
)
from backend.errors import UserError
from backend.measure_settings import (  # re-exported
    DEFAULT_MIN_COSINE,
    MEASURE_PRESETS,
    MeasureSettings,
    preset_name,
)
from backend.placement import check_cluster_fields
from backend.trtoptions import TrtOptions, trt_checked, trt_for, trt_for_sweep


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


class PerformanceHint(enum.StrEnum):
    """OpenVINO's PERFORMANCE_HINT: one request as fast as possible, or most requests per second."""

    LATENCY = "latency"
    THROUGHPUT = "throughput"


OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "all")
GPU_PROVIDERS = ("cuda", "tensorrt")  # where device-resident I/O means something


@dataclass(frozen=True)
class Configuration:
    """One point of a sweep: what to build and how to run it."""

    precision: Precision
    provider: str = "cpu"
    batch_size: int = 1
    backend: str = "onnxruntime"
    fixed_shapes: bool = True
    symbolic_dims: tuple[tuple[str, int], ...] = ()
    optimization_level: str = "all"
    intra_op_threads: int = 0
    simplify: bool = False
    calibration_sha256: str | None = None
    calibration_samples: int = 16
    performance_hint: PerformanceHint = PerformanceHint.LATENCY  # runtimes with hints (OpenVINO)
    streams: int = 0  # OpenVINO inference streams; 0 lets the hint choose
    profile: bool = False  # a separate profiled pass after the clean timing (never mixed in)
    fp32_nodes: tuple[str, ...] = ()  # INT8 static only: these nodes stay in FP32 (mixed)
    target: str = ""  # a cluster's hardware target this point runs on; empty: any machine
    replicas: int = 1  # data-parallel copies on as many devices of one node (cluster only)
    io_mode: IoMode = IoMode.END_TO_END  # GPU providers: what the timing includes
    cuda: CudaOptions = field(default_factory=CudaOptions)  # CUDA provider only
    tensorrt: TrtOptions = field(default_factory=TrtOptions)  # TensorRT provider only

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", Precision(self.precision))
        check_cluster_fields(self.target, self.replicas)
        object.__setattr__(self, "performance_hint", _hint(self.performance_hint))
        object.__setattr__(self, "io_mode", IoMode(self.io_mode))
        object.__setattr__(self, "cuda", CudaOptions.from_value(self.cuda))
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
        if self.streams < 0:
            raise UserError("Streams cannot be negative; 0 lets the runtime choose.")
        if self.fp32_nodes and (
            self.precision != Precision.INT8_STATIC or self.backend != "onnxruntime"
        ):
            raise UserError(
                "Nodes kept in FP32 apply to ONNX Runtime's static INT8 only; drop them or pick it."
            )
        if self.batch_size < 1:
            raise UserError(f"Batch size must be at least 1, not {self.batch_size}.")
        if self.optimization_level not in OPTIMIZATION_LEVELS:
            raise UserError(
                f"Unknown optimization level {self.optimization_level!r}; "
                f"choose one of {', '.join(OPTIMIZATION_LEVELS)}."
            )
        if self.intra_op_threads < 0:
            raise UserError("Thread count cannot be negative; 0 lets the runtime choose.")
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
            parts += [self.performance_hint.value, f"s{self.streams}"]
        if self.simplify:
            parts.append("simplified")
        if self.fp32_nodes:
            parts.append("fp32:" + ",".join(self.fp32_nodes))
        if self.io_mode != IoMode.END_TO_END:
            parts.append(self.io_mode.value)
        parts += self.cuda.key_parts + self.tensorrt.key_parts
        if dims:
            parts.append(dims)
        if self.replicas > 1:
            parts.append(f"x{self.replicas}")
        key = "/".join(parts)
        return f"{key}@{self.target}" if self.target else key

    @property
    def label(self) -> str:
        runtime = "" if self.backend == "onnxruntime" else f"{self.backend} "
        mixed = f" mixed ({len(self.fp32_nodes)} in FP32)" if self.fp32_nodes else ""
        replicas = f" x{self.replicas}" if self.replicas > 1 else ""
        where = f" @ {self.target}" if self.target else ""
        extra = "".join(f" {part}" for part in self.cuda.key_parts + self.tensorrt.key_parts)
        io = " device-resident" if self.io_mode == IoMode.DEVICE else ""
        return (
            f"{runtime}{self.provider.upper()} {self.precision.label}{mixed}{extra}{io} "
            f"b{self.batch_size}{replicas}{where}"
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["precision"] = self.precision.value
        data["performance_hint"] = self.performance_hint.value
        data["symbolic_dims"] = dict(self.symbolic_dims)
        data["fp32_nodes"] = list(self.fp32_nodes)
        data["io_mode"] = self.io_mode.value
        data["cuda"] = self.cuda.to_dict()
        return data  # asdict made the TrtOptions a dict already

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Configuration:
        data = dict(data)
        data["symbolic_dims"] = tuple(dict(data.get("symbolic_dims") or {}).items())
        data["fp32_nodes"] = tuple(data.get("fp32_nodes") or ())
        data["cuda"] = CudaOptions.from_value(data.get("cuda"))
        return cls(**data)


SAME_SET = (
    "The evaluation set is the same file as the calibration set; upload a separate .npz for "
    "evaluation, so accuracy is not measured on the samples INT8 was calibrated with."
)


@dataclass(frozen=True)
class SweepSpec:
    """A job submission: the cross product of precisions, providers and batch sizes."""

    precisions: tuple[Precision, ...] = (Precision.FP32,)
    providers: tuple[str, ...] = ("cpu",)
    batch_sizes: tuple[int, ...] = (1,)
    backend: str = "onnxruntime"
    fixed_shapes: bool = True
    symbolic_dims: tuple[tuple[str, int], ...] = ()
    optimization_level: str = "all"
    intra_op_threads: int = 0
    simplify: bool = False
    calibration_sha256: str | None = None
    calibration_samples: int = 16
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    backends: tuple[str, ...] = ()  # several runtimes side by side; empty means (backend,)
    performance_hint: PerformanceHint = PerformanceHint.LATENCY
    streams: int = 0
    profile: bool = False  # profile every configuration in a separate pass
    fp32_nodes: tuple[str, ...] = ()  # adds a mixed INT8 static point keeping these in FP32
    evaluation_sha256: str | None = None  # the user's evaluation .npz (inputs, optional labels)
    # 'cosine=0.99' or 'top1=0.98': after the sweep, search the fastest INT8/FP32 mix meeting it
    search_bound: str = ""
    # outputs with a cosine against FP32 below this (or any NaN/inf) are "wrong outputs", not ok
    min_cosine: float = DEFAULT_MIN_COSINE
    targets: tuple[str, ...] = ()  # cluster hardware targets: every point runs on each
    replicas: int = 1  # data-parallel copies per point (cluster only)
    io_modes: tuple[IoMode, ...] = (IoMode.END_TO_END,)  # GPU providers; others end to end
    cuda: CudaOptions = field(default_factory=CudaOptions)  # applied to the cuda provider
    tensorrt: TrtOptions = field(default_factory=TrtOptions)  # applied to the tensorrt provider
    find_knee: bool = False  # batches 1, 2, 4 ... until throughput stops growing or memory ends
    knee_max_batch: int = 1024

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(dict.fromkeys(str(t) for t in self.targets)))
        object.__setattr__(self, "precisions", tuple(Precision(p) for p in self.precisions))
        object.__setattr__(self, "io_modes", tuple(dict.fromkeys(IoMode(m) for m in self.io_modes)))
        object.__setattr__(self, "cuda", CudaOptions.from_value(self.cuda))
        if self.find_knee:
            if self.knee_max_batch < 1:
                raise UserError("The largest batch of a knee search must be at least 1.")
            doubling = [2**i for i in range(self.knee_max_batch.bit_length())]
            object.__setattr__(self, "batch_sizes", tuple(doubling))
        object.__setattr__(self, "providers", tuple(str(p).lower() for p in self.providers))
        object.__setattr__(self, "tensorrt", trt_for_sweep(self.tensorrt, self.providers))
        object.__setattr__(self, "batch_sizes", tuple(int(b) for b in self.batch_sizes))
        object.__setattr__(self, "symbolic_dims", tuple(dict(self.symbolic_dims).items()))
        backends = tuple(dict.fromkeys(str(b) for b in self.backends))
        if backends:  # one canonical form: backend is the first, backends only when several
            object.__setattr__(self, "backend", backends[0])
        object.__setattr__(self, "backends", backends if len(backends) > 1 else ())
        object.__setattr__(self, "performance_hint", _hint(self.performance_hint))
        object.__setattr__(self, "fp32_nodes", tuple(self.fp32_nodes))
        if self.fp32_nodes and Precision.INT8_STATIC not in self.precisions:
            raise UserError("Nodes kept in FP32 need static INT8 among the precisions.")
        if self.evaluation_sha256 and self.evaluation_sha256 == self.calibration_sha256:
            raise UserError(SAME_SET)
        if self.search_bound:
            _check_search(self)
            object.__setattr__(self, "profile", True)  # the search reads each step's profile
        if isinstance(self.measure, dict):
            object.__setattr__(self, "measure", MeasureSettings(**self.measure))
        if not 0.0 <= float(self.min_cosine) <= 1.0:  # NaN fails too
            raise UserError(
                f"The minimum cosine against FP32 must be from 0 to 1 ({DEFAULT_MIN_COSINE} by "
                f"default), not {self.min_cosine}; outputs below it are marked wrong."
            )
        object.__setattr__(self, "min_cosine", float(self.min_cosine))
        if not self.precisions:
            raise UserError("Pick at least one precision.")
        if not self.providers:
            raise UserError("Pick at least one execution provider.")
        if not self.batch_sizes:
            raise UserError("Pick at least one batch size.")
        if not self.io_modes:
            raise UserError("Pick at least one timing mode (end to end or device-resident).")
        if "cuda" in self.providers and self.cuda.enable_cuda_graph:
            if IoMode.DEVICE not in self.io_modes:  # the graph would apply to no point
                check_gpu_options(self.cuda, IoMode.END_TO_END, "cuda", "onnxruntime", True, True)
        if "cuda" in self.providers and self.cuda.float16_io:
            if Precision.FP16 not in self.precisions:
                check_gpu_options(self.cuda, IoMode.DEVICE, "cuda", "onnxruntime", True, False)
        self.configurations()  # validates every point now, not in the worker

    @property
    def runtimes(self) -> tuple[str, ...]:
        """The backends this sweep runs on, in the order picked."""
        return self.backends or (self.backend,)

    def configurations(self) -> list[Configuration]:
        """Every point; with fp32_nodes, each ONNX Runtime static INT8 point gets a mixed twin."""
        batches = sorted(set(self.batch_sizes))
        places = self.targets or ("",)
        points = [
            (target, runtime, provider, precision, batch, io_mode)
            for target, runtime, provider, precision, io_mode, batch in itertools.product(
                places, self.runtimes, self.providers, self.precisions, self.io_modes, batches
            )
            if io_mode == IoMode.END_TO_END or provider in GPU_PROVIDERS
        ]
        plain = [
            Configuration(
                precision=precision,
                provider=provider,
                batch_size=batch,
                backend=runtime,
                fixed_shapes=self.fixed_shapes,
                symbolic_dims=self.symbolic_dims,
                optimization_level=self.optimization_level,
                intra_op_threads=self.intra_op_threads,
                simplify=self.simplify,
                calibration_sha256=self.calibration_sha256,
                calibration_samples=self.calibration_samples,
                performance_hint=self.performance_hint,
                streams=self.streams,
                profile=self.profile,
                target=target,
                replicas=self.replicas,
                io_mode=io_mode,
                cuda=self._cuda_for(runtime, provider, precision, io_mode),
                tensorrt=trt_for(self.tensorrt, runtime, provider),
            )
            for target, runtime, provider, precision, batch, io_mode in points
        ]
        if not self.fp32_nodes:
            return plain
        mixed = [
            replace(c, fp32_nodes=self.fp32_nodes)
            for c in plain
            if c.precision == Precision.INT8_STATIC and c.backend == "onnxruntime"
        ]
        return plain + mixed

    def _cuda_for(
        self, runtime: str, provider: str, precision: Precision, io_mode: IoMode
    ) -> CudaOptions:
        """The sweep's CUDA options where they apply: float16 I/O on FP16 points, graphs on
        device-resident points, nothing off ONNX Runtime's cuda provider (labels say which)."""
        if provider != "cuda" or runtime != "onnxruntime":
            return CudaOptions()
        return replace(
            self.cuda,
            float16_io=self.cuda.float16_io and precision == Precision.FP16,
            enable_cuda_graph=self.cuda.enable_cuda_graph and io_mode == IoMode.DEVICE,
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["precisions"] = [p.value for p in self.precisions]
        data["providers"] = list(self.providers)
        data["batch_sizes"] = list(self.batch_sizes)
        data["symbolic_dims"] = dict(self.symbolic_dims)
        data["backends"] = list(self.backends)
        data["performance_hint"] = self.performance_hint.value
        data["fp32_nodes"] = list(self.fp32_nodes)
        data["targets"] = list(self.targets)
        data["io_modes"] = [m.value for m in self.io_modes]
        data["cuda"] = self.cuda.to_dict()
        return data  # asdict made the TrtOptions a dict already

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSpec:
        data = dict(data)
        data["precisions"] = tuple(data.get("precisions", ("fp32",)))
        data["providers"] = tuple(data.get("providers", ("cpu",)))
        data["batch_sizes"] = tuple(data.get("batch_sizes", (1,)))
        data["symbolic_dims"] = tuple(dict(data.get("symbolic_dims") or {}).items())
        data["measure"] = MeasureSettings(**(data.get("measure") or {}))
        data["backends"] = tuple(data.get("backends") or ())
        data["fp32_nodes"] = tuple(data.get("fp32_nodes") or ())
        data["targets"] = tuple(data.get("targets") or ())
        data["io_modes"] = tuple(data.get("io_modes") or (IoMode.END_TO_END,))
        data["cuda"] = CudaOptions.from_value(data.get("cuda"))
        return cls(**data)


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


def _hint(value: object) -> PerformanceHint:
    try:
        return PerformanceHint(value)
    except ValueError:
        choices = ", ".join(h.value for h in PerformanceHint)
        raise UserError(f"Unknown performance hint {value!r}; choose one of {choices}.") from None


__all__ = [
    "DEFAULT_MIN_COSINE",
    "GPU_PROVIDERS",
    "MEASURE_PRESETS",
    "OPTIMIZATION_LEVELS",
    "Configuration",
    "ConvAlgoSearch",
    "CudaOptions",
    "IoMode",
    "MeasureSettings",
    "PerformanceHint",
    "Precision",
    "SweepSpec",
    "preset_name",
]
