"""A tiny Llama-architecture language model trained here, in seconds, so perplexity means something.

The text is the Python documentation that the standard library ships (`pydoc_data.topics`, English
prose about the language), so nothing is downloaded and every run trains on the same bytes. A
byte-level BPE tokenizer is trained on the same text with `tokenizers`, then a Llama (RMSNorm,
rotary embeddings, SwiGLU; optionally grouped-query attention) learns it for a few hundred steps.
The result is a Hugging Face folder (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json, generation_config.json), built once per spec and cached under the system
temp directory keyed by a hash of the spec, the text and the library versions.

Heavy imports (torch, transformers, tokenizers) happen inside the functions: importing this module
costs nothing, and a host without the optional generative requirements can still collect tests.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.models import zip_folder

CORPUS_BYTES = 48_000  # about 11k tokens: enough for the loss to fall well below log(vocab)
EVAL_FRACTION = 0.1  # the last tenth is held out for perplexity
CACHE_ROOT = Path(tempfile.gettempdir()) / "optiboard-test-llms"
HF_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
)
BOS, EOS, PAD = "<s>", "</s>", "<pad>"


@dataclass(frozen=True)
class LlamaSpec:
    """The shape and training budget of one tiny model; the cache key is derived from it."""

    hidden: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 4
    intermediate: int = 256
    vocab: int = 512
    context: int = 256
    seq: int = 64
    batch: int = 16
    steps: int = 150
    lr: float = 3e-3
    seed: int = 0

    def key(self, text: str) -> str:
        import tokenizers
        import torch
        import transformers

        blob = json.dumps(
            [
                asdict(self),
                hashlib.sha256(text.encode()).hexdigest(),
                torch.__version__,
                transformers.__version__,
                tokenizers.__version__,
                2,
            ],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


TINY = LlamaSpec()
TINY_GQA = LlamaSpec(kv_heads=2, seed=1)  # grouped-query attention: 4 query heads share 2 KV heads


@dataclass(frozen=True)
class TrainedLlama:
    """A trained model folder with the losses that show it learnt, and the held-out text."""

    folder: Path
    spec: LlamaSpec
    first_loss: float
    final_loss: float
    eval_loss: float  # mean cross-entropy (nats/token) of the full forward pass on eval_text
    train_text: str
    eval_text: str

    @property
    def eval_perplexity(self) -> float:
        import math

        return math.exp(self.eval_loss)


def corpus_text() -> str:
    """English prose the Python standard library ships: its help topics, in sorted key order."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[key].strip() for key in sorted(topics))
    return text[:CORPUS_BYTES]


def split_text(text: str) -> tuple[str, str]:
    """Training text and held-out text, cut at a paragraph boundary."""
    cut = text.rfind("\n\n", 0, int(len(text) * (1 - EVAL_FRACTION)))
    return text[:cut], text[cut + 2 :]


def train_tokenizer(text: str, vocab: int):
    """A byte-level BPE (GPT-2 style) trained on `text`: every string has a tokenization."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([text], trainer=trainer)
    return tokenizer


def trained_llama(spec: LlamaSpec = TINY, cache_root: Path = CACHE_ROOT) -> TrainedLlama:
    """The trained model for `spec`, built on first use and reused from the cache afterwards."""
    text = corpus_text()
    folder = Path(cache_root) / spec.key(text)
    report = folder / "training.json"
    if not report.exists():
        with _one_builder(folder):
            if not report.exists():  # not built while this process waited
                building = Path(tempfile.mkdtemp(prefix="building-", dir=cache_root))
                try:
                    _build(spec, text, building)
                    os.replace(building, folder)
                finally:
                    if building.exists():
                        shutil.rmtree(building, ignore_errors=True)
    losses = json.loads(report.read_text())
    train_text, eval_text = split_text(text)
    return TrainedLlama(
        folder=folder,
        spec=spec,
        first_loss=losses["first_loss"],
        final_loss=losses["final_loss"],
        eval_loss=losses["eval_loss"],
        train_text=train_text,
        eval_text=eval_text,
    )


def hf_folder(tmp: Path, spec: LlamaSpec = TINY) -> Path:
    """A private copy of the trained Hugging Face folder under `tmp`, free to change."""
    source = trained_llama(spec).folder
    target = Path(tmp) / f"llama-{source.name}"
    if not target.exists():
        target.mkdir(parents=True)
        for name in HF_FILES:
            shutil.copy2(source / name, target / name)
    return target


def hf_zip(
    tmp: Path,
    spec: LlamaSpec = TINY,
    *,
    drop: tuple[str, ...] = (),
    pickle_weights: bool = False,
    config_changes: dict | None = None,
    name: str = "llama.zip",
) -> Path:
    """The trained model as an upload: a zip of its HF folder, optionally spoilt for refusal tests.

    `drop` leaves files out (e.g. "tokenizer.json"); `pickle_weights` swaps model.safetensors for
    a torch pickle pytorch_model.bin; `config_changes` rewrites config.json keys (e.g. an
    unsupported model_type/architectures).
    """
    folder = Path(tempfile.mkdtemp(prefix="hfzip-", dir=tmp))
    source = trained_llama(spec).folder
    for file_name in HF_FILES:
        if file_name not in drop:
            shutil.copy2(source / file_name, folder / file_name)
    if pickle_weights:
        import torch
        from safetensors.torch import load_file

        torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink(missing_ok=True)
    if config_changes:
        config = json.loads((folder / "config.json").read_text())
        config.update(config_changes)
        (folder / "config.json").write_text(json.dumps(config, indent=2))
    return zip_folder(folder, Path(tmp) / name)


def built_genai_folder(
    spec: LlamaSpec = TINY, precision: str = "fp32", block_size: int | None = None
) -> Path:
    """The trained model converted by the product's model-builder path (sandboxed child) to an
    ONNX Runtime GenAI folder, cached beside the HF folder; treat it as read-only."""
    from backend.models.hfconvert import BuilderOptions, build_genai_folder

    source = trained_llama(spec).folder
    options = BuilderOptions(precision=precision, block_size=block_size)
    tag = f"genai-{precision}" + (f"-b{block_size}" if block_size else "")
    target = source.parent / f"{source.name}-{tag}"
    _build_once(target, "genai_config.json", lambda out: build_genai_folder(source, out, options))
    return target


def built_openvino_folder(spec: LlamaSpec = TINY, compression: Any = None) -> Path:
    """The trained model exported by the product's OpenVINO path (sandboxed child), optionally
    NNCF-compressed (an ovexport.NncfConfig), cached beside the HF folder; treat it as read-only."""
    from backend.generate.ovexport import compress_openvino, export_openvino

    source = trained_llama(spec).folder
    fp32 = source.parent / f"{source.name}-openvino-fp32"
    _build_once(fp32, "openvino_model.xml", lambda out: export_openvino(source, out))
    if compression is None:
        return fp32
    tag = compression.label.replace(" ", "-")
    target = source.parent / f"{source.name}-openvino-{tag}"
    _build_once(target, "openvino_model.xml", lambda out: compress_openvino(fp32, out, compression))
    return target


def build_all() -> None:
    """Every model of this module the suite opens, trained or converted once (each a no-op when
    cached): what scripts/test builds while the rest of its set-up waits on the network."""
    for spec in (TINY, TINY_GQA):
        built_openvino_folder(spec)
    for precision in ("fp32", "int4"):
        built_genai_folder(TINY, precision)


def _build_once(target: Path, marker: str, build: Any) -> None:
    """build(output folder) into a fresh folder, moved to `target` unless another got there."""
    if (target / marker).is_file():
        return
    with _one_builder(target):
        if (target / marker).is_file():  # built while this process waited
            return
        building = Path(tempfile.mkdtemp(prefix="building-", dir=target.parent)) / "out"
        try:
            build(building)
            os.replace(building, target)
        finally:
            shutil.rmtree(building.parent, ignore_errors=True)


@contextmanager
def _one_builder(target: Path) -> Iterator[None]:
    """One process of a test run builds `target`; the others (xdist workers, the serial lane)
    wait on its lock and then find it built, instead of each training or converting it too."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def genai_folder(tmp: Path, spec: LlamaSpec = TINY, precision: str = "fp32") -> Path:
    """A private copy of the built GenAI folder under `tmp`, free to change."""
    source = built_genai_folder(spec, precision)
    target = Path(tmp) / source.name
    if not target.exists():
        shutil.copytree(source, target)
    return target


