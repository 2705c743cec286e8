"""OpenVINO GenAI's LLMPipeline on an OpenVINO IR folder (openvino_model.xml + tokenizer IRs).

An ONNX Runtime GenAI folder is not its format: OpenVINO reads the builder's model.onnx but its
GroupQueryAttention becomes an internal op that cannot be saved as IR, and LLMPipeline opens IR
files only, so such a folder is refused with that reason rather than converted silently.
"""

from __future__ import annotations

import importlib.metadata
import time
from pathlib import Path

import numpy as np

from backend.errors import UnavailableError
from backend.runtimes.base import GenAISession, TokenTimes

NEEDED = ("openvino_model.xml", "openvino_tokenizer.xml", "openvino_detokenizer.xml")


class OpenVinoGenAISession(GenAISession):
    name = "openvino-genai"

    def __init__(self, folder: Path, device: str) -> None:
        super().__init__(folder, device)
        missing = [name for name in NEEDED if not (self.folder / name).is_file()]
        if missing:
            raise UnavailableError(
                f"openvino-genai opens OpenVINO IR folders, and {self.folder.name} lacks "
                f"{', '.join(missing)} (an ONNX Runtime GenAI folder's GroupQueryAttention "
                "cannot be saved as OpenVINO IR); export the model with optimum-intel to run it."
            )
        import openvino_genai as ov_genai

        self._ov = ov_genai
        self.pipeline = ov_genai.LLMPipeline(str(self.folder), device.upper())
        self.facts = {
            "runtime": "openvino-genai",
            "versions": {
                "openvino-genai": importlib.metadata.version("openvino-genai"),
                "openvino": importlib.metadata.version("openvino"),
            },
            "providers": [device.upper()],
        }

    def close(self) -> None:
        self.pipeline = None

    def generate(self, prompts: np.ndarray, new_tokens: int) -> TokenTimes:
        """Exactly new_tokens: min_new_tokens = max_new_tokens and ignore_eos; per-token times
        from a streamer (one sequence) or the pipeline's own token times (several)."""
        import openvino as ov

        config = self._ov.GenerationConfig()
        config.max_new_tokens = new_tokens
        config.min_new_tokens = new_tokens
        config.ignore_eos = True
        config.do_sample = False
        ids = np.ascontiguousarray(prompts, dtype=np.int64)
        inputs = self._ov.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
        stamps: list[int] = []
        clock = time.perf_counter_ns

        class Stamps(self._ov.StreamerBase):  # type: ignore[name-defined,misc]
            def write(self, token: object) -> object:
                count = len(token) if isinstance(token, list) else 1
                stamps.extend([clock() - start] * count)
                return self_ov.StreamingStatus.RUNNING

            def end(self) -> None:
                pass

        self_ov = self._ov
        start = clock()
        if ids.shape[0] == 1:
            result = self.pipeline.generate(inputs, config, Stamps())
        else:
            result = self.pipeline.generate(inputs, config)
            raw = result.perf_metrics.raw_metrics
            begin = raw.m_new_token_times[0] if raw.m_new_token_times else 0
            ttft_ns = int(raw.m_times_to_first_token[0] * 1e3)  # microseconds
            stamps = [ttft_ns + int((t - begin) * 1e3) for t in raw.m_new_token_times]
        tokens = np.asarray(result.tokens, dtype=np.int64).reshape(ids.shape[0], -1)
        tokens = tokens[:, -new_tokens:]
        if tokens.shape[1] != new_tokens or len(stamps) != new_tokens:
            raise RuntimeError(
                f"openvino-genai produced {len(stamps)} timed tokens where {new_tokens} were asked"
            )
        return TokenTimes(tokens=tokens, token_ns=stamps)

    def encode(self, text: str) -> list[int]:
        encoded = self.pipeline.get_tokenizer().encode(text)
        return [int(t) for t in np.asarray(encoded.input_ids.data).reshape(-1)]
