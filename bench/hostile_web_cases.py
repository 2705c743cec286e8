"""The hostile cases of bench/hostile_inputs.py that need more than an upload call: an upload
flood against a running dashboard, the Graph page's cost bomb, a tensor name that injects into
config.pbtxt through `serve export`, and file names written in Markdown.

Each case returns a note (accepted) or raises UserError (a clean refusal); a note that ends in
UNEXPECTED is a finding. Expected: unsigned upload PUTs refused (403), an editor's refused past
the per-session cap (413 or 429), the cost bomb refused or counted outside this process, the
injected name escaped with no `parameters` key, Markdown names shown as text.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

import settings
from backend.errors import UserError
from tests import hostile, hostile_web
from tests import models as model_factory
from tests.pages.router import through_app_py

ROOT = Path(__file__).resolve().parents[1]
FLOOD_PUTS, FLOOD_MB = 64, 5  # what the review sent: 64 x 5 MB took the server 312 -> 634 MB
STORED = (200, 204)
Case = tuple[str, Callable[[], str]]


def _codes(codes: list[int]) -> str:
    return ", ".join(f"{code} x{count}" for code, count in sorted(Counter(codes).items()))


def upload_flood(dash: hostile_web.Dashboard, cookies: dict[str, str] | None) -> Callable[[], str]:
    """FLOOD_PUTS PUTs of FLOOD_MB from one websocket session (signed in when cookies say so)."""

    def call() -> str:
        before = hostile_web.rss_mb(dash.process.pid)
        with hostile_web.open_session(dash.url, cookies) as session:
            codes = hostile_web.flood(dash.url, session, FLOOD_PUTS, FLOOD_MB << 20)
            grown = hostile_web.rss_mb(dash.process.pid) - before
        stored = sum(code in STORED for code in codes)
        seen = f"{_codes(codes)}; server RSS {grown:+.0f} MB with the session open"
        if cookies is None:  # at the sign-in gate: nothing may be stored
            if session.at_the_gate and stored == 0 and set(codes) == {403}:
                raise UserError(f"every PUT refused ({seen})")
            return f"{stored} of {FLOOD_PUTS} stored in the server's memory ({seen}) UNEXPECTED"
        assert not session.at_the_gate, "the editor's cookie did not sign the session in"
        first = next((i for i, code in enumerate(codes) if code not in STORED), None)
        if first is not None and first > 0 and set(codes[first:]) <= {413, 429}:
            raise UserError(f"{first} stored, then refused from PUT {first + 1} on ({seen})")
        return f"{stored} of {FLOOD_PUTS} stored, no cap reached ({seen}) UNEXPECTED"

    return call


def cost_bomb(path: Path, seq: int) -> Callable[[], str]:
    """The Graph page's compute cost at seq (the page's own call)."""
    from backend.counts import scaled
    from backend.models.costing import cost_in_child

    def call() -> str:
        cost = cost_in_child(path, 1, {"seq": seq}, path.name)
        return f"counted in a limited child: {scaled(cost.flops)} FLOPs, nothing sized here"

    return call


def injected_name(folder: Path, data: Path) -> Callable[[], str]:
    """Upload the model with the injecting input name, then `serve export` it (the CLI)."""
    from backend.models.ingest import ingest_file

    def call() -> str:
        from google.protobuf import text_format
        from tritonclient.grpc import model_config_pb2

        row = ingest_file(hostile.injected_name_model(folder / "inject.onnx"), "inject.onnx")
        out = folder / "inject-triton.zip"
        env = {**os.environ, settings.DATA_DIR.name: str(data)}
        env.pop(settings.DATABASE_URL.name, None)
        done = subprocess.run(
            [sys.executable, "-m", "backend.cli", "serve", "export", str(row.id), "-o", str(out)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise UserError(f"serve export refused it: {lines[-1] if lines else done.returncode}")
        found = []
        with zipfile.ZipFile(out) as archive:
            for name in (n for n in archive.namelist() if n.endswith("config.pbtxt")):
                config = model_config_pb2.ModelConfig()
                text_format.Parse(archive.read(name).decode(), config)
                if "EXECUTION_ENV_PATH" in config.parameters:
                    return f"{name} ships parameters EXECUTION_ENV_PATH (injected) UNEXPECTED"
                found.append([tensor.name for tensor in config.input])
        escaped = all(names == [hostile.INJECTED_NAME] for names in found)
        if escaped:
            return f"the name is one escaped input in all {len(found)} configs, no parameters key"
        return f"inputs read back as {found} UNEXPECTED"

    return call


def markdown_names(folder: Path) -> Callable[[], str]:
    """A model and an evaluation .npz uploaded under MARKDOWN_NAME; the pages that show them."""

    def call() -> str:
        from backend.models.ingest import ingest_file
        from backend.queue import jobs
        from backend.specs import SweepSpec
        from tests.pages.seed import open_page
        from tests.pages.test_untrusted_text import _leaks

        path = model_factory.save(model_factory.make_mlp(), folder / "md.onnx")
        model = ingest_file(path, hostile.MARKDOWN_NAME + ".onnx")
        npz = folder / "md.npz"
        np.savez(npz, x=np.zeros((4, 16), np.float32), labels=np.zeros(4, np.int64))
        sha = jobs.store_evaluation(model.id, npz, hostile.MARKDOWN_NAME + ".npz")
        job = jobs.submit_sweep(model.id, SweepSpec(evaluation_sha256=sha), label="md")
        link = {**jobs.spec_to_query(jobs.spec_of(job)), "from_job": job.id}
        leaks = {}
        with through_app_py():
            for page, query in (("models", {}), ("graph", {}), ("optimize", link)):
                at = open_page(page, model=model.id, **query)
                if at.exception:
                    return f"the {page} page failed: {at.exception[0].message} UNEXPECTED"
                if found := _leaks(at):
                    leaks[page] = found[0][1][:80]
        jobs.cancel_job(job.id)  # never run: it only carried the evaluation choice
        if leaks:
            return f"rendered as Markdown on {leaks} UNEXPECTED"
        return "shown as text on the Models, Graph and Optimize pages (evaluation choice included)"

    return call


def web_cases(folder: Path, data: Path, dash: hostile_web.Dashboard) -> list[Case]:
    from backend.auth import accounts
    from backend.auth.cli import cli_principal

    accounts.add_account(cli_principal(), "bench-editor", "editor", "correct horse battery")
    bomb = hostile.cost_bomb(folder / "cost_bomb.onnx")
    return [
        (f"upload flood, unsigned ({FLOOD_PUTS} x {FLOOD_MB} MB)", upload_flood(dash, None)),
        (
            f"upload flood, editor ({FLOOD_PUTS} x {FLOOD_MB} MB)",
            upload_flood(dash, hostile_web.signed_in_cookies(dash.url, "bench-editor")),
        ),
        ("cost bomb seq=3,000 (72 MB of int64)", cost_bomb(bomb, 3_000)),
        ("cost bomb seq=1,000,000 (8 TB of int64)", cost_bomb(bomb, 1_000_000)),
        ("cost bomb seq=10^9 (past the dim cap)", cost_bomb(bomb, 10**9)),
        ("injected tensor name -> serve export", injected_name(folder, data)),
        ("Markdown model and evaluation file names", markdown_names(folder)),
    ]
