"""ONE regression check between ONNX Runtime 1.32.0 (default, .venv) and 1.31.1 (ort-1.31) over a
CNN, a transformer encoder and a decoder LM; an A/A check repeated; a planted regression.

Section 1 is a real job in a throwaway data folder: the three models uploaded, one regression
check over all three submitted (submit_regression, as `optiboard regress 1,2,3` does) and run by
this process as a worker of its own (backend/cli.py Terminal); what it prints is the check's own
report (summary, table, op diffs) read back from the stored results, with each model's samples,
rounds and wall time. Sections 2 and 3 run single pairs through the kind's code (run_pair and
compare_sides). Each pair: two sandboxed dialog children, one per environment's interpreter,
timed window by window in turn, in the spec's processes a side (default 3, one pair after
another; the rows give each process's median), a seeded 95% two-level bootstrap interval (2,000
resamples) of median(B)/median(A), the verdict rule of backend/reporting/regression.py, outputs
of B against A and the per-op profile diff. Needs `scripts/setup-runtime-env ort-1.31` first
(scripts/test makes it).

    .venv/bin/python bench/regression_check.py [--repeats 20] [--no-planted] [--preset quick]
        [--max-seconds 5]    (--repeats 0 --no-planted: section 1 only)

CPU only (the environments pin the CPU wheel). Prints everything; the recorded run is in
bench/results/regression_check.txt.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import settings  # noqa: E402
from backend.jobs.regression import compare_sides, run_pair  # noqa: E402
from backend.jobs.regressspec import RegressionSpec, split_key  # noqa: E402
from backend.runtimeenvs import ready_env  # noqa: E402
from backend.specs import MEASURE_PRESETS  # noqa: E402
from tests import models  # noqa: E402


def decoder_lm(folder: Path) -> Path:
    """The tests' tiny trained Llama (2 layers, hidden 128, vocab 512) as one full forward pass:
    input_ids [1, 64] -> logits, exported by torch's dynamo exporter."""
    import torch
    import transformers

    from tests.llm_models import TINY, trained_llama

    llm = trained_llama(TINY)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        llm.folder, attn_implementation="eager"
    ).eval()

    class Logits(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=ids, use_cache=False).logits

    path = folder / "decoder_lm.onnx"
    ids = torch.randint(0, TINY.vocab, (1, 64))
    torch.onnx.export(
        Logits(model), (ids,), str(path), input_names=["input_ids"], output_names=["logits"],
        dynamo=True, external_data=False,
    )  # fmt: skip
    return path


def load() -> str:
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


def check(name: str, spec: RegressionSpec, a: Path, b: Path, out: Path) -> dict:
    """One pair through the kind's code; the comparison dict with the wall time."""
    config = spec.configurations()[0]
    started = time.monotonic()
    run = run_pair(spec, config, {"a": a, "b": b}, out / f"{name}-{time.monotonic_ns()}")
    report = compare_sides(spec, run)
    report["seconds"] = time.monotonic() - started
    report["samples"] = (
        len(run.timing.timed["a"].samples_ms),
        len(run.timing.timed["b"].samples_ms),
    )
    return report


def row(name: str, report: dict) -> str:
    iv = report["interval"]
    versus = report["accuracy_vs_a"]
    per = {side: "/".join(f"{m:.4g}" for m in iv[f"process_medians_{side}_ms"]) for side in "ab"}
    return (
        f"{name:<16} {report['version_a']:>7} {report['version_b']:>7} "
        f"{iv['median_a_ms']:>9.4f} {iv['median_b_ms']:>9.4f} {iv['ratio']:>6.3f} "
        f"[{iv['low']:.3f}, {iv['high']:.3f}] {report['verdict']:<7} "
        f"{versus['cosine_similarity']:.6f} {versus['max_abs_error']:.2e} "
        f"{report['samples'][0]:>5}/{report['samples'][1]:<5} {report['seconds']:5.1f} s  "
        f"{per['a']} | {per['b']}"
    )


HEADER = (
    f"{'model':<16} {'A':>7} {'B':>7} {'A p50 ms':>9} {'B p50 ms':>9} {'B/A':>6} "
    f"{'95% interval':<16} {'verdict':<7} cosine   max abs  samples A/B  wall    "
    "A p50 ms by process | B's"
)


