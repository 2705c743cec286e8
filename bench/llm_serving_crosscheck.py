"""One LLM load point on the real Triton server, measured by Optiboard's generator and by aiperf.

Run: .venv/bin/python bench/llm_serving_crosscheck.py [--concurrency 2 --prompt-tokens 16
     --output-tokens 32 --requests 200] [--folder GENAI_FOLDER --tokenizer HF_FOLDER]
     [--out bench/results/llm_serving_crosscheck.txt]

The server is `optiboard serve llm`'s: the decoupled Python-backend model streaming one response
per token from ONNX Runtime GenAI (backend/serving/llm.py), on Triton's generate_stream endpoint.
Without --folder, the trained tiny Llama of the tests (tests/llm_models.py) is served.
Optiboard's generator (backend/serving/llm_loadgen.py, in its child process) sends token-id
prompts; aiperf (NVIDIA's GenAI-Perf successor) drives the same server through its `template`
endpoint: text prompts of the same token count from the model's tokenizer as `text_input`, the
token text read back from `text_output`. The order is Optiboard, aiperf, Optiboard again, so
drift of the host between runs shows. aiperf lives in a venv of its own (--aiperf-venv, created
with pip on first use: its dependencies, pandas to kubernetes, stay out of .venv).

ITL is defined two ways, and both are printed: aiperf's is each request's mean gap,
(latency - TTFT) / (tokens - 1), with percentiles over requests (Optiboard's itl_request_mean);
Optiboard's ITL percentiles are over every gap of every request (aiperf's inter_chunk_latency).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.serving.llm import STREAM_PATH, LlmServing, folder_facts, serve_llm  # noqa: E402
from backend.serving.llm_loadgen import run_llm_load_in_child  # noqa: E402
from backend.serving.llm_types import LlmLoadPoint, PromptShape  # noqa: E402
from backend.serving.server import find_environment  # noqa: E402
from backend.serving.types import LoadSpec, Scenario  # noqa: E402
from backend.specs import MeasureSettings  # noqa: E402

AIPERF = "aiperf==0.13.0"
TEMPLATE = '{"text_input": {{ text|tojson }}, "max_tokens": {{ max_tokens }}}'


def aiperf_binary(venv: Path) -> Path:
    """aiperf in its own venv, installed with pip on first use."""
    binary = venv / "bin" / "aiperf"
    if not binary.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", AIPERF]
        subprocess.run(pip, check=True)
    return binary


def run_aiperf(binary: Path, url: str, tokenizer: Path, args: argparse.Namespace) -> dict:
    """One aiperf profile of the point; its JSON export."""
    out = Path(tempfile.mkdtemp(prefix="aiperf-"))
    extra = json.dumps({"payload_template": TEMPLATE, "response_field": "text_output"})
    command = [
        str(binary), "profile", "-m", "llm", "--endpoint-type", "template",
        "--custom-endpoint", STREAM_PATH, "--url", f"http://{url}", "--streaming",
        "--tokenizer", str(tokenizer), "--extra-inputs", extra,
        "--concurrency", str(args.concurrency), "--request-count", str(args.requests),
        "--warmup-request-count", str(args.warmup),
        "--synthetic-input-tokens-mean", str(args.prompt_tokens),
        "--synthetic-input-tokens-stddev", "0",
        "--output-tokens-mean", str(args.output_tokens), "--output-tokens-stddev", "0",
        "--random-seed", "0", "--ui", "none", "--no-server-metrics",
        "--output-artifact-dir", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"aiperf failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return json.loads((out / "profile_export_aiperf.json").read_text())


def optiboard_point(server, vocab: int, args: argparse.Namespace) -> LlmLoadPoint:  # noqa: ANN001
    spec = LoadSpec(Scenario.CONCURRENCY, duration_s=args.duration, concurrency=args.concurrency)
    measure = MeasureSettings(warmup_runs=args.warmup, window_runs=20, window_min_seconds=0.5)
    shape = PromptShape(args.prompt_tokens, args.output_tokens)
    label = f"1 instance x {args.concurrency} sequences"
    return run_llm_load_in_child(server.endpoint, spec, shape, vocab, None, measure, label)


def rows(first: LlmLoadPoint, theirs: dict, second: LlmLoadPoint) -> list[list[str]]:
    def ours(point: LlmLoadPoint, name: str, q: str) -> str:
        stats = {
            "ttft": point.ttft,
            "itl_mean": point.itl_request_mean,
            "itl_gap": point.itl,
            "e2e": point.point.latency,
        }[name]
        return f"{getattr(stats, q):.3f}" if stats else "-"

    def aiperf(key: str, q: str) -> str:
        value = theirs.get(key, {}).get(q)
        return f"{value:.3f}" if value is not None else "-"

    table = []
    for label, name, key in (
        ("TTFT ms", "ttft", "time_to_first_token"),
        ("ITL ms (request mean)", "itl_mean", "inter_token_latency"),
        ("ITL ms (every gap)", "itl_gap", "inter_chunk_latency"),
        ("end-to-end ms", "e2e", "request_latency"),
    ):
        for q in ("p50", "p99"):
            table.append(
                [f"{label} {q}", ours(first, name, q), aiperf(key, q), ours(second, name, q)]
            )
    table.append(
        [
            "requests/s",
            f"{first.point.achieved_rps:.2f}",
            aiperf("request_throughput", "avg"),
            f"{second.point.achieved_rps:.2f}",
        ]
    )
    table.append(
        [
            "output tokens/s",
            f"{first.output_tokens_per_s:.1f}",
            aiperf("output_token_throughput", "avg"),
            f"{second.output_tokens_per_s:.1f}",
        ]
    )
    table.append(
        [
            "output tokens per request",
            str(first.shape.output_tokens),
            aiperf("output_sequence_length", "avg"),
            str(second.shape.output_tokens),
        ]
    )
    table.append(
        ["requests measured", str(first.ttft.count), aiperf("request_count", "avg"),
         str(second.ttft.count)]
    )  # fmt: skip
    return table


def children_cpu_s() -> float:
    """CPU seconds of this process's finished children (the load generators, once reaped)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_row(cpu: list[float], counts: list[int]) -> list[str]:
    """Each client's CPU per request: its processes' user + system time, warm-up included."""
    return ["client CPU ms per request"] + [
        f"{1000 * seconds / count:.2f}" for seconds, count in zip(cpu, counts, strict=True)
    ]


