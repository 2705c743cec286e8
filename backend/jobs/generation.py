"""The `generation` job kind: the generation benchmark of a job's spec, run by the worker.

For each variant (FP32 as uploaded first, then weight-only copies named by
backend/generate/variantnames.py, e.g. int4 or int4-hqq-b64, each distinct config quantized once
in its limited child and kept as a library model of its own; GPTQ calibrates on the job's
perplexity text) and each runtime, the benchmark runs in the sandboxed, limited children
(backend/generate/measuring.py run_generation, as `optiboard generate` does), and each point is
stored as it comes back under the job's lease, so Compare plots it at once. Greedy agreement is
against the uploaded model's tokens on the same prompts (its GenAI FP32 folder; for torch its
Hugging Face folder in fp32, which runs wherever torch does); a variant whose perplexity is more
than the spec's bound above FP32's on the same runtime, or whose every sequence diverges at the
first token, is stored as "wrong outputs".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from backend.counts import counted
from backend.errors import UserError
from backend.generate import variantnames
from backend.generate.jobspec import KIND, GenerationJobSpec, point_key
from backend.generate.results import without_figures
from backend.generate.weightonly import CALIBRATION_TEXT_CAP, WeightOnlyConfig
from backend.jobs.context import JobContext, JobOutcome
from storage.repo import jobs as job_store
from storage.repo import serving as point_store
from storage.states import JobState, ResultStatus

# the statuses sweeps store (storage/states.py), as the points' JSON holds them
OK, FAILED = ResultStatus.OK.value, ResultStatus.FAILED.value
WRONG, UNAVAILABLE = ResultStatus.WRONG_OUTPUTS.value, ResultStatus.UNAVAILABLE.value


class GenerationKind:
    """A generation benchmark: measured on this host, in sandboxed children."""

    name = KIND
    launchers = ("local",)

    def run(self, context: JobContext) -> JobOutcome:
        GenerationRun(context).run()
        return self.conclude(context)

    def conclude(self, context: JobContext) -> JobOutcome:
        """Cancel and lost lease first; a job whose every point failed fails with the first."""
        stopped = context.interrupted()
        if stopped is not None:
            return stopped
        points = point_store.list_points([context.job.id], kind=point_store.GENERATION)
        failed = [p for p in points if p.payload.get("status") in (FAILED, UNAVAILABLE)]
        if not points or len(failed) == len(points):
            first = failed[0].payload.get("error") if failed else "nothing was measured"
            return context.finish(JobState.FAILED, f"no point was measured; first: {first}")
        return context.finish(JobState.SUCCEEDED)


def judge(payload: dict[str, Any], fp32_perplexity: float | None, bound: float) -> str:
    """ok, or "wrong outputs" when perplexity or greedy agreement says the outputs are not
    FP32's (a failed or unavailable point keeps its own status)."""
    if payload.get("status") != OK:
        return str(payload.get("status"))
    ppl = (payload.get("perplexity") or {}).get("perplexity")
    if ppl is not None and fp32_perplexity and ppl > fp32_perplexity * (1 + bound):
        payload["verdict"] = (
            f"perplexity {ppl:.3f} is {ppl / fp32_perplexity - 1:.1%} above FP32's "
            f"{fp32_perplexity:.3f}, past the {bound:.0%} bound"
        )
        return WRONG
    agreement = payload.get("agreement") or []
    if agreement and max(agreement) == 0:
        payload["verdict"] = "every sequence's first generated token differs from FP32's"
        return WRONG
    return OK


def nncf_config(config: WeightOnlyConfig | None) -> Any:
    """The NNCF weight compression an RTN variant means for openvino-genai (same bits and
    symmetry, the block size as INT4's group size); HQQ, GPTQ and an accuracy level are ONNX
    Runtime's, one sentence each."""
    from backend.generate.ovexport import NncfConfig

    if config is None:
        return None
    if config.algorithm != "rtn":
        raise UserError(
            f"{config.algorithm.upper()} is ONNX Runtime's quantizer; openvino-genai compresses "
            "with NNCF's data-free INT4/INT8, so choose an RTN variant (e.g. int4-b64-asym)."
        )
    if config.accuracy_level is not None:
        plain = variantnames.name_of(replace(config, accuracy_level=None))
        raise UserError(
            "The accuracy level is a MatMulNBits setting of ONNX Runtime; openvino-genai picks "
            f"its own kernels, so choose {plain} (no -acc) for it."
        )
    symmetry = "SYM" if config.symmetric else "ASYM"
    # NNCF's INT8 modes are per channel only (it refuses a group size); the point's statement
    # (NncfConfig.label: "per-channel") says so beside the name's block size
    group = config.block_size if config.bits == 4 else -1
    return NncfConfig(f"INT{config.bits}_{symmetry}", group)


