"""Where bubblewrap does not work (a container without user namespaces), a child that reads an
untrusted file still runs with the sandbox's environment, no capabilities and, through Landlock,
only the sandbox's view of the files: real children, real probes, real uploads."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from backend.auth.links import signing_secret
from backend.compat.build import build_matrix_in_child
from backend.launch import children, landlock
from backend.launch.children import run_parse
from backend.models.ingest import ingest_file
from tests.backend.launch.sandboxed import TESTS

needs_landlock = pytest.mark.skipif(landlock.abi() == 0, reason="this kernel has no Landlock")


@pytest.fixture
def no_bubblewrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIBOARD_BWRAP", str(tmp_path / "no-bwrap"))
    monkeypatch.setenv("PGPASSWORD", "a secret of the service")  # what a child must not see


def _probe(target: str, *args: object, model: Path) -> Any:
    """probes.target(*args) as an upload's parse child runs, the tests folder readable."""
    return run_parse(
        f"tests.backend.launch.probes:{target}", *args, what="The probe", read_only=[model, TESTS]
    )


@needs_landlock
def test_a_parse_child_without_bubblewrap_reads_only_the_upload_and_its_scratch(
    data_dir: Path, mlp_path: Path, no_bubblewrap: None
) -> None:
    ingest_file(mlp_path, "mlp.onnx")  # the database now exists
    signing_secret()  # and the key that signs sessions and shared links
    secrets = [data_dir / "optiboard.db", data_dir / "link_secret", data_dir]
    outside = [Path.home(), TESTS.parent / "README.md", Path("/etc/passwd")]
    parents = f"/proc/{os.getpid()}/environ"  # this process's environment: PGPASSWORD

    reads = _probe(
        "try_reads", [str(p) for p in (mlp_path, *secrets, *outside)] + [parents], model=mlp_path
    )
    writes = _probe("try_writes", [str(data_dir / "x"), str(mlp_path.parent / "x")], model=mlp_path)

    assert reads.pop(str(mlp_path)) == "read"
    assert set(reads.values()) == {"PermissionError"}, reads
    assert set(writes.values()) == {"PermissionError"}, writes
    assert not (data_dir / "x").exists() and not (mlp_path.parent / "x").exists()


@needs_landlock
def test_a_parse_child_without_bubblewrap_gets_no_secret_capability_or_port(
    mlp_path: Path, no_bubblewrap: None
) -> None:
    unix_path = str(mlp_path.parent / "service.sock")  # as PostgreSQL's, peer authentication
    listening = socket.create_server(("127.0.0.1", 0))
    with listening, socket.socket(socket.AF_UNIX) as unix_server:
        unix_server.bind(unix_path)
        unix_server.listen()
        port = listening.getsockname()[1]
        environment = _probe("environment", model=mlp_path)
        connected = _probe("connect", port, model=mlp_path)
        unix = _probe("unix_connect", unix_path, model=mlp_path)
        udp = _probe("udp_send", port, model=mlp_path)
        status = _probe("try_reads", ["/proc/self/status"], model=mlp_path)
        capabilities = _probe("capabilities", model=mlp_path)

    assert status == {"/proc/self/status": "read"}  # its own /proc folder stays readable
    assert "PGPASSWORD" not in environment and environment["HOME"] != os.environ.get("HOME")
    assert environment["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert connected == unix == udp == "PermissionError"  # no socket at all (seccomp)
    assert capabilities == {"CapEff": 0, "CapPrm": 0, "CapBnd": 0, "CapAmb": 0}


@needs_landlock
def test_an_upload_is_parsed_and_its_matrix_built_without_bubblewrap_each_child_confined(
    data_dir: Path, cnn_path: Path, no_bubblewrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, bool]] = []  # (target, confined) of each child given the model
    real_call = children.call_in_child

    def noting(target: str, *args: Any, **kwargs: Any) -> Any:
        if str(cnn_path) in map(str, args):
            calls.append((target, bool(kwargs.get("confine"))))
        return real_call(target, *args, **kwargs)

    monkeypatch.setattr(children, "call_in_child", noting)

    model = ingest_file(cnn_path, "cnn.onnx")
    matrix = build_matrix_in_child(cnn_path)

    assert model.node_count == len(matrix.nodes) and model.op_histogram["Conv"] >= 1
    openvino = matrix.cells["openvino"]  # OpenVINO read and queried the model, confined
    assert all(c.source.startswith("query_model: openvino") for c in openvino), openvino[0]
    assert calls == [
        ("backend.models.parse:child_check_onnx", True),
        ("backend.compat.build:matrix_in_child", True),
    ]


def test_on_a_kernel_without_landlock_a_parse_child_still_gets_no_secret_or_capability(
    mlp_path: Path, no_bubblewrap: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This host as one without Landlock (an old kernel): the file view is the service's, which
    the isolation summary says in capitals, but the environment and capabilities are not."""
    monkeypatch.setattr(landlock, "abi", lambda: 0)

    environment = _probe("environment", model=mlp_path)
    capabilities = _probe("capabilities", model=mlp_path)
    reads = _probe("try_reads", [str(TESTS.parent / "README.md")], model=mlp_path)

    assert "PGPASSWORD" not in environment and environment["USER"] == "optiboard"
    assert capabilities == {"CapEff": 0, "CapPrm": 0, "CapBnd": 0, "CapAmb": 0}
    assert set(reads.values()) == {"read"}  # no Landlock: nothing narrows the files it sees
