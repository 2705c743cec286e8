"""Hugging Face folder -> ONNX Runtime GenAI folder (ONNX with a KV cache) with onnxruntime-genai's
model builder, always in a sandboxed, limited child: the generative sibling of tfconvert.py and
pt2convert.py, used at upload (genai.py) and for backend/generate/'s variants.

The builder reads config.json through transformers and the weights from safetensors
(backend/hfcheck.py refused everything else first); it runs under bubblewrap like the SavedModel
conversion: the input folder read-only, the output folder its only writable place besides its
scratch, no network (the Hugging Face hub is switched off as well), and it is never run
unsandboxed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import settings
from backend.errors import UserError
from backend.hfcheck import check_hf_folder, require_builder
from backend.launch import sandbox
from backend.launch.children import child_folder
from backend.launch.converter import child_main, require_sandbox, run_converter, stopped, versions
from backend.launch.outcomes import ProcessOutcome, last_line

MODULE = "backend.models.hfconvert"
# precision -> the execution provider the builder targets by default (fp16 exists for GPUs only)
PRECISIONS = {"fp32": "cpu", "int8": "cpu", "int4": "cpu", "fp16": "cuda", "bf16": "cuda"}
BLOCK_SIZES = (16, 32, 64, 128, 256)
OFFLINE_ENV = (
    ("HF_HUB_OFFLINE", "1"),
    ("TRANSFORMERS_OFFLINE", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("USE_TF", "0"),
    ("USE_TORCH", "1"),
    ("TOKENIZERS_PARALLELISM", "false"),
)


class BuildFailed(UserError):
    """The model builder stopped; `log` holds the child's full output."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class BuilderOptions:
    """What the builder is asked for: precision, target and the weight-only quantization knobs."""

    precision: str = "fp32"
    execution_provider: str | None = None  # None: PRECISIONS[precision]
    block_size: int | None = None  # int4/int8 only; the builder's default is 32
    symmetric: bool | None = None  # int4/int8 only; the builder's default is symmetric
    accuracy_level: int | None = None  # int4/int8 only; 4 (int8 activations) on CPU by default

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise UserError(
                f"Precision {self.precision!r} is not one the model builder makes; choose one "
                f"of {', '.join(PRECISIONS)}."
            )
        if self.block_size is not None and self.block_size not in BLOCK_SIZES:
            raise UserError(
                f"Block size {self.block_size} is not supported; choose one of "
                f"{', '.join(map(str, BLOCK_SIZES))}."
            )
        if self.accuracy_level is not None and self.accuracy_level not in (0, 1, 2, 3, 4):
            raise UserError(f"Accuracy level {self.accuracy_level} is not 0 to 4; choose one.")

    @property
    def provider(self) -> str:
        return self.execution_provider or PRECISIONS[self.precision]

    def argv(self, source: Path, output: Path, cache: Path) -> list[str]:
        args = ["-i", str(source), "-o", str(output), "-p", self.precision]
        args += ["-e", self.provider, "-c", str(cache)]
        extra = []
        if self.precision in ("int4", "int8"):
            if self.block_size is not None:
                extra.append(f"block_size={self.block_size}")
            if self.symmetric is not None:
                extra.append(f"is_symmetric={str(self.symmetric).lower()}")
            if self.accuracy_level is not None:
                extra.append(f"accuracy_level={self.accuracy_level}")
        return args + (["--extra_options", *extra] if extra else [])

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "execution_provider": self.provider,
            "block_size": self.block_size,
            "symmetric": self.symmetric,
            "accuracy_level": self.accuracy_level,
        }


@dataclass(frozen=True)
class BuiltFolder:
    """An ONNX Runtime GenAI folder the builder wrote, with its log and the versions that ran."""

    folder: Path
    options: BuilderOptions
    architecture: str
    log: str
    versions: dict[str, str]


def default_timeout_s() -> float:
    return settings.CONVERT_TIMEOUT_S.get()


def build_genai_folder(
    source: Path,
    output: Path,
    options: BuilderOptions | None = None,
    shown: str | None = None,
    timeout_s: float | None = None,
) -> BuiltFolder:
    """Check the HF folder, then run the model builder on it in a sandboxed child into `output`
    (created; must not exist yet). Nothing is left in `output` when it fails."""
    options = options or BuilderOptions()
    source, output = Path(source).resolve(), Path(output).resolve()
    shown = shown or source.name
    checked = check_hf_folder(source, shown)
    require_builder()
    require_sandbox(
        "Hugging Face folders",
        "the model builder reads the uploaded files, which only ever happens inside that sandbox",
    )
    timeout = default_timeout_s() if timeout_s is None else timeout_s
    output.mkdir(parents=True, exist_ok=False)
    try:
        with child_folder() as folder:
            args = ["--", *options.argv(source, output, folder.scratch / "cache")]
            binds = sandbox.Binds.of(read_only=[source], writable=[output], env=OFFLINE_ENV)
            done, result = run_converter(MODULE, args, folder, timeout, binds)
        _raise_on_failure(done, result, timeout, checked.architecture, output)
    except BaseException:
        shutil.rmtree(output, ignore_errors=True)
        raise
    return BuiltFolder(output, options, checked.architecture, done.stdout, result["versions"])


def _raise_on_failure(
    done: ProcessOutcome, result: dict[str, Any], timeout: float, architecture: str, output: Path
) -> None:
    log = done.stdout
    limit = stopped(done, "The model builder", timeout)
    if limit is not None:
        raise BuildFailed(limit, log)
    error = result.get("error")
    if error == "unsupported":
        raise BuildFailed(
            f"onnxruntime-genai's model builder cannot convert {architecture} models "
            f"({result.get('detail', '')}); upload a model of a supported architecture.",
            log,
        )
    if error is not None or done.returncode != 0:
        detail = result.get("detail") or last_line(log) or f"exit code {done.returncode}"
        raise BuildFailed(
            f"The model builder could not convert the model ({detail[:300]}); check that the "
            "folder loads with transformers' from_pretrained, and see the conversion log.",
            log,
        )
    if not (output / "genai_config.json").is_file() or not list(output.glob("*.onnx")):
        raise BuildFailed(
            "The model builder finished without writing model.onnx and genai_config.json; see "
            "the conversion log.",
            log,
        )


# ---- child process ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Child entry: run the builder's own CLI with the given arguments, write a JSON result."""
    return child_main(f"python -m {MODULE}", _options, _build, argv)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("builder_args", nargs=argparse.REMAINDER)


def _build(args: argparse.Namespace) -> dict[str, Any]:
    import runpy

    builder_args = [a for a in args.builder_args if a != "--"]
    names = ("onnxruntime_genai", "onnxruntime", "torch", "transformers", "onnx")
    result: dict[str, Any] = {"versions": versions(*names)}
    sys.argv = ["onnxruntime_genai.models.builder", *builder_args]
    try:  # the builder's CLI lives under its `if __name__ == "__main__"`
        runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__", alter_sys=True)
    except NotImplementedError as exc:
        result.update(error="unsupported", detail=str(exc))
    except MemoryError:
        raise  # the parent names the memory limit
    except Exception as exc:  # reported to the parent as a user-facing error, with the log
        import traceback

        traceback.print_exc()
        result.update(error="build", detail=f"{type(exc).__name__}: {' '.join(str(exc).split())}")
    return result


if __name__ == "__main__":
    raise SystemExit(main())
