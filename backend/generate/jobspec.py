"""A generation benchmark as a queued job: what it measures (variants x runtimes x prompt lengths
x new tokens x sequences, perplexity text optional), checked and queued in one call.

The spec is stored as the job's spec with kind "generation" (backend/jobs/kinds.py finds the
kind there); each (variant, runtime, point) is one stored point (storage/repo/serving.py, kind
"generation"), keyed by point_key. A perplexity text is stored as an artifact of the model, like
a sweep's calibration file, so a retried job reads the same bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import settings
from backend.auth import caps
from backend.auth.actor import current_actor
from backend.errors import UserError
from backend.generate import variantnames
from backend.generate.genspec import GENERATION_PRESETS, GenerationSpec
from backend.jobkind import JobKind
from backend.knobs import Cli, knob
from backend.launch.folders import owned_folder
from backend.runtimeenvs import DEFAULT, get_env, ready_env

# The stored rows are read and written by the functions that do so: the CLI's parser reads this
# module's declarations, without SQLAlchemy.
if TYPE_CHECKING:
    from storage.repo.jobs import JobRow


KIND = JobKind.GENERATION.value
TEXT_KIND = "perplexity-text"  # the model artifact that holds an uploaded perplexity text
PERPLEXITY_BOUND = 0.10  # a variant's perplexity more than 10% above FP32's is "wrong outputs"


@dataclass(frozen=True)
class GenerationJobSpec:
    """What one generation job measures; checks itself (one sentence per bad field)."""

    variants: tuple[str, ...] = knob(  # canonical names (variantnames.py), fp32 = as uploaded
        ("fp32", "int4"),
        label="Variants",
        help="FP32 is the model as uploaded; the others are weight-only (MatMulNBits) copies, "
        "quantized once and kept in the library; accuracy is against FP32. GPTQ calibrates on "
        "the perplexity text.",
        url="g_variants",
        cli=Cli(
            "--variants",
            "csv",
            help="with --submit: comma list of fp32 and weight-only names "
            "int{4|8}[-rtn|-hqq|-gptq][-bN][-asym][-accN], e.g. fp32,int4,int4-hqq-b64 "
            "(docs/generation.md)",
        ),
        parse=variantnames.canonical,
    )
    runtimes: tuple[str, ...] = ("ort-genai",)
    device: str = "cpu"
    prompt_lengths: tuple[int, ...] = (128,)
    new_tokens: tuple[int, ...] = (64,)
    sequences: tuple[int, ...] = (1,)
    preset: str = "quick"
    seed: int = 0
    perplexity_sha256: str | None = None
    perplexity_name: str | None = None
    perplexity_window: int = 256
    perplexity_tokens: int = 1024
    perplexity_bound: float = PERPLEXITY_BOUND
    runtime_env: str = DEFAULT  # the children's interpreter (backend/runtimeenvs.py)
    kind: str = KIND
    # the runtime options GenerationSpec holds, each handed only to the runtime it belongs to
    # (jobs stored before 2026-12-07 lack them: the defaults they ran with)
    perplexity_chunk: int = 32
    cuda_graph: bool = False  # ort-genai's
    engine: str = "auto"  # ort-genai's
    torch_compile: bool = False  # torch's

    def __post_init__(self) -> None:
        if not self.variants:
            raise UserError(f"Pick at least one variant; {variantnames.GRAMMAR}.")
        names = dict.fromkeys(variantnames.canonical(v) for v in self.variants)  # one sentence
        object.__setattr__(self, "variants", tuple(names))  # each distinct variant once
        get_env(self.runtime_env)  # an unknown name in one sentence; not set up: at submit
        if self.perplexity_bound <= 0:
            raise UserError("The perplexity bound is a positive fraction, e.g. 0.1 for 10%.")
        self.generation_spec("")  # checks the rest, every runtime at once

    @property
    def ordered_variants(self) -> tuple[str, ...]:
        """FP32 first: the reference others are judged against lands before them; the rest as
        given (int4 before int8 where both are plain, as jobs always ran them)."""
        rank = {name: index for index, name in enumerate(variantnames.PRESETS)}
        return tuple(sorted(self.variants, key=lambda v: rank.get(v, len(rank))))

    def generation_spec(self, runtime: str) -> GenerationSpec:
        """The benchmark of one runtime (measuring.run_generation's spec), with only the options
        that are that runtime's; "" gives every runtime's, with all of them."""
        ours = {name: not runtime or runtime == name for name in ("ort-genai", "torch")}
        return GenerationSpec(
            runtimes=(runtime,) if runtime else self.runtimes,
            device=self.device,
            prompt_lengths=self.prompt_lengths,
            new_tokens=self.new_tokens,
            sequences=self.sequences,
            preset=self.preset,
            seed=self.seed,
            perplexity_window=self.perplexity_window,
            perplexity_chunk=min(self.perplexity_chunk, self.perplexity_window),
            perplexity_tokens=self.perplexity_tokens,
            cuda_graph=self.cuda_graph and ours["ort-genai"],
            engine=self.engine if ours["ort-genai"] else "auto",
            torch_compile=self.torch_compile and ours["torch"],
        )

    def point_keys(self) -> list[str]:
        points = self.generation_spec(self.runtimes[0]).points()
        return [
            point_key(v, r, p) for v in self.ordered_variants for r in self.runtimes for p in points
        ]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerationJobSpec:
        known = {f.name for f in fields(cls)}
        return cls(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known}
        )


def point_key(variant: str, runtime: str, point: tuple[int, int, int]) -> str:
    """'int4|ort-genai|128,64,1': one stored point of a generation job."""
    return f"{variant}|{runtime}|{','.join(map(str, point))}"


def check_text(data: bytes, filename: str) -> None:
    """An uploaded perplexity text: not empty, under OPTIBOARD_PERPLEXITY_TEXT_MB, UTF-8."""
    name = Path(filename).name
    cap = settings.PERPLEXITY_TEXT_MB.get()
    if not data:
        raise UserError(f"{name} is empty; upload a UTF-8 text file to score perplexity on.")
    if len(data) > cap * 2**20:
        raise UserError(
            f"The perplexity text {name} is {len(data) / 2**20:.1f} MB, over the {cap:g} MB cap "
            "(OPTIBOARD_PERPLEXITY_TEXT_MB); upload a shorter text."
        )
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{name} is not UTF-8 text (byte {exc.start} is not); upload a plain text file."
        ) from None


def _check_runtimes(spec: GenerationJobSpec) -> None:
    """Known generation runtimes, and an environment that is set up on this host."""
    from backend.runtimes import GENAI_RUNTIMES

    ready_env(spec.runtime_env)
    unknown = [r for r in spec.runtimes if r not in GENAI_RUNTIMES]
    if unknown or not spec.runtimes:
        raise UserError(
            f"Unknown generation runtime {unknown[0] if unknown else '(none)'!r}; choose from "
            f"{', '.join(GENAI_RUNTIMES)}."
        )


def check_submission(model_id: int, spec: GenerationJobSpec, has_text: bool) -> int:
    """What the spec alone cannot check: runtimes and environment, the model's context, GPTQ's
    text. Returns the model's context length (0: unknown)."""
    from backend.generate.library import generative_model

    model = generative_model(model_id)
    _check_runtimes(spec)
    context = model_context(model_id)
    longest = max(p + n for p in spec.prompt_lengths for n in spec.new_tokens)
    if 0 < context < longest:
        raise UserError(
            f"A prompt plus its new tokens reaches {longest} tokens, beyond {model.name}'s "
            f"context of {context}; pick shorter prompts or fewer new tokens."
        )
    if spec.preset not in GENERATION_PRESETS:
        raise UserError(f"Unknown measurement {spec.preset!r}; choose quick or standard.")
    gptq = [v for v in spec.variants if variantnames.is_gptq(v)]
    if gptq and not has_text:
        raise UserError(
            f"{variantnames.label(gptq[0])} calibrates on the perplexity text, and none was "
            "given; upload a text (a few paragraphs like the model's input), or choose RTN or HQQ."
        )
    return context


def submit_generation(
    model_id: int,
    spec: GenerationJobSpec,
    text: bytes | None = None,
    text_name: str | None = None,
    label: str | None = None,
) -> JobRow:
    """Check everything, store the text (if any), then queue one job; a refusal stores nothing."""
    from backend.models.library import store
    from storage.repo import jobs as job_store
    from storage.repo import models as model_store

    context = check_submission(model_id, spec, text is not None)
    caps.check_configurations(len(spec.point_keys()))
    caps.check_queued()
    stored = spec
    if text is not None:
        check_text(text, text_name or "text.txt")
        window = min(spec.perplexity_window, context) if context else spec.perplexity_window
        with owned_folder("text") as tmp:
            path = tmp / "perplexity.txt"
            path.write_bytes(text)
            with store().putting([path]) as (blob,):
                name = Path(text_name or "text.txt").name[:200]
                link = model_store.NewArtifact(TEXT_KIND, blob.sha256, blob.size_bytes, name)
                model_store.add_artifact(model_id, link)
        stored = GenerationJobSpec.from_dict(
            {
                **spec.to_dict(),
                "perplexity_sha256": blob.sha256,
                "perplexity_name": name,
                "perplexity_window": window,
            }
        )
    variants = ", ".join(variantnames.label(v) for v in stored.ordered_variants)
    return job_store.create_job(
        model_id,
        stored.to_dict(),
        total=len(stored.point_keys()),
        label=label or f"generation: {variants}",
        unit="generation points",
        submitted_by=current_actor(),
        kind=KIND,
    )


def offered_runtimes() -> list[str]:
    """The generative runtimes that can open models on this host (the form offers these)."""
    from backend.runtimes import GENAI_RUNTIMES, genai_status

    return [name for name in GENAI_RUNTIMES if genai_status(name).available]


def model_context(model_id: int) -> int:
    """The model's context length from its genai_config.json (0 when it does not say)."""
    from backend.generate.library import genai_config

    return int(genai_config(model_id).get("model", {}).get("context_length") or 0)
