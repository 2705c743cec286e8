"""Every OPTIBOARD_* setting, typed and documented in one place; docs/settings.md shows them.

A leaf module beneath every layer (pages -> backend -> storage -> settings), so storage can read the
data directory and database URL without importing upward. Values are read from the environment on
each call, so tests and tools can change them at run time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")

PROJECT_ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One environment variable: its default, how to parse it, and what it is for."""

    name: str
    default: str
    parse: Callable[[str], T]
    help: str
    shell_only: bool = False  # read by scripts/run, not by Python
    shown_default: str = ""  # what docs/settings.md shows when the raw default means something else
    minimum: float | None = None  # a number's least value (with `above`: the bound it exceeds)
    above: bool = False

    def get(self) -> T:
        """The value; one that does not read, or is below its minimum, is a SettingError naming
        the variable (it was a bare ValueError from whatever read it first)."""
        raw = os.environ.get(self.name, self.default)
        try:
            value = self.parse(raw)
        except ValueError as exc:
            kind = NUMBER_KINDS.get(self.parse)
            problem = f"is not {kind}" if kind else f"does not read ({exc})"
            raise SettingError(self, raw, problem) from None
        low = self.minimum
        if low is not None and (value <= low if self.above else value < low):  # type: ignore[operator]
            bound = f"a number above {low:g}" if self.above else f"{low:g} or more"
            raise SettingError(self, raw, f"is out of range: it takes {bound}")
        return value

    def set(self, value: str | None) -> None:
        """Change it for this process and the children it starts (None restores the default)."""
        if value is None:
            os.environ.pop(self.name, None)
        else:
            os.environ[self.name] = value


NUMBER_KINDS: dict[Callable, str] = {int: "a whole number", float: "a number"}


class SettingError(ValueError):
    """A setting whose value does not read: one sentence naming the variable and its default."""

    def __init__(self, setting: Setting, raw: str, problem: str) -> None:
        super().__init__(
            f"{setting.name}={raw!r} {problem}; set it again, or unset it for the default "
            f"({setting.shown_default or setting.default}). docs/settings.md says what it is for."
        )


def _path(text: str) -> Path:
    return Path(text)


SETTINGS: dict[str, Setting] = {}


def _declare(setting: Setting[T]) -> Setting[T]:
    SETTINGS[setting.name] = setting
    return setting


def problems() -> list[str]:
    """The Python side's settings that do not read, one sentence each: what `python -m settings
    check` (scripts/run, before anything starts), the CLI and the worker say and stop on."""
    found = []
    for setting in SETTINGS.values():
        if setting.shell_only:
            continue
        try:
            setting.get()
        except SettingError as exc:
            found.append(str(exc))
    return found


def report_problems() -> bool:
    """Each problem as an `error:` line on stderr; True when there was one (the caller stops)."""
    found = problems()
    for problem in found:
        print(f"error: {problem}", file=sys.stderr)
    return bool(found)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_table() -> str:
    """docs/settings.md's table, in markdown; tests/test_docs.py keeps that page equal to it."""
    lines = ["| variable | default | takes | meaning |", "| --- | --- | --- | --- |"]
    for setting in SETTINGS.values():
        default = setting.shown_default or setting.default
        low = setting.minimum
        takes = "" if low is None else f"> {low:g}" if setting.above else f">= {low:g}"
        row = f"| `{setting.name}` | `{_cell(default)}` | {takes} | {_cell(setting.help)} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # From the imported module, so every declaration in this file counts, wherever it is.
    import settings

    if sys.argv[1:] == ["check"]:
        raise SystemExit(1 if settings.report_problems() else 0)
    print(settings.settings_table(), end="")
    raise SystemExit(0)


