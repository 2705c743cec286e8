"""A real Triton Inference Server on loopback: find it, start it, health-check it, stop it.

The server is the tritonserver binary inside the nvidia-pytriton wheel, installed by
scripts/setup-triton into .triton-venv (Debian's python3.11, numpy<2). Missing environment, a
server that exits or a model that does not load: UnavailableError with Triton's own log line.
A runtime environment (backend/runtimeenvs.py) other than default puts its own onnxruntime under
the Python backend (runtime_overlay.py); the server is refused when another version loaded.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import settings
from backend.errors import UnavailableError
from backend.launch import sandbox
from backend.launch.folders import owned_folder
from backend.launch.services import group_members, start_service, stop_service
from backend.runtimeenvs import DEFAULT, ENVIRONMENTS, RuntimeEnv
from backend.serving import runtime_overlay
from backend.serving.repository import ServedModel, TensorSpec, plan_model, write_repository
from backend.serving.types import BatchingPolicy, ServingProvider, runtime_label

SETUP = "run scripts/setup-triton"
SHM_FOLDER = Path("/dev/shm")
# Each server names its Python backend's shared memory regions (Triton's default prefix is one
# for every server on the host): the regions a server leaves behind are then known and removed.
SHM_PREFIX = "optiboard_triton_"
STOP_GRACE_S = 10.0  # for Triton to unload its models and end its stubs, then SIGKILL
_LOG_LINE = re.compile(r"^([EWI])\d{4} [\d:.]+\s+\d+\s+\S+\]\s*(.*)$")
# triton_model.py.txt prints both
_PROVIDERS = re.compile(r"optiboard session providers: (\S+)")
_OPTIONS = re.compile(r"optiboard session options: (\S+)")


@dataclass(frozen=True)
class TritonEnvironment:
    """Where the server, its Python backend and its bundled libraries are."""

    venv: Path
    binary: Path
    backends: Path
    libs: Path

    def env(self) -> dict[str, str]:
        """As PyTriton sets it: bundled libs on LD_LIBRARY_PATH, the venv's python first on PATH
        (the backend stub finds the venv's site-packages through it), no project PYTHONPATH."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        libs = [str(self.libs), env.get("LD_LIBRARY_PATH", "")]
        env["LD_LIBRARY_PATH"] = ":".join(p for p in libs if p)
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        env.pop("VIRTUAL_ENV", None)
        return env


def find_environment(venv: Path | None = None) -> TritonEnvironment:
    """The installed serving environment, or UnavailableError saying what is missing."""
    venv = Path(venv or settings.TRITON_VENV.get())
    if not venv.is_absolute():
        venv = settings.PROJECT_ROOT / venv
    site = next(iter(sorted(venv.glob("lib/python3*/site-packages"))), None)
    binary = site / "pytriton/tritonserver/bin/tritonserver" if site else None
    stub = venv / "backends/python/triton_python_backend_stub"
    if site is None or binary is None or not binary.is_file() or not stub.is_file():
        raise UnavailableError(
            f"The Triton serving environment is not installed ({venv} has no tritonserver and "
            f"Python backend); {SETUP}."
        )
    return TritonEnvironment(venv, binary, venv / "backends", site / "nvidia_pytriton.libs")


@dataclass(frozen=True)
class ServerEndpoint:
    """What a load generator needs to talk to a running server (picklable, for child processes)."""

    http_url: str
    metrics_url: str
    model: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[str, ...]
    max_batch_size: int  # 0: a fixed-batch server
    policy: BatchingPolicy  # what is really served (a fixed-batch model's differs from the ask)
    intra_op_threads: int
    notes: tuple[str, ...] = ()  # e.g. why dynamic batching was impossible
    provider: ServingProvider = ServingProvider.CPU
    session_providers: tuple[str, ...] = ()  # what ORT's sessions really use (from Triton's log)
    session_options: tuple[str, ...] = ()  # the session's options in effect, "key=value"
    runtime_env: str = DEFAULT  # the runtime environment whose onnxruntime was asked for
    onnxruntime: str = ""  # the onnxruntime version the served model really loaded

    @property
    def runtime_label(self) -> str:
        return runtime_label(self.onnxruntime, self.runtime_env)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def triton_log_line(log: str) -> str:
    """Triton's own most relevant line: a failed load first, then the last error, then the end."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    parsed = [(m.group(1), m.group(2)) for m in map(_LOG_LINE.match, lines) if m]
    errors = [text for level, text in parsed if level == "E"]
    failed = [text for text in errors if "failed to load" in text or "Stub process" in text]
    unparsed = [line for line in lines if not _LOG_LINE.match(line)]
    chosen = (failed or errors or unparsed or lines or ["(the server printed nothing)"])[-1]
    chosen = chosen.strip().strip('"').split("\\n")[0]  # Python tracebacks follow as '\n'
    return chosen[:400].rstrip(". ")


def _announced(log: str, line: re.Pattern[str]) -> tuple[str, ...]:
    """The comma list every instance printed on that line (all instances print the same; a
    mismatch would show as the union, first seen first)."""
    seen: dict[str, None] = {}
    for match in line.finditer(log):
        seen.update(dict.fromkeys(match.group(1).split(",")))
    return tuple(seen)


def session_providers(log: str) -> tuple[str, ...]:
    """The providers every instance's ONNX Runtime session uses, in ORT's order."""
    return _announced(log, _PROVIDERS)


def session_options(log: str) -> tuple[str, ...]:
    """A CUDA session's options as ORT reports them ('cudnn_conv_algo_search=HEURISTIC')."""
    return _announced(log, _OPTIONS)


class TritonServer:
    """One tritonserver process serving one model; a context manager (see `serve`)."""

    def __init__(
        self,
        environment: TritonEnvironment,
        served: ServedModel,
        workdir: Path,
        runtime: RuntimeEnv | None = None,
    ) -> None:
        self.environment = environment
        self.runtime = runtime or ENVIRONMENTS[DEFAULT]
        self.loaded = runtime_overlay.Loaded()
        self.served = served
        self.workdir = workdir
        self.http_port, self.metrics_port = free_port(), free_port()
        self.log_path = workdir / "tritonserver.log"
        self.process: subprocess.Popen | None = None
        self.session_providers: tuple[str, ...] = ()
        self.session_options: tuple[str, ...] = ()
        self.shm_prefix = f"{SHM_PREFIX}{secrets.token_hex(6)}_"

    @property
    def endpoint(self) -> ServerEndpoint:
        return ServerEndpoint(
            http_url=f"127.0.0.1:{self.http_port}",
            metrics_url=f"http://127.0.0.1:{self.metrics_port}/metrics",
            model=self.served.name,
            inputs=self.served.inputs,
            outputs=tuple(t.name for t in self.served.outputs),
            max_batch_size=self.served.max_batch_size,
            policy=self.served.policy,
            intra_op_threads=self.served.intra_op_threads,
            notes=(self.served.fixed_batch_note,) if self.served.fixed_batch_note else (),
            provider=self.served.provider,
            session_providers=self.session_providers,
            session_options=self.session_options,
            runtime_env=self.runtime.name,
            onnxruntime=self.loaded.version,
        )

    def command(self, repository: Path) -> list[str]:
        return [
            str(self.environment.binary),
            f"--model-repository={repository}",
            f"--backend-directory={self.environment.backends}",
            f"--cache-directory={self.workdir / 'cache'}",
            "--allow-grpc=false",
            "--http-address=127.0.0.1",
            f"--http-port={self.http_port}",
            "--metrics-address=127.0.0.1",
            f"--metrics-port={self.metrics_port}",
            "--allow-cpu-metrics=false",
            "--strict-readiness=true",
            "--exit-on-error=true",
            "--disable-auto-complete-config",
            # under STOP_GRACE_S, after which stop() kills what is left of the group
            "--exit-timeout-secs=5",
            "--log-verbose=0",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
        ]

    def sandboxed_command(self, repository: Path) -> list[str]:
        """command() inside the bubblewrap sandbox: the serving venv and the repository read-only,
        this server's folder (its repository as serve() writes it, cache) writable, the GPU
        device nodes for the CUDA provider. It keeps the host's network namespace: the parent
        and the load generators reach its HTTP and metrics ports on 127.0.0.1, which a namespace
        of its own would hide (it binds only loopback; --allow-grpc=false). Under a runtime
        environment, its site-packages read-only too (its overlay's links point there)."""
        env = self.environment.env()
        site = None
        if self.runtime.root is not None:
            site = runtime_overlay.site_packages(self.runtime)
        outside = not repository.resolve().is_relative_to(self.workdir.resolve())
        binds = sandbox.Binds.of(
            read_only=[self.environment.venv, repository if outside else None, site],
            writable=[self.workdir],
            gpu=self.served.provider is ServingProvider.CUDA,
            share_net=True,
            env=tuple((k, env[k]) for k in ("PATH", "LD_LIBRARY_PATH") if k in env),
        )
        return sandbox.service_command(self.command(repository), self.workdir, binds)

    def start(self, repository: Path, timeout_s: float) -> None:
        self.process = start_service(
            self.sandboxed_command(repository), log_path=self.log_path, cwd=self.workdir
        )
        self._wait_ready(timeout_s)

    def log_text(self) -> str:
        """Triton's log, with this server's temporary folder left out (no server paths shown)."""
        if not self.log_path.is_file():
            return ""
        text = self.log_path.read_text(errors="replace")
        return text.replace(f"{self.workdir}/models/{self.served.name}/1/", "")

    def _ready(self) -> bool:
        """The server, the model and the metrics port all answer: Triton opens its metrics port
        after HTTP says ready, and the load generator's first read is of the metrics (a run
        started in that gap under CI load was refused its first connection)."""
        base = f"http://{self.endpoint.http_url}/v2"
        urls = [base + "/health/ready", f"{base}/models/{self.served.name}/ready"]
        for url in [*urls, self.endpoint.metrics_url]:
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status != 200:
                        return False
            except (urllib.error.URLError, OSError):
                return False
        return True

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise UnavailableError(
                    f"Triton could not serve the model (it exited with code "
                    f"{self.process.returncode}): {triton_log_line(self.log_text())}."
                )
            if self._ready():
                log = self.log_text()
                self.session_providers = session_providers(log)
                self.session_options = session_options(log)
                self.loaded = runtime_overlay.loaded(log)
                return
            time.sleep(0.1)
        self.stop()
        raise UnavailableError(
            f"Triton was not ready within {timeout_s:g} s: {triton_log_line(self.log_text())}."
        )

    def stats(self) -> dict:
        """Triton's statistics for the served model (cumulative since the server started)."""
        url = f"http://{self.endpoint.http_url}/v2/models/{self.served.name}/stats"
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())["model_stats"][0]

    def shm_regions(self) -> list[Path]:
        """The shared memory regions this server's Python backend has in /dev/shm now."""
        return sorted(SHM_FOLDER.glob(f"{self.shm_prefix}*"))

    def _tritonserver_pid(self) -> int | None:
        """The tritonserver process of this server's group (under bwrap, not the leader)."""
        assert self.process is not None
        for pid, name in group_members(self.process.pid).items():
            if name == "tritonserver":
                return pid
        return None

    def stop(self) -> None:
        """SIGTERM to tritonserver, which unloads its models and ends their stubs; SIGKILL to
        what is left of its group after STOP_GRACE_S; then its shared memory regions removed
        (a stub killed mid-way, or a server that crashed, leaves them)."""
        if self.process is not None:
            stop_service(self.process, grace_s=STOP_GRACE_S, server_pid=self._tritonserver_pid())
        for region in self.shm_regions():
            region.unlink(missing_ok=True)


