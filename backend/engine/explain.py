"""Plain "why" lines next to slow or lossy configurations; silent when nothing is remarkable.

With a profile of the run, the speed lines are computed from it (backend.engine.evidence) and
cite its numbers. Without one, rules of thumb look only at what was measured (speed-up,
accuracy), the graph's op counts and the CPU's flags, and say that they are rules of thumb.
"""

from __future__ import annotations

from backend.counts import counted
from backend.engine import evidence
from backend.engine.layerloss import NodeLoss, loss_line
from backend.engine.profile import Profile
from backend.hardware import cpu_features, has_vnni
from backend.results import AccuracyReport
from backend.specs import Precision

SLOWER = 0.9  # speedup_vs_fp32 below this counts as slower than FP32
FASTER = 1.2  # and above this as clearly faster
MIN_TOP1 = 0.99
MIN_COSINE = 0.99
MIN_COSINE_FP16 = 0.999
RAN_EXACT_KERNELS = (  # where ONNX Runtime ran U8U8 (runtimes/ort_int8): part of a speed line
    "ran ONNX Runtime's exact U8U8 kernels (session.x64quantprecision), slower than its U8S8 "
    "ones, which saturate without VNNI; --int8-matmul u8s8 times those"
)
RULE_OF_THUMB = " (A rule of thumb: this run has no profile; sweep with profiling on for evidence.)"


def _has_conv(ops: dict[str, int]) -> bool:
    return any(ops.get(op, 0) for op in ("Conv", "ConvInteger", "ConvTranspose"))


def _speed_lines(
    precision: Precision,
    provider: str,
    speedup: float,
    ops: dict[str, int],
    cpu: dict[str, bool],
    int8_matmul: str = "",
    variant_ops: dict[str, int] | None = None,
) -> list[str]:
    lines: list[str] = []
    on_cpu = provider == "cpu"
    if precision == Precision.FP16 and on_cpu and speedup < FASTER:
        how = f"ran at {speedup:.2f}x the speed of" if speedup < SLOWER else "was no faster than"
        lines.append(
            f"FP16 {how} FP32: ONNX Runtime's CPU provider has few float16 kernels, so it runs "
            "most ops in float32 with Cast nodes around them (at level 'all' it folds them away "
            "and runs plain FP32); FP16 pays off on GPUs (CUDA/TensorRT)."
        )
    if precision == Precision.INT8_DYNAMIC and on_cpu and speedup < SLOWER and _has_conv(ops):
        lines.append(
            f"Dynamic INT8 ran at {speedup:.2f}x the speed of FP32: it turns Conv into "
            "ConvInteger, which has no fast CPU kernel, and quantizes activations at run time; "
            "use static INT8 (QDQ) for conv nets."
        )
    elif precision == Precision.INT8_DYNAMIC and on_cpu and speedup < SLOWER:
        lines.append(_dynamic_matmul_line(speedup, variant_ops, has_vnni(cpu), int8_matmul))
    if precision == Precision.INT8_STATIC and on_cpu:
        vnni = has_vnni(cpu)
        if speedup >= FASTER and vnni:
            lines.append(
                f"Static INT8 is {speedup:.2f}x faster than FP32 thanks to this CPU's VNNI "
                "instructions, which do four int8 multiply-adds where float32 does one."
            )
        elif speedup < FASTER and not vnni:
            exact = f" It {RAN_EXACT_KERNELS}." if int8_matmul == "u8u8" else ""
            lines.append(
                f"Static INT8 ran at {speedup:.2f}x the speed of FP32: no VNNI on this CPU, so "
                f"INT8 gains are small.{exact}"
            )
        elif speedup < SLOWER:
            q_ops = ops.get("QuantizeLinear", 0) + ops.get("DequantizeLinear", 0)
            nodes = f"its {q_ops} Quantize/DequantizeLinear nodes" if q_ops else "the conversions"
            lines.append(
                f"Static INT8 ran at {speedup:.2f}x the speed of FP32 although this CPU has VNNI: "
                f"{nodes} between float and int8 cost more than the int8 math saves when the "
                "model does little work per node."
            )
    if precision.is_int8 and provider == "cuda":
        if speedup < SLOWER:
            lines.append(
                f"INT8 on {provider.upper()} ran at {speedup:.2f}x the speed of FP32: ONNX "
                "Runtime's CUDA provider runs most quantized ops by dequantizing to float; INT8 "
                "pays off with TensorRT."
            )
    return lines


def _dynamic_matmul_line(
    speedup: float, variant_ops: dict[str, int] | None, vnni: bool, int8_matmul: str
) -> str:
    """Dynamic INT8 slower on a graph without Conv: what it does on every call, counted from the
    variant's own graph where the run recorded it."""
    quantizers = (variant_ops or {}).get("DynamicQuantizeLinear", 0)
    what = (
        f"its {counted(quantizers, 'DynamicQuantizeLinear node')} quantize activations on every "
        "call"
        if quantizers
        else "it quantizes the activations of its matmuls on every call"
    )
    line = (
        f"Dynamic INT8 ran at {speedup:.2f}x the speed of FP32: {what} (a min/max pass over the "
        "tensor and a rescale, each time), which here costs more than the int8 matmuls save"
    )
    if not vnni:
        line += "; this CPU has no VNNI, so the int8 math itself gains little"
    if int8_matmul == "u8u8":
        line += f"; it {RAN_EXACT_KERNELS}"
    return line + ". Static INT8 (QDQ) fixes the scales once, at calibration."