def one_check(base: RegressionSpec, paths: dict[str, Path], folder: Path) -> None:
    """Section 1: the three models in one queued check, run here, its report printed."""
    data = folder / "data"
    data.mkdir(mode=0o700)
    settings.DATA_DIR.set(str(data))  # read when first used: a throwaway library
    settings.DATABASE_URL.set(None)  # its SQLite file, not a configured database
    from backend.cli import Terminal
    from backend.jobs.regressspec import submit_regression
    from backend.jobs.regressview import pair_rows, text_report
    from backend.models.ingest import ingest_file
    from backend.queue import jobs
    from storage.repo import results as result_store

    ids = [ingest_file(path, path.name, name=name).id for name, path in paths.items()]
    spec = replace(base, dims=(("seq", 128),))  # the encoder's seq; the others have no 'seq'
    here = Terminal.new()
    job = submit_regression(ids, spec, label="bench: three models", held_by=here.worker_id)
    started = time.monotonic()
    outcome = here.run(job)
    wall = time.monotonic() - started
    stored = jobs.stored_results(job.id)
    spec = RegressionSpec.from_dict(jobs.get_job(job.id).spec)  # as stored: with its models
    print(text_report(spec, pair_rows(spec, stored, job.model_id), job.model_id))
    print(f"\njob {job.id} {outcome.state.value} in {wall:.1f} s, one check of {len(ids)} models")
    events = jobs.job_events(job.id)
    begun = {  # 'model 3 CPU FP32 b1: default against ort-1.31, interleaved'
        e.message.split()[1]: e.created_at for e in events if e.message.endswith(", interleaved")
    }
    samples = result_store.result_samples([r.id for r in stored])
    print("\nmodel             samples A/B  rounds  wall (started to both sides stored)")
    for name, mid in zip(paths, ids, strict=True):
        own = [r for r in stored if (key := split_key(r.config_key)) and key.model == mid]
        sides = {split_key(r.config_key).side: r.result for r in own}  # type: ignore[union-attr]
        if set(sides) != {"a", "b"} or not sides["b"].ok:
            print(f"{name:<17} not measured")
            continue
        note = next(n for n in sides["b"].notes if n.startswith("timed interleaved: "))
        took = (max(r.created_at for r in own) - begun[str(mid)]).total_seconds()
        ids_of = {split_key(r.config_key).side: r.id for r in own}  # type: ignore[union-attr]
        counts = f"{len(samples[ids_of['a']])}/{len(samples[ids_of['b']])}"
        print(f"{name:<17} {counts:>11}  {note.split()[2]:>6}  {took:5.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="A/A checks (0: none)")
    parser.add_argument("--no-planted", action="store_true", help="skip the planted regression")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--max-seconds", type=float, default=5.0)
    args = parser.parse_args()
    ready_env("ort-1.31")
    measure = replace(MEASURE_PRESETS[args.preset], max_seconds=args.max_seconds)
    base = RegressionSpec(env_b="ort-1.31", preset=args.preset, measure=measure)
    started = time.monotonic()
    print(f"host: {os.cpu_count()} cores, load average at start {load()} (shared with others)")
    print(
        f"preset {args.preset}, time cap {args.max_seconds:g} s per side; {base.resamples:,} "
        f"resamples, {base.confidence:.0%} interval, seed {base.seed}, smallest change "
        f"{base.min_change:.0%}"
    )
    with tempfile.TemporaryDirectory(prefix="optiboard-bench-regress-") as tmp:
        folder = Path(tmp)
        cnn = models.save(models.make_cnn(), folder / "cnn.onnx")
        encoder = models.save(
            models.make_transformer(d_model=128, heads=4, vocab=1000), folder / "encoder.onnx"
        )
        lm = decoder_lm(folder)
        print(
            "\n1. ONNX Runtime 1.32.0 (A, default) against 1.31.1 (B, ort-1.31), batch 1, FP32: "
            "one check over three models\n",
            flush=True,
        )
        one_check(base, {"cnn": cnn, "encoder seq=128": encoder, "decoder LM s=64": lm}, folder)
        if args.repeats:
            aa_repeats(base, args.repeats, cnn, folder)
        if not args.no_planted:
            planted(base, cnn, folder)
    print(f"\ntotal {time.monotonic() - started:.0f} s, load average at the end {load()}")
    return 0


def aa_repeats(base: RegressionSpec, repeats: int, cnn: Path, folder: Path) -> None:
    """Section 2: the CNN on default against default, `repeats` times."""
    print(f"\n2. A/A: default against default on the CNN, {repeats} times\n")
    print(HEADER)
    same = 0
    aa = replace(base, env_b="default", profile=False)
    for i in range(repeats):
        report = check("cnn A/A", aa, cnn, cnn, folder)
        same += report["verdict"] == "same"
        print(row(f"cnn A/A #{i + 1}", report), flush=True)
    print(f"\nA/A said 'same' in {same} of {repeats} repeats (load average now {load()})")


def planted(base: RegressionSpec, cnn: Path, folder: Path) -> None:
    """Section 3: B runs the CNN with a costly chain planted, on ort-1.31."""
    print(
        "\n3. Planted regression: B runs the CNN with 8 chained 256x256 MatMuls added "
        "(x * 0 into the output), ort-1.31 against default\n"
    )
    variant = models.save(models.plant_matmul_chain(models.make_cnn()), folder / "planted.onnx")
    report = check("cnn planted", base, cnn, variant, folder)
    print(HEADER)
    print(row("cnn planted", report))
    print("\n" + report["line"])
    print("ops whose time changed most (A -> B):")
    for line in report["profile_diff"]["lines"]:
        print(f"  {line}")


if __name__ == "__main__":
    raise SystemExit(main())
