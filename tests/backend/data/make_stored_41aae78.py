# ruff: noqa
# Runs only in a checkout of 41aae78 (the code whose JSON it records), not on the code after it.
"""Generate stored-JSON blobs with the code at 41aae78 (run from that tree)."""

import json, subprocess, sys
from backend.specs import *
from backend.specs import CudaOptions, TrtOptions, MeasureSettings, IoMode, PerformanceHint
from backend.results import ConfigurationResult, LatencyStats, AccuracyReport, EvaluationReport

commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
specs = [
    SweepSpec(),
    SweepSpec(
        precisions=(Precision.FP32, Precision.FP16, Precision.INT8_STATIC),
        providers=("cpu", "cuda", "tensorrt"),
        batch_sizes=(1,),
        fixed_shapes=True,
        symbolic_dims=(("seq", 128),),
        optimization_level="extended",
        intra_op_threads=4,
        simplify=True,
        calibration_sha256="a" * 64,
        calibration_samples=32,
        measure=MeasureSettings(warmup_runs=3, window_runs=20, max_seconds=12.0),
        profile=True,
        fp32_nodes=("conv1", "fc,2"),
        evaluation_sha256="b" * 64,
        min_cosine=0.98,
        io_modes=(IoMode.END_TO_END, IoMode.DEVICE),
        cuda=CudaOptions(
            conv_algo_search="HEURISTIC",
            use_tf32=False,
            prefer_nhwc=True,
            enable_cuda_graph=True,
            fuse_conv_bias=True,
        ),
        tensorrt=TrtOptions(
            fp16=True,
            timing_cache=True,
            engine_cache=True,
            max_workspace_size=1 << 30,
            builder_optimization_level=4,
        ),
    ),
    SweepSpec(
        precisions=(Precision.FP32, Precision.BF16),
        backends=("openvino", "onnxruntime"),
        performance_hint=PerformanceHint.THROUGHPUT,
        streams=2,
        fixed_shapes=False,
        find_knee=True,
        knee_max_batch=64,
        search_bound="",
    ),
    SweepSpec(precisions=(Precision.FP32, Precision.INT8_STATIC), search_bound="cosine=0.99"),
]
configs = [c for s in specs for c in s.configurations()]
result = ConfigurationResult(
    config_key=configs[5].key,
    configuration=configs[5].to_dict(),
    status="ok",
    providers_requested=["CPUExecutionProvider"],
    providers_used=["CPUExecutionProvider"],
    session_create_ms=12.5,
    first_inference_ms=3.25,
    latency=LatencyStats.from_samples([1.0, 1.5, 2.0, 1.25]),
    throughput=800.0,
    stable=True,
    windows=[1.2, 1.3],
    measure_seconds=2.0,
    peak_rss_mb=120.0,
    accuracy=AccuracyReport(
        max_abs_error=0.01,
        mean_rel_error=0.002,
        cosine_similarity=0.999,
        top1_agreement=1.0,
        compared_outputs=1,
        samples=4,
        finite_reference_values=40,
    ),
    evaluation=EvaluationReport(
        set_sha256="b" * 64,
        samples=8,
        labelled=True,
        top1_accuracy=0.75,
        fp32_top1_accuracy=0.75,
        top1_agreement=1.0,
        cosine_similarity=0.999,
    ),
    notes=["a note"],
    samples_ms=[1.0, 1.5, 2.0, 1.25],
)
from backend import cli
from backend.queue.jobs import spec_to_query

ARGVS = [
    ["submit", "1"],
    [
        "submit",
        "1",
        "--precisions",
        "fp32,fp16",
        "--providers",
        "cpu,cuda",
        "--batch-sizes",
        "1,4",
        "--dim",
        "seq=64",
        "--opt-level",
        "basic",
        "--threads",
        "2",
        "--simplify",
        "--profile",
        "--calibration-samples",
        "8",
        "--min-cosine",
        "0.97",
        "--preset",
        "thorough",
        "--max-seconds",
        "9",
        "--timing",
        "end_to_end,device",
        "--cuda-graph",
        "--cudnn-search",
        "HEURISTIC",
        "--no-tf32",
        "--nhwc",
        "--fp16-io",
        "--small-workspace",
    ],
    [
        "run",
        "1",
        "--quick",
        "--dynamic",
        "--runtimes",
        "openvino,onnxruntime",
        "--find-knee",
        "--knee-max-batch",
        "16",
        "--precisions",
        "fp32,int8_static",
        "--search",
        "top1=0.98",
    ],
    [
        "submit",
        "1",
        "--providers",
        "tensorrt",
        "--precisions",
        "fp32",
        "--trt-option",
        "trt_fp16_enable=1",
        "--trt-option",
        "max_workspace_size=2GiB",
        "--trt-option",
        "engine_cache=on",
        "--trt-option",
        "builder_optimization_level=2",
    ],
]
blob = {
    "queries": [spec_to_query(s) for s in specs],
    "cli": [
        {"argv": argv, "spec": cli._spec(cli.build_parser().parse_args(argv)).to_dict()}
        for argv in ARGVS
    ],
    "commit": commit,
    "made_by": "tests/backend/data/make_stored_41aae78.py run in a checkout of that commit",
    "sweep_specs": [s.to_dict() for s in specs],
    "configurations": [{"key": c.key, "label": c.label, "dict": c.to_dict()} for c in configs],
    "result": result.to_dict(with_samples=True),
}
json.dump(blob, sys.stdout, indent=1, sort_keys=True)
