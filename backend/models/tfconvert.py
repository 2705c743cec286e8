"""TensorFlow SavedModel to ONNX with tf2onnx, always in a sandboxed, limited child process.

Loading a SavedModel runs the initializers of the resources it holds, i.e. the uploader's code, so
the conversion only ever runs under bubblewrap (backend.launch.sandbox): read-only view, scratch
folder as the only writable place, empty environment, no network. Without a working sandbox it is
refused, never run unsandboxed. The parent reads back a small JSON result file and the child's
full output as the conversion log.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import settings
from backend.errors import ConversionFailed, UserError
from backend.launch import sandbox
from backend.launch.children import child_folder
from backend.launch.converter import attempt, child_main, require_sandbox, run_converter, stopped
from backend.launch.outcomes import last_line

MODULE = "backend.models.tfconvert"
DEFAULT_OPSET = 17
MIN_OPSET, MAX_OPSET = 9, 18  # the range tf2onnx 1.17 converts to


@dataclass(frozen=True)
class Conversion:
    onnx_path: Path
    signature: str
    opset: int
    log: str
    tf2onnx_version: str
    tensorflow_version: str


def default_timeout_s() -> float:
    return settings.CONVERT_TIMEOUT_S.get()


def convert_savedmodel(
    saved_model_dir: Path,
    output_path: Path,
    opset: int = DEFAULT_OPSET,
    signature: str | None = None,
    timeout_s: float | None = None,
) -> Conversion:
    """Convert one signature of a SavedModel to `output_path` in a child process."""
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UserError(
            f"Opset {opset} is outside what tf2onnx can produce; pick one from "
            f"{MIN_OPSET} to {MAX_OPSET}."
        )
    require_sandbox(
        "TensorFlow SavedModels",
        "loading one runs the uploader's code, which only ever happens inside that sandbox",
    )
    timeout = default_timeout_s() if timeout_s is None else timeout_s
    output_path = Path(output_path)
    source = Path(saved_model_dir).resolve()
    with child_folder() as folder:
        produced = folder.scratch / "model.onnx"
        args = ["--saved-model", str(source), "--output", str(produced), "--opset", str(opset)]
        args += ["--signature", signature] if signature is not None else []
        binds = sandbox.Binds.of(read_only=[source])
        done, result = run_converter(MODULE, args, folder, timeout, binds)
        log = done.stdout
        limit = stopped(done, "The TensorFlow conversion", timeout)
        if limit is not None:
            raise ConversionFailed(limit, log)
        if result.get("error") is None and done.returncode == 0 and produced.is_file():
            shutil.move(produced, output_path)
    error = result.get("error")
    if error is not None:
        raise ConversionFailed(_error_message(error, result), log)
    if done.returncode != 0 or not output_path.is_file():
        last = last_line(log)
        raise ConversionFailed(
            f"The TensorFlow conversion crashed (exit code {done.returncode}, last message: "
            f"{last!r}); check that the SavedModel loads in TensorFlow {_tf_hint(result)}.",
            log,
        )
    return Conversion(
        onnx_path=output_path,
        signature=result["signature"],
        opset=opset,
        log=log,
        tf2onnx_version=result.get("tf2onnx_version", "unknown"),
        tensorflow_version=result.get("tensorflow_version", "unknown"),
    )


def _tf_hint(result: dict[str, Any]) -> str:
    return result.get("tensorflow_version", "2.x")


def _error_message(error: str, result: dict[str, Any]) -> str:
    signatures = result.get("signatures", [])
    listed = ", ".join(repr(s) for s in signatures)
    raw = str(result.get("detail", ""))
    detail = " ".join(raw.split("\n", 1)[0].split())[:300]  # one line: TF appends stack traces
    if error == "no_signature":
        return (
            "The SavedModel has no serving signature to convert; save it with "
            'tf.saved_model.save(model, path, signatures={"serving_default": fn}).'
        )
    if error == "ambiguous_signature":
        return (
            f"The SavedModel has several signatures ({listed}) and none is 'serving_default'; "
            "choose one of them or re-save the model with a 'serving_default' signature."
        )
    if error == "unknown_signature":
        return (
            f"The SavedModel has no signature {result.get('requested')!r}; choose one of: {listed}."
        )
    if error == "unusable_signature":
        return (
            f"The SavedModel signature {result.get('signature')!r} takes inputs that are not "
            f"plain tensors ({detail}); re-save it with a tf.TensorSpec input signature."
        )
    if error == "load" and ("Read-only file system" in raw or "Permission denied" in raw):
        return (
            "The SavedModel tried to write files while it was being loaded (code in its "
            "initializers), which the conversion sandbox forbids; re-save it without initializers "
            "that write files, or convert it to ONNX yourself and upload the .onnx."
        )
    if error == "load":
        return (
            f"TensorFlow could not load the SavedModel ({detail}); check that the zip holds the "
            "whole SavedModel folder (saved_model.pb and variables/)."
        )
    return (
        f"tf2onnx could not convert the SavedModel ({detail}); see the conversion log for the "
        "unsupported operation, or try another opset."
    )


# ---- child process ----------------------------------------------------------------------------


def _pick_signature(signatures: list[str], requested: str | None) -> tuple[str | None, str | None]:
    """(signature, error code) following serving_default, else the only one."""
    if requested is not None:
        return (requested, None) if requested in signatures else (None, "unknown_signature")
    if "serving_default" in signatures:
        return "serving_default", None
    if len(signatures) == 1:
        return signatures[0], None
    if not signatures:
        return None, "no_signature"
    return None, "ambiguous_signature"


def _child(args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf
    import tf2onnx

    result: dict[str, Any] = {
        "tensorflow_version": tf.__version__,
        "tf2onnx_version": tf2onnx.__version__,
    }
    loaded, failed = attempt("load", lambda: tf.saved_model.load(args.saved_model))
    if failed:
        return {**result, **failed}
    signatures = sorted(k for k in loaded.signatures.keys() if not k.startswith("__"))
    result["signatures"] = signatures
    signature, error = _pick_signature(signatures, args.signature)
    if error is not None:
        return {**result, "error": error, "requested": args.signature}
    result["signature"] = signature
    function = loaded.signatures[signature]
    _, kwargs = function.structured_input_signature
    odd = [k for k, v in kwargs.items() if not isinstance(v, tf.TensorSpec)]
    if not kwargs or odd:
        detail = f"inputs {odd}" if odd else "no inputs"
        return {**result, "error": "unusable_signature", "detail": detail}
    del loaded, function
    print(f"optiboard: converting signature {signature!r} at opset {args.opset}", flush=True)
    sys.argv = [
        "tf2onnx.convert",
        "--saved-model",
        args.saved_model,
        "--signature_def",
        signature,
        "--opset",
        str(args.opset),
        "--output",
        args.output,
    ]
    _, failed = attempt("convert", tf2onnx.convert.main, output=args.output)
    return {**result, **(failed or {})}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the child: convert, then write a JSON result file for the parent."""
    return child_main(f"python -m {MODULE}", _options, _child, argv)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--saved-model", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    parser.add_argument("--signature", default=None)


if __name__ == "__main__":
    raise SystemExit(main())
