"""Versioned operator-support lists for backends not installed here, each naming its source."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).parent / "data"
FILES = {"ort-cuda": "ort_cuda.json", "tensorrt": "tensorrt.json", "openvino": "openvino.json"}


@dataclass(frozen=True)
class SupportList:
    """One published list: where it came from, which release it describes, and its entries."""

    key: str
    title: str
    source: str
    release: str
    retrieved: str
    coverage: dict[str, Any]
    ops: dict[str, dict[str, Any]]
    extra: dict[str, Any]
    digest: str

    @property
    def label(self) -> str:
        return f"{self.title} ({self.release})"

    def covers_domain(self, domain: str) -> bool:
        return domain in self.coverage.get("domains", [])

    @property
    def complete(self) -> bool:
        return bool(self.coverage.get("complete"))

    def entry(self, domain: str, op: str) -> dict[str, Any] | None:
        if domain == "":
            found = self.ops.get(op)
            return found if found and found.get("domain", "") == "" else None
        return self.ops.get(f"{domain}::{op}")


@lru_cache(maxsize=8)
def load(key: str) -> SupportList:
    raw = (DATA_DIR / FILES[key]).read_bytes()
    data = json.loads(raw)
    known = {"backend", "title", "source", "release", "retrieved", "coverage", "ops"}
    return SupportList(
        key=key,
        title=data["title"],
        source=data["source"],
        release=data["release"],
        retrieved=data["retrieved"],
        coverage=data["coverage"],
        ops=data["ops"],
        extra={k: v for k, v in data.items() if k not in known},
        digest=hashlib.sha256(raw).hexdigest()[:12],
    )


def all_lists() -> list[SupportList]:
    return [load(key) for key in FILES]


def fingerprint() -> str:
    """Changes whenever a data file changes, so cached matrices built from the old one expire."""
    return "+".join(f"{s.key}:{s.digest}" for s in all_lists())