def _profile_pointer(runtime: str, precision: Precision, speedup: float) -> str:
    """A configuration slower than FP32 that no rule of thumb explains: say so, and how to get
    the evidence, rather than nothing."""
    return (
        f"{precision.label} ran at {speedup:.2f}x the speed of FP32 on {runtime}, and no rule of "
        "thumb here explains it, so this run cannot say why: sweep with profiling on "
        '(--profile, or "Profile every configuration per node" on the Optimize page) for the '
        "time per op."
    )


def top1_fact(accuracy: AccuracyReport) -> str:
    """Top-1 agreement with the rows it counts (a few rows of random inputs say little), and how
    near a tie FP32's own scores were where the class changed."""
    top1, rows = accuracy.top1_agreement or 0.0, accuracy.top1_rows
    if not rows:  # stored before the count was kept
        return f"top-1 agrees with FP32 on only {top1:.1%} of rows"
    fact = f"top-1 agrees with FP32 on only {round(top1 * rows)} of {rows} rows ({top1:.1%})"
    margin = accuracy.top1_flip_margin
    if margin is not None:  # how close FP32's own call was where the class changed
        fact += (
            f"; where the class changed, FP32's top two scores were at most {margin:.3g} apart "
            f"(this configuration's largest error: {accuracy.max_abs_error:.3g})"
        )
    return fact


def _accuracy_lines(
    precision: Precision,
    accuracy: AccuracyReport,
    losses: list[NodeLoss] | None = None,
    saturating: bool = False,
) -> list[str]:
    top1 = accuracy.top1_agreement
    cosine = accuracy.cosine_similarity
    facts = []
    if top1 is not None and top1 < MIN_TOP1:
        facts.append(top1_fact(accuracy))
    if precision == Precision.FP16:
        if cosine < MIN_COSINE_FP16:
            facts.append(f"cosine similarity to FP32 is {cosine:.4f}")
        if not facts:
            return []
        return [
            "FP16 changed the outputs noticeably (" + "; ".join(facts) + "): some values "
            "overflow or lose precision in float16; keep the sensitive ops in FP32 "
            "(convert_float_to_float16 op_block_list) or use auto mixed precision."
        ]
    if not precision.is_int8:
        return []
    if cosine < MIN_COSINE:
        facts.append(f"cosine similarity to FP32 is {cosine:.3f}")
    if not facts:
        return []
    if saturating:  # the kernels, not the quantization, are the first suspect
        return [
            "INT8 accuracy warning: " + "; ".join(facts) + ". This CPU has no VNNI and the "
            "configuration ran ONNX Runtime's U8S8 kernels, which add products in 16 bits and "
            "can saturate; measure it with exact kernels first (--int8-matmul u8u8, or auto), "
            "or with 7-bit weights (--reduce-range), which keep the fast kernels exact."
        ]
    measured = loss_line(losses) if losses else None
    if measured:  # this run's activations say where the error enters
        return ["INT8 accuracy warning: " + "; ".join(facts) + ". " + measured]
    if precision == Precision.INT8_STATIC:
        advice = (
            "calibrate with more real samples (a calibration .npz of a few hundred typical "
            "inputs), and keep the first and last layers in FP32; weights are already "
            "quantized per channel"
        )
    else:
        advice = (
            "try static INT8 with real calibration samples, or keep the first and last layers "
            "in FP32"
        )
    return [
        "INT8 accuracy warning: "
        + "; ".join(facts)
        + ". To improve it, "
        + advice
        + "."
        + (RULE_OF_THUMB if precision == Precision.INT8_STATIC else "")
    ]


def explain(
    precision: Precision,
    provider: str,
    speedup_vs_fp32: float | None,
    op_histogram: dict[str, int],
    cpu: dict[str, bool] | None = None,
    accuracy: AccuracyReport | None = None,
    profile: Profile | None = None,
    losses: list[NodeLoss] | None = None,
    int8_matmul: str = "",
    variant_ops: dict[str, int] | None = None,
    runtime: str = "onnxruntime",
) -> list[str]:
    """Short plain lines saying why this configuration is slow, fast or lossy; [] if unremarkable.

    speedup_vs_fp32 is FP32 latency divided by this configuration's latency (above 1 is faster);
    op_histogram is the upload's ops, variant_ops the built variant's (where the run kept them);
    int8_matmul: the int8 kernels ONNX Runtime reported it ran (runtime_facts), where it did.
    """
    provider = provider.lower()
    lines: list[str] = []
    # ORT's fast int8 kernels, exact only with VNNI (runtimes/ort_int8)
    saturating = int8_matmul == "u8s8" and not has_vnni(cpu)
    if profile is not None:
        speedup = speedup_vs_fp32 if precision != Precision.FP32 else None
        lines += evidence.facts(profile, precision.label, speedup)
    elif speedup_vs_fp32 is not None and precision != Precision.FP32:
        if cpu is None:
            cpu = cpu_features() if provider == "cpu" else {}
        rules = (  # the rules of thumb know ONNX Runtime's kernels; a profile, any runtime's
            _speed_lines(
                precision, provider, speedup_vs_fp32, op_histogram, cpu, int8_matmul, variant_ops
            )
            if runtime == "onnxruntime"
            else []
        )
        lines += [f"{line}{RULE_OF_THUMB}" for line in rules]
        if not rules and speedup_vs_fp32 < SLOWER:  # slower, and no rule says why
            lines.append(_profile_pointer(runtime, precision, speedup_vs_fp32))
    if accuracy is not None:
        lines += _accuracy_lines(precision, accuracy, losses, saturating)
    return lines
