"""The newcomer's generative flow in a real headless Chromium, against a real `streamlit run` and
a real worker: bad Hugging Face zips and an over-cap text each get one sentence and leave nothing
behind; the trained tiny Llama's HF folder zip is uploaded, FP32 vs INT4 submitted from Optimize,
and Compare draws TTFT, ITL, tokens/s and perplexity as the worker stores each point; its link
reopens the same view in a fresh browser. Screenshots land in test-artifacts/.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import llm_models
from tests.browsing import chromium, skip_without_chromium
from tests.dashboard import app_and_worker
from tests.e2e.test_browser import ARTIFACTS, _legend, _wait_for

ROOT = Path(__file__).resolve().parents[2]
TEXT_CAP_MB = "0.05"  # the perplexity text cap for this server: a 60 kB text is over it
CHARTS = (
    "Time to first token against concurrency",
    "Inter-token latency against concurrency",
    "Tokens/s against memory",
    "Perplexity against speed",
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real server and a real worker sharing one fresh data directory."""
    skip_without_chromium()
    data = tmp_path / "data"
    with app_and_worker(
        data, tmp_path / "logs", "e2e-generation-", OPTIBOARD_PERPLEXITY_TEXT_MB=TEXT_CAP_MB
    ) as url:
        yield url, data


def _stored_files(data: Path) -> set[Path]:
    """Every file under the data directory but the database and the store's lock files."""
    return {
        p
        for p in data.rglob("*")
        if p.is_file() and ".db" not in p.name and ".locks" not in p.parts
    }


def _blob(data: Path, path: Path) -> Path:
    """Where the artifact store keeps a file's bytes (storage/artifacts.py: sha[:2]/sha)."""
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return data / "artifacts" / sha[:2] / sha


def test_newcomer_uploads_an_hf_zip_and_compares_fp32_with_int4_live(
    dashboard: tuple[str, Path], tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    url, data = dashboard
    ARTIFACTS.mkdir(exist_ok=True)
    spoilt = {
        "pickle.zip": ({"pickle_weights": True}, "holds pickled weights"),
        "notok.zip": ({"drop": ("tokenizer.json",)}, "has no tokenizer.json"),
        "bert.zip": (
            {"config_changes": {"architectures": ["BertForMaskedLM"], "model_type": "bert"}},
            "model builder cannot convert",
        ),
    }
    good = llm_models.hf_zip(tmp_path, name="llama.zip")
    eval_text = llm_models.trained_llama().eval_text
    text = tmp_path / "held-out.txt"
    text.write_text(eval_text)
    big = tmp_path / "big.txt"
    big.write_text(eval_text * (60_000 // len(eval_text) + 1))
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1600, "height": 1200})
        page = context.new_page()

        # 1. Bad zips: one sentence each, and the library and the store stay empty.
        page.goto(f"{url}/models")
        expect(page.get_by_text("The library is empty")).to_be_visible(timeout=60_000)
        before = _stored_files(data)
        notes = tmp_path / "notes.txt"  # no model at all: the uploader let it vanish silently
        notes.write_text("held-out prompts, not a model\n")
        uploads = {
            name: llm_models.hf_zip(tmp_path, name=name, **spoil)
            for name, (spoil, _) in spoilt.items()
        }
        uploads["notes.txt"] = notes
        spoilt["notes.txt"] = ({}, "is a text file, not a model")
        for name, (_, sentence) in spoilt.items():
            upload = uploads[name]
            page.locator("input[type=file]").first.set_input_files(str(upload))
            expect(page.get_by_text(name).first).to_be_visible(timeout=30_000)
            page.get_by_role("button", name="Add to library").click()
            error = page.locator("[data-testid=stAlertContentError]").filter(has_text=sentence)
            expect(error).to_be_visible(timeout=120_000)
            assert error.inner_text().count(". ") <= 1  # one sentence (names may hold dots)
            expect(page.get_by_text("The library is empty")).to_be_visible()
        assert _stored_files(data) == before
        page.screenshot(path=str(ARTIFACTS / "e2e-generation-1-refused.png"), full_page=True)

        # 2. The HF folder zip: converted by the model builder in the sandbox, a library model.
        page.locator("input[type=file]").first.set_input_files(str(good))
        expect(page.get_by_text("llama.zip").first).to_be_visible(timeout=30_000)
        page.get_by_role("button", name="Add to library").click()
        expect(page.get_by_text(re.compile(r"Added llama \(hf-genai"))).to_be_visible(
            timeout=300_000
        )

        # 3. Optimize offers the generation benchmark; an over-cap text is refused, then FP32 vs
        #    INT4 with the held-out text is queued.
        page.goto(f"{url}/optimize?model=1&g_prompts=16&g_new=8&g_seqs=1,2")
        submit = page.get_by_role("button", name=re.compile(r"Submit generation benchmark \(4\)"))
        expect(submit).to_be_visible(timeout=60_000)
        uploader = page.locator("input[type=file]").first
        uploader.set_input_files(str(big))
        expect(page.get_by_text("big.txt").first).to_be_visible(timeout=30_000)
        submit.click()
        refused = page.locator("[data-testid=stAlertContentError]")
        expect(refused).to_contain_text(f"over the {TEXT_CAP_MB} MB cap", timeout=30_000)
        uploader.set_input_files(str(text))
        expect(page.get_by_text("held-out.txt").first).to_be_visible(timeout=30_000)
        expect(refused).to_have_count(0, timeout=30_000)  # the upload's rerun has finished
        submit.click()
        expect(page.get_by_text("Queued job 1 with 4 generation points")).to_be_visible(
            timeout=60_000
        )
        assert _blob(data, text).is_file() and not _blob(data, big).exists()
        page.screenshot(path=str(ARTIFACTS / "e2e-generation-2-optimize.png"), full_page=True)
        page.get_by_role("button", name=re.compile("Copy link")).click()
        optimize_link = page.locator("[data-testid=stPopoverBody] code").first.inner_text()
        assert "g_seqs=1%2C2" in optimize_link or "g_seqs=1,2" in optimize_link
        page.keyboard.press("Escape")

        # 4. Compare draws the points as they land (the page is opened while the job runs).
        page.get_by_role("link", name="Compare its results as they arrive").click()
        wanted = {"#1 llama · FP32 · ort-genai", "#1 llama · INT4 RTN b32 · ort-genai"}
        _wait_for(page, lambda: wanted <= _legend(page), 400, "FP32 and INT4 on the charts")
        for title in CHARTS:  # a title wrapped to fit its column: each line a tspan, no space
            drawn = re.compile(r"\s*".join(map(re.escape, title.split())))
            expect(page.locator(".js-plotly-plot .gtitle").filter(has_text=drawn)).to_have_count(1)
        _wait_for(
            page,
            lambda: (
                "4 measured points in 2 series" in (html := page.content())
                and "refreshing while" not in html
            ),
            120,
            "every point, and the page done refreshing",
        )
        page.screenshot(path=str(ARTIFACTS / "e2e-generation-3-compare.png"), full_page=True)

        # 5. The page's link reopens the same view in a fresh browser.
        page.get_by_role("button", name=re.compile("Copy link")).click()
        link = page.locator("[data-testid=stPopoverBody] code").first.inner_text().strip()
        assert "view=generation" in link and "jobs=1" in link
        fresh = browser.new_context(viewport={"width": 1600, "height": 1200}).new_page()
        fresh.goto(link)
        _wait_for(fresh, lambda: _legend(fresh) == _legend(page), 90, "the same chart legends")
        fresh.screenshot(path=str(ARTIFACTS / "e2e-generation-4-shared.png"), full_page=True)
