"""Shared fixtures: every test gets its own real SQLite file and artifact store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import leaks, tiers  # noqa: E402
from tests import models as model_factory  # noqa: E402

_BASELINE: leaks.Baseline | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _BASELINE
    _BASELINE = leaks.start()


@pytest.hookimpl(tryfirst=True)  # before -m reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slow tier (tests/tiers.py); a whole-suite run also checks that its lists are current."""
    whole_suite = not config.args or [Path(a).resolve() for a in config.args] == [ROOT / "tests"]
    tiers.mark(items, whole_suite and not config.getoption("keyword") and not _deselecting(config))


def _deselecting(config: pytest.Config) -> bool:
    """-m picks a tier, which is still the whole suite's collection; -k or --deselect is not."""
    return bool(config.getoption("deselect", None))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that leaves a process running or a Triton shm region behind fails, by name."""
    if _BASELINE is None:
        return
    left = leaks.leftovers(_BASELINE)
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["the tests left these behind (now ended):", *left]
    if reporter is not None:
        reporter.ensure_newline()
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh data directory (SQLite file + artifacts) used through the normal settings."""
    directory = tmp_path / "data"
    directory.mkdir(mode=0o700)  # as Optiboard makes it: a looser one is tightened with a log line
    monkeypatch.setenv("OPTIBOARD_DATA_DIR", str(directory))
    monkeypatch.delenv("OPTIBOARD_DATABASE_URL", raising=False)
    return directory


@pytest.fixture
def mlp_path(tmp_path: Path) -> Path:
    return model_factory.save(model_factory.make_mlp(), tmp_path / "mlp.onnx")


@pytest.fixture
def cnn_path(tmp_path: Path) -> Path:
    return model_factory.save(model_factory.make_cnn(), tmp_path / "cnn.onnx")


@pytest.fixture
def transformer_path(tmp_path: Path) -> Path:
    return model_factory.save(model_factory.make_transformer(), tmp_path / "transformer.onnx")


@pytest.fixture(scope="session")
def tiny_llama():
    """The tiny Llama trained on the stdlib's help text (tests/llm_models.py), built once."""
    from tests import llm_models

    return llm_models.trained_llama(llm_models.TINY)


@pytest.fixture(scope="session")
def tiny_gqa_llama():
    """The grouped-query-attention variant: 4 query heads over 2 KV heads, rotary embeddings."""
    from tests import llm_models

    return llm_models.trained_llama(llm_models.TINY_GQA)