DATA_DIR = _declare(
    Setting("OPTIBOARD_DATA_DIR", "data", _path, "SQLite file, artifact store, caches")
)
DATABASE_URL = _declare(
    Setting(
        "OPTIBOARD_DATABASE_URL",
        "",
        str,
        "any SQLAlchemy URL; PostgreSQL works (`postgresql+psycopg://...`)",
        shown_default="sqlite:///$OPTIBOARD_DATA_DIR/optiboard.db",
    )
)
ADDRESS = _declare(
    Setting(
        "OPTIBOARD_ADDRESS",
        "127.0.0.1",
        str,
        "where `scripts/run` serves the dashboard; `0.0.0.0` lets teammates open shared links",
        shell_only=True,
    )
)
PORT = _declare(
    Setting(
        "OPTIBOARD_PORT",
        "8501",
        int,
        "the dashboard's port (`scripts/run`)",
        shell_only=True,
        minimum=1,
    )
)
REQUIREMENTS = _declare(
    Setting(
        "OPTIBOARD_REQUIREMENTS",
        "requirements.txt",
        str,
        "`requirements-gpu.txt` on a GPU host",
        shell_only=True,
    )
)
MAX_UPLOAD_MB = _declare(
    Setting(
        "OPTIBOARD_MAX_UPLOAD_MB",
        "2048",
        int,
        "largest accepted upload (the Streamlit limit in `.streamlit/config.toml` matches)",
        minimum=1,
    )
)
VIEWER_MAX_MB = _declare(
    Setting(
        "OPTIBOARD_VIEWER_MAX_MB",
        "512",
        int,
        "largest .onnx the Graph page hands to Netron whole (the browser tab holds all of it); "
        "past this it shows a copy without the weights' bytes",
        minimum=1,
    )
)
UPLOAD_SESSION_FILES = _declare(
    Setting(
        "OPTIBOARD_UPLOAD_SESSION_FILES",
        "6",
        int,
        "uploaded files one browser session may hold in the web process's memory at once",
        minimum=1,
    )
)
UPLOAD_SESSION_MB = _declare(
    Setting(
        "OPTIBOARD_UPLOAD_SESSION_MB",
        "2560",
        int,
        "megabytes of uploads one browser session may hold in the web process's memory at once "
        "(the largest model plus its calibration and evaluation files); only signed-in editors "
        "and admins upload at all",
        minimum=1,
    )
)
MAX_UNCOMPRESSED_MB = _declare(
    Setting(
        "OPTIBOARD_MAX_UNCOMPRESSED_MB",
        "8192",
        int,
        "cap on a zip's total uncompressed size",
        minimum=1,
    )
)
MAX_ZIP_MEMBERS = _declare(
    Setting(
        "OPTIBOARD_MAX_ZIP_MEMBERS",
        "10000",
        int,
        "cap on the number of entries in a zip",
        minimum=1,
    )
)
MAX_COMPRESSION_RATIO = _declare(
    Setting(
        "OPTIBOARD_MAX_COMPRESSION_RATIO",
        "200",
        float,
        "cap on a zip entry's uncompressed/compressed size ratio",
        minimum=1,
    )
)
CONVERT_TIMEOUT_S = _declare(
    Setting(
        "OPTIBOARD_CONVERT_TIMEOUT_S",
        "600",
        float,
        "time limit of a conversion child: SavedModel or PyTorch .pt2 -> ONNX, the GenAI model "
        "builder, weight-only quantization, the OpenVINO export and NNCF compression",
        minimum=0,
        above=True,
    )
)
LEASE_SECONDS = _declare(
    Setting(
        "OPTIBOARD_LEASE_SECONDS",
        "60",
        float,
        "a worker's lease on a running job; a dead worker's job is requeued after it",
        minimum=0,
        above=True,
    )
)
CONFIG_TIMEOUT_S = _declare(
    Setting(
        "OPTIBOARD_CONFIG_TIMEOUT_S",
        "900",
        float,
        "time allowed per configuration on top of its measurement cap",
        minimum=0,
    )
)

MAX_CONFIGS_PER_JOB = _declare(
    Setting(
        "OPTIBOARD_MAX_CONFIGS_PER_JOB",
        "512",
        int,
        "most configurations one sweep may hold; a larger one is refused at submit",
        minimum=1,
    )
)
MAX_QUEUED_JOBS_PER_USER = _declare(
    Setting(
        "OPTIBOARD_MAX_QUEUED_JOBS_PER_USER",
        "20",
        int,
        "most jobs one user (an account, or `cli:<os user>`) may have waiting for a worker",
        minimum=1,
    )
)


def data_dir() -> Path:
    return DATA_DIR.get()


def database_url() -> str:
    """The configured URL, or SQLite under the data directory (created on first use)."""
    url = DATABASE_URL.get()
    if url:
        return url
    directory = data_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)  # private: hashes, audit log, models
    return f"sqlite:///{(directory / 'optiboard.db').resolve()}"


# --- queue ---
DB_RETRY_MAX_S = _declare(
    Setting(
        "OPTIBOARD_DB_RETRY_MAX_S",
        "60",
        float,
        "longest wait between a worker's retries while the database does not answer "
        "(the wait doubles from 1 s up to this)",
        minimum=0,
    )
)
WORKER_RESTART_S = _declare(
    Setting(
        "OPTIBOARD_WORKER_RESTART_S",
        "5",
        float,
        "pause before `scripts/run` restarts a worker that died",
        shell_only=True,
        minimum=0,
    )
)


# --- zip uploads (zipsafe) ---
UPLOAD_DISK_QUOTA_MB = _declare(
    Setting(
        "OPTIBOARD_UPLOAD_DISK_QUOTA_MB",
        "10240",
        int,
        "disk space all zip uploads being unpacked at once may use (under the data dir's tmp/)",
        minimum=1,
    )
)
MIN_FREE_DISK_MB = _declare(
    Setting(
        "OPTIBOARD_MIN_FREE_DISK_MB",
        "1024",
        int,
        "a zip upload is refused if unpacking it would leave less free disk than this",
        minimum=0,
    )
)