@contextmanager
def serve(
    model_path: Path,
    policy: BatchingPolicy,
    *,
    dims: dict[str, int] | None = None,
    intra_op_threads: int | None = None,
    start_timeout_s: float | None = None,
    environment: TritonEnvironment | None = None,
    provider: ServingProvider = ServingProvider.CPU,
    runtime_env: str = DEFAULT,
) -> Iterator[TritonServer]:
    """Serve one ONNX file under one batching policy until the block ends; the server is stopped
    and its repository removed whatever happens. provider cuda: KIND_GPU instances on GPU 0.
    runtime_env: the environment whose onnxruntime the model runs on (unknown, not set up or
    pinning no onnxruntime: one sentence before anything starts)."""
    runtime = runtime_overlay.prepare(runtime_env)
    environment = environment or find_environment()
    served = plan_model(Path(model_path), policy, dims, intra_op_threads, provider=provider)
    timeout = start_timeout_s or settings.TRITON_START_TIMEOUT_S.get()
    with owned_folder("triton") as workdir:  # swept when this process is SIGKILLed
        # the model puts it first on sys.path (runtime_overlay.py)
        served = replace(served, onnxruntime_path=runtime_overlay.overlay_path(runtime, workdir))
        repository = write_repository(workdir / "models", Path(model_path), served)
        try:
            server = start_server(environment, served, workdir, repository, timeout, runtime)
        except UnavailableError as exc:
            if served.provider is not ServingProvider.CUDA:
                raise
            raise UnavailableError(
                f"{str(exc).rstrip('. ')}; the CUDA provider needs an NVIDIA GPU that Triton "
                "sees and onnxruntime-gpu in the serving environment, else serve on the CPU."
            ) from exc
        try:
            runtime_overlay.verify(runtime, server.loaded)
            yield server
        finally:
            server.stop()


def start_server(
    environment: TritonEnvironment,
    served: ServedModel,
    workdir: Path,
    repository: Path,
    timeout: float,
    runtime: RuntimeEnv | None = None,
) -> TritonServer:
    """A started server; a port taken between choosing it and Triton binding it gets one retry."""
    for attempt in (1, 2):
        server = TritonServer(environment, served, workdir, runtime)
        try:
            server.start(repository, timeout)
            return server
        except UnavailableError as exc:
            if attempt == 2 or "already in use" not in str(exc):
                raise
    raise AssertionError("the loop returns or raises")
