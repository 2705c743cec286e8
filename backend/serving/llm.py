"""An LLM on the real Triton server: the decoupled (streaming) repository and its server.

The repository holds one Python-backend model (triton_llm_model.py.txt) that runs ONNX Runtime
GenAI on the GenAI model folder copied beside it (hard links when the file system allows), with
Triton's decoupled transaction policy: one response per generated token, then a final flag.
Requests are not batched by Triton (max_batch_size 0): each instance runs up to
`sequences_per_instance` generations at once in threads over its one loaded model, and
`instances` stub processes each load the model. The server is server.py's TritonServer, started
and stopped the same way as for single-pass models.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

import settings
from backend.errors import UserError
from backend.launch.folders import owned_folder
from backend.runtimeenvs import DEFAULT
from backend.serving import runtime_overlay
from backend.serving.repository import ServedModel, TensorSpec
from backend.serving.server import TritonEnvironment, TritonServer, find_environment, start_server
from backend.serving.types import BatchingPolicy, ServingProvider

LLM_MODEL_NAME = "llm"
LLM_TEMPLATE = Path(__file__).with_name("triton_llm_model.py.txt")
GENAI_SUBFOLDER = "genai"  # the model folder inside the version folder (the template reads it)
STREAM_PATH = f"/v2/models/{LLM_MODEL_NAME}/generate_stream"  # Triton's generate extension


@dataclass(frozen=True)
class LlmServing:
    """How the LLM is served: stub processes, generations each runs at once, the device."""

    instances: int = 1
    sequences_per_instance: int = 1
    provider: ServingProvider = ServingProvider.CPU

    def __post_init__(self) -> None:
        if self.instances < 1:
            raise UserError("A served model needs at least one instance.")
        if self.sequences_per_instance < 1:
            raise UserError("Each instance must run at least one sequence at a time.")

    @property
    def label(self) -> str:
        return f"{self.instances} instance(s) x {self.sequences_per_instance} sequence(s)"


@dataclass(frozen=True)
class GenAIFolderFacts:
    """What the load generator needs from genai_config.json (read here, not by the server)."""

    vocab_size: int
    context_length: int


def folder_facts(folder: Path) -> GenAIFolderFacts:
    """The vocabulary and context of a GenAI folder, or one sentence saying what is wrong."""
    config_path = Path(folder) / "genai_config.json"
    if not config_path.is_file():
        raise UserError(
            f"{folder} has no genai_config.json; give an ONNX Runtime GenAI model folder "
            "(model.onnx, genai_config.json, tokenizer files)."
        )
    try:
        model = json.loads(config_path.read_text())["model"]
        return GenAIFolderFacts(int(model["vocab_size"]), int(model["context_length"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"{config_path.name} in {folder} has no readable model.vocab_size and "
            f"model.context_length ({exc}); rebuild the folder with the model builder."
        ) from exc


def served_llm(serving: LlmServing) -> ServedModel:
    """The ServedModel record the server and its endpoint carry (no Triton batching)."""
    return ServedModel(
        name=LLM_MODEL_NAME,
        inputs=(TensorSpec("input_ids", "int32", (-1,)), TensorSpec("max_tokens", "int32", (1,))),
        outputs=(TensorSpec("token_id", "int32", (1,)),),
        policy=BatchingPolicy(
            max_batch_size=1, dynamic_batching=False, instance_count=serving.instances
        ),
        max_batch_size=0,
        intra_op_threads=0,  # GenAI's own session options decide (genai_config.json)
        provider=serving.provider,
    )


def _type(name: str) -> int:
    return model_config_pb2.DataType.Value(f"TYPE_{name}")


def llm_config(serving: LlmServing, onnxruntime_path: str = "") -> model_config_pb2.ModelConfig:
    """config.pbtxt as a message: decoupled, unbatched, prompt as ids or text, token out."""
    config = model_config_pb2.ModelConfig(name=LLM_MODEL_NAME, backend="python", max_batch_size=0)
    config.model_transaction_policy.decoupled = True
    for name, kind, dims, optional in (
        ("input_ids", "INT32", [-1], True),  # the prompt as token ids (exact length)
        ("text_input", "STRING", [1], True),  # or as text, tokenized by the model (aiperf)
        ("max_tokens", "INT32", [1], False),
    ):
        config.input.add(name=name, data_type=_type(kind), dims=dims, optional=optional)
    config.output.add(name="token_id", data_type=_type("INT32"), dims=[1])
    config.output.add(name="text_output", data_type=_type("STRING"), dims=[1])
    group = config.instance_group.add(count=serving.instances)
    if serving.provider is ServingProvider.CUDA:
        group.kind = group.KIND_GPU
        group.gpus.append(0)
    else:
        group.kind = group.KIND_CPU
    config.parameters["provider"].string_value = str(serving.provider)
    config.parameters["sequences_per_instance"].string_value = str(serving.sequences_per_instance)
    if onnxruntime_path:  # first on the stub's sys.path: onnxruntime-genai loads that onnxruntime
        config.parameters["onnxruntime_path"].string_value = onnxruntime_path
    return config


def write_llm_repository(
    root: Path, folder: Path, serving: LlmServing, onnxruntime_path: str = ""
) -> Path:
    """root/llm/config.pbtxt, root/llm/1/model.py and root/llm/1/genai/ (the folder's files,
    hard-linked where possible: no copy of a large model); returns root."""
    version = root / LLM_MODEL_NAME / "1"
    target = version / GENAI_SUBFOLDER
    target.mkdir(parents=True, exist_ok=True)
    config = text_format.MessageToString(llm_config(serving, onnxruntime_path))
    (root / LLM_MODEL_NAME / "config.pbtxt").write_text(config)
    shutil.copyfile(LLM_TEMPLATE, version / "model.py")
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            try:
                os.link(path, target / path.name)
            except OSError:
                shutil.copyfile(path, target / path.name)
    return root


@contextmanager
def serve_llm(
    folder: Path,
    serving: LlmServing | None = None,
    *,
    start_timeout_s: float | None = None,
    environment: TritonEnvironment | None = None,
    runtime_env: str = DEFAULT,
) -> Iterator[TritonServer]:
    """Serve one GenAI folder on Triton until the block ends; the server is stopped and its
    repository removed whatever happens. runtime_env: the environment whose onnxruntime
    onnxruntime-genai (.triton-venv's) loads, as `serve` does for a plain model."""
    serving = serving or LlmServing()
    folder = Path(folder).resolve()
    folder_facts(folder)  # a folder GenAI cannot open is refused before any server starts
    runtime = runtime_overlay.prepare(runtime_env)
    environment = environment or find_environment()
    timeout = start_timeout_s or settings.TRITON_START_TIMEOUT_S.get()
    with owned_folder("triton-llm") as workdir:  # swept when this process is SIGKILLed
        overlay = runtime_overlay.overlay_path(runtime, workdir)
        repository = write_llm_repository(workdir / "models", folder, serving, overlay)
        served = served_llm(serving)
        server = start_server(environment, served, workdir, repository, timeout, runtime)
        try:
            runtime_overlay.verify(runtime, server.loaded)
            yield server
        finally:
            server.stop()