# --- access control ---


def _on_off(text: str) -> bool:
    if text.strip().lower() not in ("on", "off"):
        raise ValueError(f"OPTIBOARD_AUTH takes on or off, not {text!r}")
    return text.strip().lower() == "on"


AUTH = _declare(
    Setting(
        "OPTIBOARD_AUTH",
        "on",
        _on_off,
        "`on`: every page needs a sign-in (or a signed link); `off` only for tests that need it",
    )
)


def _cookie_secure(text: str) -> str:
    value = text.strip().lower()
    if value not in ("auto", "on", "off"):
        raise ValueError(f"OPTIBOARD_COOKIE_SECURE takes auto, on or off, not {text!r}")
    return value


COOKIE_SECURE = _declare(
    Setting(
        "OPTIBOARD_COOKIE_SECURE",
        "auto",
        _cookie_secure,
        "the session cookie's Secure flag: `on` behind a TLS proxy that talks plain HTTP to the "
        "dashboard; `auto` sets it when the request came over HTTPS (or says so in "
        "X-Forwarded-Proto); `off` never",
    )
)
SIGNIN_MAX_FAILURES = _declare(
    Setting(
        "OPTIBOARD_SIGNIN_MAX_FAILURES",
        "5",
        int,
        "failed sign-ins from one address that cost nothing; each further one doubles that "
        "address's wait before its next try (1, 2, 4 ... s). An account failed from many "
        "addresses makes new addresses wait after 4 times this; its usual ones never do",
        minimum=1,
    )
)
SIGNIN_LOCK_SECONDS = _declare(
    Setting(
        "OPTIBOARD_SIGNIN_LOCK_SECONDS",
        "900",
        float,
        "the longest wait a sign-in throttle imposes (nothing locks an account)",
        minimum=0,
    )
)
TRUSTED_PROXY_HOPS = _declare(
    Setting(
        "OPTIBOARD_TRUSTED_PROXY_HOPS",
        "0",
        int,
        "reverse proxies in front of the dashboard; with n > 0 the sign-in throttle counts the "
        "client address the outermost proxy appended to X-Forwarded-For, not the proxy's own",
        minimum=0,
    )
)
LINK_MAX_DAYS = _declare(
    Setting(
        "OPTIBOARD_LINK_MAX_DAYS",
        "30",
        float,
        "longest life of a signed read-only comparison link",
        minimum=0,
        above=True,
    )
)
ALLOWED_HOSTS = _declare(
    Setting(
        "OPTIBOARD_ALLOWED_HOSTS",
        "",
        str,
        "host names teammates use to reach the dashboard (comma-separated), besides loopback; "
        "`scripts/run` passes them to Streamlit's `server.allowedHosts`",
        shell_only=True,
        shown_default="(none)",
    )
)
OIDC_DEFAULT_ROLE = _declare(
    Setting(
        "OPTIBOARD_OIDC_DEFAULT_ROLE",
        "viewer",
        str,
        "role of an identity-provider user with no account of that e-mail; `none` refuses them",
    )
)


# --- child limits and sandbox ---
CHILD_MEMORY_MB = _declare(
    Setting(
        "OPTIBOARD_CHILD_MEMORY_MB",
        "0",
        int,
        "memory limit of every child process: address space (RLIMIT_AS) for CPU children, "
        "resident memory (a memory cgroup, where the service can make one) for GPU children, "
        "whose CUDA driver maps far more address space than it uses; 0 means half of the "
        "host's RAM (at least 16384 on an NVIDIA host: CUDA reserves ~14 GB of address space)",
        minimum=0,
    )
)
CHILD_CPU_S = _declare(
    Setting(
        "OPTIBOARD_CHILD_CPU_S",
        "7200",
        int,
        "CPU-time limit (RLIMIT_CPU) of every child",
        minimum=1,
    )
)
CHILD_FILE_MB = _declare(
    Setting(
        "OPTIBOARD_CHILD_FILE_MB",
        "8192",
        int,
        "largest file a child may write (RLIMIT_FSIZE)",
        minimum=1,
    )
)
CHILD_PROCS = _declare(
    Setting(
        "OPTIBOARD_CHILD_PROCS",
        "1024",
        int,
        "processes and threads a child may have: pids.max of its own pids cgroup where one can "
        "be made (also for root), else RLIMIT_NPROC above the service user's current count",
        minimum=1,
    )
)
BWRAP = _declare(
    Setting(
        "OPTIBOARD_BWRAP",
        "bwrap",
        str,
        "the bubblewrap binary that sandboxes SavedModel and PyTorch conversion, upload "
        "parsing, measurements and Triton servers",
    )
)
PARSE_TIMEOUT_S = _declare(
    Setting(
        "OPTIBOARD_PARSE_TIMEOUT_S",
        "300",
        float,
        "time limit of checking one uploaded model or calibration file (a child process)",
        minimum=0,
        above=True,
    )
)
MAX_INPUT_MB = _declare(
    Setting(
        "OPTIBOARD_MAX_INPUT_MB",
        "2048",
        int,
        "largest model input (batch x dims x item size) or calibration file content accepted",
        minimum=1,
    )
)