def versions(aiperf: Path) -> str:
    environment = find_environment()
    python = environment.venv / "bin" / "python"
    genai = subprocess.run(
        [str(python), "-c", "import onnxruntime_genai as og; print(og.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    theirs = subprocess.run(
        [str(aiperf.parent / "python"), "-c", "import aiperf; print(aiperf.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return (
        f"Triton 2.51 (nvidia-pytriton 0.7.0), onnxruntime-genai {genai} in the serving venv, "
        f"aiperf {theirs or AIPERF}; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", help="a GenAI model folder (default: the tests' tiny Llama)")
    parser.add_argument("--tokenizer", help="the HF folder with its tokenizer.json, for aiperf")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--requests", type=int, default=200, help="aiperf's request count")
    parser.add_argument("--duration", type=float, default=4.0, help="Optiboard's seconds")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--aiperf-venv", default=str(Path(tempfile.gettempdir()) / "aiperf-venv"))
    parser.add_argument("--out", help="also write the report here")
    args = parser.parse_args()
    if args.folder:
        folder, tokenizer = Path(args.folder), Path(args.tokenizer or args.folder)
    else:
        from tests.llm_models import built_genai_folder, trained_llama

        folder, tokenizer = built_genai_folder(), trained_llama().folder
    binary = aiperf_binary(Path(args.aiperf_venv))
    vocab = folder_facts(folder).vocab_size
    cpu = []
    with serve_llm(folder, LlmServing(1, args.concurrency)) as server:
        start = children_cpu_s()
        first = optiboard_point(server, vocab, args)
        cpu.append(children_cpu_s() - start)
        start = children_cpu_s()
        theirs = run_aiperf(binary, server.endpoint.http_url, tokenizer, args)
        cpu.append(children_cpu_s() - start)
        start = children_cpu_s()
        second = optiboard_point(server, vocab, args)
        cpu.append(children_cpu_s() - start)
    headers = ["metric", "optiboard (1st)", "aiperf", "optiboard (2nd)"]
    counts = [first.ttft.count, args.requests, second.ttft.count]
    counts = [n + args.warmup for n in counts]
    table = [*rows(first, theirs, second), cpu_row(cpu, counts)]
    widths = [max(len(r[i]) for r in [headers, *table]) for i in range(4)]
    lines = [
        f"One load point, {args.concurrency} requests in flight (closed loop), "
        f"{args.prompt_tokens} prompt tokens, exactly {args.output_tokens} output tokens "
        f"(greedy), served on Triton by the decoupled ONNX Runtime GenAI model "
        f"({folder.name}), 1 instance x {args.concurrency} sequences.",
        versions(binary),
        "",
    ]
    for row in [headers, *table]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    lines += [
        "",
        f"Optiboard: token-id prompts, {args.duration:g} s per run after {args.warmup} warm-up "
        f"requests; stability: {first.point.stability_note} / {second.point.stability_note}.",
        f"aiperf: text prompts of {args.prompt_tokens} tokens by the HF tokenizer (the server "
        f"tokenizes them again), {args.requests} requests after {args.warmup} warm-up ones.",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n")


if __name__ == "__main__":
    main()
