"""Shared fixtures: every test gets its own real SQLite file and artifact store."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import leaks, tfchild, tiers  # noqa: E402
from tests import models as model_factory  # noqa: E402
from tests.pages import stored  # noqa: E402

_BASELINE: leaks.Baseline | None = None
WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1... in a pytest-xdist worker
LEAKS_KEY = "optiboard_leaks"  # a worker's leftovers, sent to the controller in its workeroutput


def _controller(config: pytest.Config) -> bool:
    """This process hands tests to pytest-xdist workers and runs none itself."""
    return WORKER is None and getattr(config.option, "numprocesses", None) not in (None, 0)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers
def pytest_sessionstart(session: pytest.Session) -> None:
    """Note what runs before the tests. Each xdist worker checks its own processes under its own
    tag (another worker's servers are not its leftovers); the controller checks /dev/shm once
    every worker is done, since a region cannot tell which worker's server made it."""
    global _BASELINE
    if WORKER is not None:
        os.environ[leaks.TAG] = f"{WORKER}-{os.getpid()}"
    _BASELINE = leaks.start()
    if _controller(session.config):
        _prepare_viewer()


def _prepare_viewer() -> None:
    """Copy Netron's viewer to static/netron before the workers start: app.py copies it on its
    first run when it is missing (a fresh clone), and two workers' first page tests would both
    copy into the same staging folder."""
    from backend import viewer

    viewer.prepare_viewer()


@pytest.hookimpl(tryfirst=True)  # before -m reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slow tier (tests/tiers.py); a whole-suite run also checks that its lists are current."""
    whole_suite = not config.args or [Path(a).resolve() for a in config.args] == [ROOT / "tests"]
    tiers.mark(items, whole_suite and not config.getoption("keyword") and not _deselecting(config))
    serial_ids = os.environ.get(tiers.SERIAL_IDS_FILE)
    if serial_ids and config.getoption("collectonly"):
        tiers.write_serial_ids(items, Path(serial_ids))


def _deselecting(config: pytest.Config) -> bool:
    """-m picks a tier, which is still the whole suite's collection; -k or --deselect is not."""
    return bool(config.getoption("deselect", None))


def pytest_testnodedown(node: object, error: object) -> None:
    """The controller collects what a worker's run left (the worker's own exit status is lost)."""
    left = getattr(node, "workeroutput", {}).get(LEAKS_KEY)
    if left:
        _WORKER_LEAKS.extend(left)


_WORKER_LEAKS: list[str] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that leaves a process running or a Triton shm region behind fails, by name."""
    tfchild.shutdown()  # kept for the whole run on purpose; ended before the count
    if _BASELINE is None:
        return
    if WORKER is not None:
        left = leaks.leftovers(_BASELINE, regions=False)
        session.config.workeroutput[LEAKS_KEY] = left  # type: ignore[attr-defined]
        return
    regions = leaks.regions_checked_here()
    if _controller(session.config):
        left = _WORKER_LEAKS + leaks.leftovers(_BASELINE, processes=False, regions=regions)
    else:
        left = leaks.leftovers(_BASELINE, regions=regions)
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["the tests left these behind (now ended):", *left]
    if reporter is not None:
        reporter.ensure_newline()
        if _controller(session.config):  # xdist's progress line does not end itself
            reporter.write("\n")
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


_TF_WHY = (
    "Streamlit's AppTest then runs keras.backend.clear_session() (a full garbage collection, "
    "about 0.2 s) after every page run in this process; build SavedModels and TensorFlow "
    "reference outputs in a child with tests/tfchild.in_child"
)
_tf_before: list[str] = []  # TensorFlow modules loaded when the running test started
_tf_blamed = False  # one failure names the culprit; later tests are not blamed for it
_tf_collected: list[str] = []  # the collector after which TensorFlow first appeared, if any


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Remember which module's (or package's) collection first imported TensorFlow."""
    if not _tf_collected and tfchild.loaded():
        _tf_collected.append(report.nodeid or "the rootdir's conftest or a plugin")


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    leaks.test_started(nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Note whether TensorFlow is already in this process before the test's fixtures run."""
    _tf_before[:] = tfchild.loaded()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Fail the test after which TensorFlow appeared in the pytest process, by name; when it was
    there before the first test, collection (a test module, conftest or plugin) imported it."""
    global _tf_blamed
    outcome = yield
    if call.when != "teardown" or _tf_blamed:
        return
    now = tfchild.loaded()
    if not now:
        return
    _tf_blamed = True
    if _tf_collected:
        where = f"while collecting {_tf_collected[0]} (its imports or conftest)"
    elif _tf_before:
        where = "before this test ran (in an earlier session fixture or hook)"
    else:
        where = "by this test or its fixtures"
    report = outcome.get_result()
    report.outcome = "failed"
    report.longrepr = (
        f"TensorFlow was imported into the pytest process {where} ({', '.join(now)}): {_TF_WHY}."
    )


@pytest.fixture(scope="session", autouse=True)
def stored_steps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[stored.Store]:
    """One store of seeding steps per test run (tests/pages/stored.py), shared by xdist workers
    through the run's base temp folder (each worker's own is a folder inside it)."""
    base = tmp_path_factory.getbasetemp()
    store = stored.Store((base.parent if WORKER else base) / "stored-steps")
    stored.use(store)
    yield store
    stored.use(None)
    store.write_counts(WORKER or "main")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many seeding steps really ran and how many were copies (tests/pages/stored.py)."""
    if WORKER is not None:
        return
    factory: pytest.TempPathFactory = terminalreporter.config._tmp_path_factory  # type: ignore[attr-defined]
    root = factory.getbasetemp() / "stored-steps"
    ran, copied = stored.Store(root).counts() if root.is_dir() else (0, 0)
    if ran or copied:
        terminalreporter.write_line(
            f"seeding steps: {ran} run for real, {copied} copied from stored results"
        )
        for seconds, step, test in stored.Store(root).slowest(5):  # where seeding costs most
            terminalreporter.write_line(f"  {seconds:6.2f}s {step} (first taken by {test})")


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