class GenerationRun:
    """One generation job on this host: variants x runtimes, each point stored as it lands."""

    def __init__(self, context: JobContext) -> None:
        self.context = context
        self.job = context.job
        self.spec = GenerationJobSpec.from_dict(self.job.spec)
        self.done = point_store.stored_keys(self.job.id)
        self.fp32_ppl: dict[str, float] = {}  # runtime -> FP32 perplexity, for the verdict
        for row in point_store.list_points([self.job.id], kind=point_store.GENERATION):
            ppl = (row.payload.get("perplexity") or {}).get("perplexity")
            if row.payload.get("variant") == "fp32" and ppl is not None:
                self.fp32_ppl[row.payload["runtime"]] = ppl

    def run(self) -> None:
        from backend.generate.library import genai_folder
        from backend.generate.measuring import GenerationCancelled

        if self.done:
            self.context.log(f"resuming: {counted(len(self.done), 'point')} already stored")
        reference = genai_folder(self.job.model_id)
        text = self.text_path()
        for variant in self.spec.ordered_variants:
            for runtime in self.spec.runtimes:
                keys = self.keys(variant, runtime)
                if all(key in self.done for key in keys):
                    continue
                if self.context.should_stop():
                    return
                try:
                    folders, variant_meta = self.variant_folders(variant, runtime)
                    self.measure(variant, runtime, folders, variant_meta, reference, text)
                except GenerationCancelled:
                    return
                except UserError as exc:  # one sentence for every point it stopped
                    self.context.log(f"{variantnames.label(variant)} on {runtime}: {exc}", "error")
                    self.store_failed(variant, runtime, str(exc))

    def store_failed(self, variant: str, runtime: str, error: str) -> None:
        """Each point of the variant on the runtime not stored yet, failed with `error`, with its
        shape (labels and exports name its prompt, new tokens and sequences)."""
        for point in self.spec.generation_spec(runtime).points():
            key = point_key(variant, runtime, point)
            if key not in self.done:
                shape = dict(zip(("prompt_tokens", "new_tokens", "sequences"), point, strict=True))
                failed = {"variant": variant, "runtime": runtime, "status": FAILED, "error": error}
                self.store(key, without_figures({**failed, **shape}))  # none measured

    def keys(self, variant: str, runtime: str) -> list[str]:
        points = self.spec.generation_spec(runtime).points()
        return [point_key(variant, runtime, p) for p in points]

    def text_path(self) -> Path | None:
        sha = self.spec.perplexity_sha256
        return self.context.artifacts.path_for(sha) if sha else None

    def variant_folders(
        self, variant: str, runtime: str
    ) -> tuple[tuple[Path, Path | None], dict[str, Any]]:
        """(GenAI folder, OpenVINO or Hugging Face folder or None) of the variant on the
        runtime: the model itself, its weight-only copy (made once, a library model of its own),
        for openvino-genai its OpenVINO export (NNCF-compressed for INT4/INT8), for torch the
        uploaded Hugging Face folder (kept once)."""
        from backend.generate.library import genai_folder

        config = self.config(variant)
        if runtime == "torch":  # transformers opens the uploaded Hugging Face folder itself
            from backend.generate.variants import hf_folder

            if config is not None:
                raise UserError(
                    f"The torch runtime runs the uploaded Hugging Face weights as they are, not "
                    f"the {variantnames.label(variant)} ONNX variant; measure torch on fp32."
                )
            meta = {"model_id": self.job.model_id}
            return (genai_folder(self.job.model_id), hf_folder(self.job.model_id)), meta
        if runtime == "openvino-genai":
            from backend.generate.variants import openvino_folder

            nncf = nncf_config(config)
            exported = openvino_folder(self.job.model_id, nncf)
            meta = {"model_id": self.job.model_id, "statement": exported.statement()}
            return (genai_folder(self.job.model_id), exported.folder), meta
        if config is None:
            return (genai_folder(self.job.model_id), None), {"model_id": self.job.model_id}
        model_id = self.quantized(config)
        return (genai_folder(model_id), None), {"model_id": model_id}

    def config(self, variant: str) -> WeightOnlyConfig | None:
        """The variant's config; GPTQ's calibration text is the job's perplexity text."""
        if not variantnames.is_gptq(variant):
            return variantnames.parse(variant)
        text = self.text_path()
        calibration = text.read_text(encoding="utf-8", errors="replace") if text else ""
        return variantnames.parse(variant, calibration[:CALIBRATION_TEXT_CAP])

    def quantized(self, config: WeightOnlyConfig) -> int:
        """The stored weight-only variant of the job's model with this whole config (and, for
        GPTQ, this calibration text), quantized now if there is none."""
        from backend.generate.library import folder_artifacts
        from backend.generate.variants import calibration_sha256, quantize_model
        from backend.models.library import made_from

        wanted = {k: v for k, v in config.to_dict().items() if k != "calibration_text"}
        wanted["calibration_sha256"] = calibration_sha256(config.calibration_text)
        for model in made_from(self.job.model_id):  # its variants (and copies, which match none)
            for artifact in folder_artifacts(model.id):
                made = artifact.meta.get("variant") or {}
                if all(made.get(k) == v for k, v in wanted.items()):
                    return model.id
        self.context.log(f"quantizing the model to {config.label} (weight-only, in a child)")
        row = quantize_model(self.job.model_id, config, job_id=self.job.id)
        self.context.log(f"stored {row.name} as model {row.id}")
        return row.id

    def measure(
        self,
        variant: str,
        runtime: str,
        folders: tuple[Path, Path | None],
        variant_meta: dict[str, Any],
        reference: Path,
        text: Path | None,
    ) -> None:
        from backend.generate.measuring import run_generation

        label = variantnames.label(variant)
        self.context.log(
            f"{label} on {runtime}: measuring {len(self.keys(variant, runtime))} "
            "points in the sandboxed child"
        )
        if runtime == "torch":  # its own weights in fp32, which run wherever torch does
            reference = folders[1] or reference
        report = run_generation(
            folders[0],
            self.spec.generation_spec(runtime),
            text,
            reference if variant != variantnames.FP32 or runtime != "ort-genai" else None,
            openvino_folder=folders[1] if runtime == "openvino-genai" else None,
            torch_folder=folders[1] if runtime == "torch" else None,
            should_cancel=self.context.should_stop,
            runtime_env=self.spec.runtime_env,
        )
        scored = report.perplexity.get(runtime)
        if variant == "fp32" and scored:
            self.fp32_ppl[runtime] = scored["perplexity"]
        for result in report.results:
            point = (result.prompt_tokens, result.new_tokens, result.sequences)
            key = point_key(variant, runtime, point)
            if key in self.done:
                continue
            payload = {k: v for k, v in result.to_dict().items() if k != "tokens"}
            payload |= {
                "variant": variant,
                "variant_label": label,
                **variant_meta,
                "perplexity": scored,
                "perplexity_text": self.spec.perplexity_name,
                "peak_bandwidth": report.peak_bandwidth,
                "notes": report.notes,
            }
            payload["status"] = judge(
                payload, self.fp32_ppl.get(runtime), self.spec.perplexity_bound
            )
            self.store(key, payload)

    def store(self, key: str, payload: dict[str, Any]) -> None:
        """One point under the lease; its line in the job's events."""
        saved = point_store.save_point(
            self.job.id,
            key,
            f"{variantnames.label(payload['variant'])} · {payload['runtime']}",
            point_store.GENERATION,
            payload,
            lease=job_store.lease_of(self.job),
        )
        if saved is None:
            self.context.log(
                f"{key}: not stored (this worker lost the job, or stored before)", "warning"
            )
            return
        self.done.add(key)
        if payload["status"] in (OK, WRONG):
            line = (
                f"{key}: TTFT p50 {payload['ttft_p50_ms']:.2f} ms, ITL p50 "
                f"{payload['itl_p50_ms']:.3f} ms, {payload['output_tokens_per_s']:.1f} tokens/s"
            )
            if payload["status"] == WRONG:
                line += f"; wrong outputs: {payload['verdict']}"
            self.context.log(line, "warning" if payload["status"] == WRONG else "info")
        else:
            self.context.log(f"{key}: {payload['status']}, {payload.get('error')}", "error")
