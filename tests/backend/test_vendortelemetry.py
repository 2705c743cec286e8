"""No process of Optiboard lets ONNX Runtime or OpenVINO report its use: real processes and a
real sandboxed child load both runtimes with a home of their own, and what those vendors keep
there (a device id and an event queue for Microsoft's collector, a Google Analytics client id) is
looked for. Until 2026-12-07 the CLI's `run` left both in the user's home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from backend.launch import sandbox
from backend.vendortelemetry import OPENVINO_CONSENT
from tests.backend.launch.sandboxed import TESTS, in_sandbox

VENDOR_FILES = (".cache/Microsoft", "intel/openvino_ga_cid", "intel/stats")
# Both vendors stay quiet on a build server: ONNX Runtime 1.32 checks these names (read from its
# library), OpenVINO's opt_in_checker CI, TF_BUILD and JENKINS_URL. A CI host that sets one would
# otherwise hide the behaviour the opt-outs are for, on the user's machine.
CI_MARKERS = (
    "CI", "TF_BUILD", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "TRAVIS", "JENKINS_URL",
    "CODEBUILD_BUILD_ID", "BUILDKITE", "TEAMCITY_VERSION", "APPVEYOR", "BITBUCKET_BUILD_NUMBER",
)  # fmt: skip
LOAD_BOTH = (
    "import numpy, onnxruntime, openvino, sys; "
    "onnxruntime.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])"
    ".run(None, {'x': numpy.ones((1, 16), numpy.float32)})"
)


def _left_in(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())


def _run(code: str, home: Path, model: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", *CI_MARKERS)}
    env |= {"HOME": str(home), "PYTHONPATH": str(TESTS.parent)}
    subprocess.run([sys.executable, "-c", code, str(model)], env=env, check=True, timeout=120)
    return _left_in(home)


def test_a_process_that_imports_the_domain_first_leaves_no_vendor_ids(
    mlp_path: Path, tmp_path: Path
) -> None:
    alone, ours = tmp_path / "alone", tmp_path / "ours"
    alone.mkdir()
    ours.mkdir()
    # the runtimes by themselves: what the opt-outs are for
    left = _run(LOAD_BOTH, alone, mlp_path)
    assert any(f.startswith(".cache/Microsoft/") for f in left), left
    assert "intel/openvino_ga_cid" in left, left
    # the dashboard, the worker, the CLI and Ray's tasks import backend before any runtime
    assert _run("import backend; " + LOAD_BOTH, ours, mlp_path) == [str(OPENVINO_CONSENT)]
    assert (ours / OPENVINO_CONSENT).read_text() == "0"


def test_an_account_that_chose_for_openvino_keeps_its_answer(
    mlp_path: Path, tmp_path: Path
) -> None:
    (tmp_path / OPENVINO_CONSENT).parent.mkdir()
    (tmp_path / OPENVINO_CONSENT).write_text("1")
    _run("import backend", tmp_path, mlp_path)
    assert (tmp_path / OPENVINO_CONSENT).read_text() == "1"


def test_a_sandboxed_child_leaves_no_vendor_ids_in_its_home(mlp_path: Path) -> None:
    left = in_sandbox("runtimes_loaded_home", str(mlp_path), read_only=[mlp_path])
    assert isinstance(left, list) and str(OPENVINO_CONSENT) in left  # the child's own opt-out
    assert not [f for f in left if f.startswith(VENDOR_FILES)], left


def test_a_child_that_does_not_import_the_domain_gets_the_opt_out_too(tmp_path: Path) -> None:
    """The Triton server's Python backend loads ONNX Runtime without importing backend: the
    sandbox's environment (Triton's and every sandboxed child's) carries the variable."""
    assert sandbox.environment(tmp_path)["ORT_DISABLE_TELEMETRY"] == "1"


def test_ray_reports_no_usage_from_a_process_of_ours_unless_its_account_asked(
    tmp_path: Path,
) -> None:
    """Ray's own decision, read in a fresh process: a node's `ray start` (join) inherits it."""
    ask = "from ray._common.usage import usage_lib; print(usage_lib.usage_stats_enabled())"
    env = {k: v for k, v in os.environ.items() if k != "RAY_USAGE_STATS_ENABLED"}
    env |= {"HOME": str(tmp_path), "PYTHONPATH": str(TESTS.parent)}

    def enabled(code: str, **extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code], env=env | extra, capture_output=True, text=True
        )
        return done.stdout.strip()

    assert enabled(ask) == "True"  # Ray's default
    assert enabled("import backend; " + ask) == "False"
    assert enabled("import backend; " + ask, RAY_USAGE_STATS_ENABLED="1") == "True"