PERPLEXITY_TEXT_MB = _declare(
    Setting(
        "OPTIBOARD_PERPLEXITY_TEXT_MB",
        "16",
        float,
        "largest text file a generation benchmark scores perplexity on; a larger one is refused",
        minimum=0,
        above=True,
    )
)


# --- serving ---
TRITON_VENV = _declare(
    Setting(
        "OPTIBOARD_TRITON_VENV",
        ".triton-venv",
        _path,
        "the serving environment (Triton server, its Python backend, ONNX Runtime) that "
        "`scripts/setup-triton` installs; relative paths start at the project folder",
    )
)
TRITON_START_TIMEOUT_S = _declare(
    Setting(
        "OPTIBOARD_TRITON_START_TIMEOUT_S",
        "60",
        float,
        "how long a Triton server may take to start and load its model before it is unavailable",
        minimum=0,
        above=True,
    )
)
LOADGEN_PROCESSES = _declare(
    Setting(
        "OPTIBOARD_LOADGEN_PROCESSES",
        "0",
        int,
        "most load-generator processes one Server point spreads its arrivals over (one per "
        "300 req/s); 0 picks half the host's cores less one, so 1 on a 2-core host",
        minimum=0,
    )
)
WORKER_METRICS_PORT = _declare(
    Setting(
        "OPTIBOARD_WORKER_METRICS_PORT",
        "0",
        int,
        "port of the worker's Prometheus metrics (jobs, configurations, durations, queue depth); "
        "0 turns them off (several workers on one host would need a port each)",
        minimum=0,
    )
)
WORKER_METRICS_ADDRESS = _declare(
    Setting(
        "OPTIBOARD_WORKER_METRICS_ADDRESS",
        "127.0.0.1",
        str,
        "address the worker's metrics listen on: loopback unless a Prometheus elsewhere scrapes it",
    )
)
# --- sign-in sessions ---
SESSION_HOURS = _declare(
    Setting(
        "OPTIBOARD_SESSION_HOURS",
        "12",
        float,
        "how long a password sign-in lasts in a browser (its signed, HttpOnly session cookie)",
        minimum=0,
        above=True,
    )
)
# --- cluster ---
RAY_ADDRESS = _declare(
    Setting(
        "OPTIBOARD_RAY_ADDRESS",
        "",
        str,
        "address of a Ray cluster's head (`host:6379`); set, the worker runs each configuration "
        "as a Ray task on the cluster; empty keeps the single-machine worker",
    )
)
CLUSTER_CACHE_DIR = _declare(
    Setting(
        "OPTIBOARD_CLUSTER_CACHE_DIR",
        "",
        str,
        "node-local folder where cluster nodes keep models by sha256; empty means "
        "`<temp>/optiboard-cluster-cache`",
    )
)
CLUSTER_MAX_RETRIES = _declare(
    Setting(
        "OPTIBOARD_CLUSTER_MAX_RETRIES",
        "3",
        int,
        "times Ray runs a configuration again elsewhere when its node or worker process dies",
        minimum=0,
    )
)
# --- cluster: head restarts ---
RAY_RETRY_MAX_S = _declare(
    Setting(
        "OPTIBOARD_RAY_RETRY_MAX_S",
        "30",
        float,
        "longest wait between two tries to reach a Ray head that went away mid-sweep (the waits "
        "grow 1, 2, 4 ... seconds up to this)",
        minimum=0,
    )
)
RAY_GIVE_UP_S = _declare(
    Setting(
        "OPTIBOARD_RAY_GIVE_UP_S",
        "3600",
        float,
        "how long a job waits for an unreachable Ray head before it fails with a sentence; 0 waits "
        "until the job is cancelled",
        minimum=0,
    )
)
# --- cost ---
PRICE_PER_HOUR = _declare(
    Setting(
        "OPTIBOARD_PRICE_PER_HOUR",
        "cpu=0.40,cuda=3.50",
        str,
        "dollars per hour of each hardware target, as TARGET=DOLLARS pairs: an execution provider "
        "(cpu, cuda; tensorrt takes cuda's price unless named) or a cluster target's name; gives "
        "cost per million inferences (or tokens) = price / (items per second x 3600) x 1e6. The "
        "Optimize page and `--price` override it per job, which stores the prices it used",
    )
)