def genai_zip(
    tmp: Path, spec: LlamaSpec = TINY, precision: str = "fp32", drop: tuple[str, ...] = ()
) -> Path:
    """The built GenAI folder as an upload (under a top folder, as zipping a folder makes it)."""
    source = built_genai_folder(spec, precision)
    return zip_folder(source, Path(tmp) / f"{source.name}.zip", top="model", drop=drop)


def _build(spec: LlamaSpec, text: str, out: Path) -> None:
    """Train tokenizer and model on the text and save the Hugging Face folder into `out`."""
    os.environ.setdefault("USE_TF", "0")  # else transformers imports TensorFlow (seconds)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a busy 2-core host two spinning threads are 10x slower than one
    try:
        _train_and_save(spec, text, out)
    finally:
        torch.set_num_threads(threads)


def _train_and_save(spec: LlamaSpec, text: str, out: Path) -> None:
    import torch
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    torch.manual_seed(spec.seed)
    train_text, eval_text = split_text(text)
    tokenizer = train_tokenizer(train_text, spec.vocab)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        model_max_length=spec.context,
    )
    ids = torch.tensor(tokenizer.encode(train_text).ids, dtype=torch.long)
    eval_ids = torch.tensor(tokenizer.encode(eval_text).ids, dtype=torch.long)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=spec.hidden,
        intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        max_position_embeddings=spec.context,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    losses = _train(model, ids, spec) if spec.steps else []
    model.eval()
    with torch.no_grad():
        chunks = eval_ids[: (len(eval_ids) // spec.seq) * spec.seq].view(-1, spec.seq)
        eval_loss = float(model(input_ids=chunks, labels=chunks).loss)
    model.save_pretrained(out, safe_serialization=True)
    fast.save_pretrained(out)
    GenerationConfig(
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        do_sample=False,
    ).save_pretrained(out)
    report = {  # steps=0 (random weights, for speed benches of a larger shape): no training losses
        "first_loss": sum(losses[:5]) / 5 if losses else eval_loss,
        "final_loss": sum(losses[-10:]) / 10 if losses else eval_loss,
        "eval_loss": eval_loss,
        "steps": spec.steps,
        "train_tokens": len(ids),
        "eval_tokens": int(chunks.numel()),
    }
    (out / "training.json").write_text(json.dumps(report, indent=2))


def _train(model, ids, spec: LlamaSpec) -> list[float]:  # noqa: ANN001 - torch objects
    """AdamW with a one-cycle schedule on random windows of the training ids; the step losses."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=spec.lr, total_steps=spec.steps, pct_start=0.1
    )
    generator = torch.Generator().manual_seed(spec.seed)
    losses = []
    model.train()
    for _ in range(spec.steps):
        starts = torch.randint(0, len(ids) - spec.seq - 1, (spec.batch,), generator=generator)
        batch = torch.stack([ids[s : s + spec.seq] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
    return losses


if __name__ == "__main__":
    build_all()
