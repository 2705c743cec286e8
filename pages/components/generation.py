"""The generation benchmark on the pages: Optimize's form for a generative model, and Compare's
live view of generation jobs (TTFT and ITL against sequences, tokens/s against memory,
perplexity against speed). Widgets only; backend/generate/jobspec.py checks and queues, and
backend/generate/points.py makes the frame and the figures. Every choice is kept in the URL.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

import settings
from backend.auth.audit import Action
from backend.auth.roles import Permission
from backend.counts import counted
from backend.errors import UserError
from backend.generate import jobreport, jobspec, points, variantnames
from backend.generate.weightonly import ALGORITHMS, BLOCK_SIZES
from backend.knobs import knobs
from backend.queue import jobs, progress
from backend.records import ModelRow
from backend.reporting import frames
from pages.access import can, cannot, guarded, link_scope, signed_link_control
from pages.components.formatting import EMPTY, plain
from pages.components.gate import require_access
from pages.components.live import refresh_every
from pages.components.url_state import (
    bound_multiselect,
    bound_pills,
    bound_selectbox,
    url_ids,
    url_list,
)
from pages.components.widgets import job_label, job_queued, show_error, why_in_full

PROMPTS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
NEW_TOKENS = [8, 16, 32, 64, 128, 256, 512]
SEQUENCES = [1, 2, 4, 8, 16, 32, 64]
MEASURES = {
    "quick": "Quick: 2 windows within 25%, for a first look",
    "standard": "Standard: 3 stable windows within 10%",
}


def generation_form(model: ModelRow) -> None:
    """Optimize for a generative model: variants x runtimes x points, a text, submit."""
    context = jobspec.model_context(model.id)
    st.caption(
        f"{plain(model.name)} is a generative model"
        + (f" (context {context} tokens)" if context else "")
        + ": every variant runs on every runtime at every prompt length, new-token count and "
        "number of concurrent sequences, with greedy decoding of exactly that many tokens."
    )
    left, right = st.columns(2)
    with left:
        variants = variant_choice()
        runtimes = bound_multiselect(
            "Runtimes", jobspec.offered_runtimes(), "g_runtimes", default=["ort-genai"]
        )
        fits = [p for p in PROMPTS if not context or p < context] or PROMPTS[:1]
        prompts = bound_multiselect(
            "Prompt lengths (tokens)", fits, "g_prompts", default=[min(128, fits[-1])]
        )
        shortest = min(prompts or fits[:1])  # a count that no picked prompt leaves room for
        room = [n for n in NEW_TOKENS if not context or shortest + n <= context] or NEW_TOKENS[:1]
        new_tokens = bound_multiselect(
            "New tokens per sequence", room, "g_new", default=[min(64, room[-1])]
        )
        sequences = bound_multiselect(
            "Concurrent sequences",
            SEQUENCES,
            "g_seqs",
            default=[1],
            help="Sequences generated together as one batch: TTFT and ITL are drawn against this.",
        )
    with right:
        preset = bound_selectbox(
            "Measurement", list(MEASURES), "g_measure", default="quick", format_func=MEASURES.get
        )
        text = st.file_uploader(
            "Perplexity text (optional, UTF-8)",
            type=["txt", "md"],
            key="perplexity_text",
            max_upload_size=max(1, math.ceil(settings.PERPLEXITY_TEXT_MB.get())),
            help="Scored through each runtime's KV cache; a variant more than "
            f"{jobspec.PERPLEXITY_BOUND:.0%} above FP32's perplexity is stored as wrong outputs.",
        )
        label = st.text_input("Label (optional)", placeholder="e.g. FP32 vs INT4", key="g_label")
    try:
        if not runtimes or not variants:
            raise UserError("Pick at least one variant and one runtime.")
        spec = jobspec.GenerationJobSpec(
            variants=tuple(variants),
            runtimes=tuple(runtimes),
            prompt_lengths=tuple(sorted(prompts)),
            new_tokens=tuple(sorted(new_tokens)),
            sequences=tuple(sorted(sequences)),
            preset=preset or "quick",
        )
    except UserError as exc:
        spec = None
        st.warning(str(exc), icon="✋")
    st.divider()
    count = len(spec.point_keys()) if spec else 0
    summary, button = st.columns([3, 1], vertical_alignment="center")
    summary.metric("Points in this generation benchmark", count)
    if (why_not := cannot("submit a generation benchmark", Permission.SUBMIT)) is not None:
        button.caption(why_not)  # beside the greyed-out button: what, and who can
    if not button.button(
        f"Submit generation benchmark ({count})",
        type="primary",
        disabled=spec is None or not can(Permission.SUBMIT),
        key="submit_generation",
    ):
        return
    assert spec is not None
    try:
        with guarded(Action.SUBMIT, f"model {model.id}", configurations=count):
            job = jobspec.submit_generation(
                model.id,
                spec,
                text.getvalue() if text is not None else None,
                text.name if text is not None else None,
                label=label or None,
            )
    except UserError as exc:
        show_error(exc)
        return
    job_queued(job.id, counted(job.progress_total, "generation point"), {"view": "generation"})
    if not jobs.list_workers():
        st.warning("No worker is alive; start one with `python -m backend.queue.worker`.")


ALGORITHM_NAMES = {
    "rtn": "RTN (round to nearest)",
    "hqq": "HQQ (optimised scales, 4-bit, asymmetric)",
    "gptq": "GPTQ (calibrated on the perplexity text, 4-bit)",
}
LEVELS = ["default", "0", "1", "2", "3", "4"]


def variant_choice() -> list[str]:
    """The variants multiselect (names, kept in the link) and the pickers that build one more
    name from algorithm, bits, block size, symmetry and accuracy level (variantnames.py)."""
    field, declared, _ = next(
        k for k in knobs(jobspec.GenerationJobSpec) if k[0].name == "variants"
    )
    key = declared.url or "g_variants"
    with st.expander("Build a weight-only variant", expanded=False):
        bits = bound_selectbox("Weight bits", [4, 8], "g_bits", default=4)
        algorithms = list(ALGORITHMS) if bits == 4 else ["rtn"]
        algorithm = bound_selectbox(
            "Algorithm", algorithms, "g_algo", default="rtn", format_func=ALGORITHM_NAMES.get
        )
        block = bound_selectbox("Block size", list(BLOCK_SIZES), "g_block", default=32)
        symmetry = bound_selectbox(
            "Zero points",
            ["sym", "asym"],
            "g_sym",
            default="sym",
            format_func={"sym": "symmetric (none)", "asym": "asymmetric (one per block)"}.get,
            disabled=algorithm == "hqq",
            help="HQQ always stores zero points.",
        )
        level = bound_selectbox(
            "Accuracy level",
            LEVELS,
            "g_acc",
            default="default",
            help="MatMulNBits' compute type: 4 runs int8 activations on CPU; default leaves "
            "it to the runtime.",
        )
        parts = [f"int{bits}", algorithm or "rtn", f"b{block}"]
        parts += ["asym"] if symmetry == "asym" else []
        parts += [f"acc{level}"] if level not in (None, "default") else []
        try:
            built: str | None = variantnames.canonical("-".join(map(str, parts)))
        except UserError as exc:
            built = None
            st.warning(str(exc), icon="✋")
        if built is not None:
            st.caption(f"These build `{built}`: {variantnames.label(built)}.")
            if variantnames.is_gptq(built):
                st.caption("GPTQ calibrates on the perplexity text uploaded on the right.")
            st.button(
                f"Add {built} to the variants",
                key="g_add_variant",
                on_click=_add_variant,
                args=(key, built),
            )
    linked = []
    for name in url_list(key):
        try:
            linked.append(variantnames.canonical(name))
        except UserError:
            continue  # a link's name that does not read is dropped, as any unknown option is
    options = list(dict.fromkeys([*variantnames.PRESETS, *linked]))
    return bound_multiselect(
        declared.label,
        options,
        key,
        default=list(field.default),
        format_func=lambda name: f"{variantnames.label(name)} ({name})",
        help=declared.help,
    )


def _add_variant(key: str, name: str) -> None:
    """The built name joins the chosen variants (the link, which the multiselect reads)."""
    chosen = list(st.session_state.get(f"url_{key}") or [])
    if name not in chosen:
        chosen.append(name)
    st.query_params[key] = ",".join(chosen)
    st.session_state.pop(f"url_{key}", None)  # re-read from the link with its new option


def generation_comparison() -> None:
    """Compare's view of generation jobs (?view=generation&jobs=...&g_charts=...)."""
    wanted = url_ids("jobs")
    available = link_scope(frames.comparable_jobs(include=wanted, generation=True))
    if available.empty:
        st.info(
            "No generation benchmarks yet. Pick a generative model on the Optimize page and "
            "submit one; its points appear here as the worker measures them.",
            icon="📊",
        )
        return
    meta = available.set_index("job_id")
    job_ids = bound_multiselect(
        "Generation jobs",
        meta.index.tolist(),
        "jobs",
        default=meta.index.tolist()[:1],
        format_func=job_label(meta),
    )
    if not job_ids:
        st.info("Pick at least one job above.")
        return
    signed_link_control(job_ids)
    chosen = bound_pills(
        "Charts",
        list(points.CHARTS),
        "g_charts",
        default=list(points.CHARTS),
        format_func=lambda key: points.CHARTS[key][0],
    )
    active = bool(meta.loc[job_ids, "state"].isin(["queued", "running"]).any())
    live_points(tuple(job_ids), tuple(chosen), active)


@st.cache_data(show_spinner=False, max_entries=32)
def _frame(job_ids: tuple[int, ...], progress: tuple[int, ...]) -> pd.DataFrame:
    """Cached per selection and per progress, so a new point invalidates it."""
    del progress
    return points.generation_frame(list(job_ids))


# A point's figures as Compare's table and the Jobs page show them: TTFT, ITL, end-to-end,
# tokens/s, weights + KV cache memory, bandwidth, perplexity, greedy agreement (points.FIGURES),
# then the price per million output tokens (price per hour / (tokens/s x 3600) x 1e6).
POINT_COLUMNS = (*points.FIGURES, "cost_per_million_tokens")


# A point's label, wide: at 1500 px a narrow one cut "#3 llama · INT4 RTN b32 · ort-genai ·
# prompt 16, 8 nev" before its sequences, and the 1- and 2-sequence rows read alike.
def wide(header: str) -> Any:
    """A text column wide enough for a point's whole label."""
    return st.column_config.TextColumn(header, width="large")


def point_columns() -> dict[str, Any]:
    """Header, format and help of each of POINT_COLUMNS, from the figures' registry."""
    return {
        key: st.column_config.NumberColumn(
            frames.METRICS[key].header,
            format=frames.METRICS[key].printf(),
            help=frames.METRICS[key].label,
        )
        for key in POINT_COLUMNS
    }


def job_points(job_id: int, planned: list[progress.ConfigurationProgress]) -> None:
    """A generation job's points on the Jobs page: every planned one (pending too) with the
    figures Compare's generation view shows, not a sweep's latency, samples/s and energy."""
    frame = points.generation_frame([job_id]).set_index("key")
    rows = []
    for point in planned:
        row: dict[str, Any] = {"configuration": point.label, "status": point.status}
        if point.key in frame.index:
            stored = frame.loc[point.key]
            row |= {key: stored[key] for key in (*POINT_COLUMNS, "stable")}
            row["why / error"] = stored["verdict"] or stored["error"]
        rows.append(row | {"key": point.key})
    columns = ["configuration", "status", *POINT_COLUMNS, "stable", "why / error", "key"]
    if not any(row.get("why / error") for row in rows):  # a column empty in every row
        columns.remove("why / error")
    st.markdown("**Points**")
    st.dataframe(
        pd.DataFrame(rows, columns=columns),
        hide_index=True,
        column_config=point_columns() | {"configuration": wide("configuration")},
        key=f"points_{job_id}",
        placeholder=EMPTY,
    )
    why_in_full(
        [(r["configuration"], r.get("why / error") or "", r["status"] != "ok") for r in rows],
        f"why_{job_id}",
    )


def what_the_points_stand_on(measured: pd.DataFrame) -> list[str]:
    """Under the table: the peak the bandwidth shares are of (and where a share is no DRAM
    figure: the bytes sat in cache), what ran the points: each runtime's versions, the
    precision it computed in, and the hardware and host (the CLI's own line), and where a
    point's tokens left the reference, with the margins at the splits."""

    def distinct(column: str) -> list[str]:
        return [plain(v) for v in dict.fromkeys(measured[column].dropna()) if v]

    lines = []
    if peaks := distinct("peak_bandwidth"):
        lines.append("Peak bandwidth, which each share of peak is of: " + "; ".join(peaks) + ".")
    lines += [plain(line) for line in points.in_cache_notes(measured)]
    notes: dict[str, list[str]] = {}  # each other note once, with the points it is about
    uncached = measured[measured["bandwidth_cache"] == ""]
    for note, label in zip(uncached["bandwidth_note"], uncached["label"], strict=True):
        if note:
            notes.setdefault(note, []).append(label)
    lines += [
        f"{plain(note[:1].upper() + note[1:])} ({plain('; '.join(labels))})."
        for note, labels in notes.items()
    ]
    lines += [f"What ran: {line}" for line in distinct("ran")]  # distinct: already plain
    lines += distinct("split")  # where a point's tokens left the reference, margins there
    return lines


def live_points(job_ids: tuple[int, ...], chosen: tuple[str, ...], active: bool) -> None:
    """The charts and table, redrawn every few seconds while a picked job runs."""

    @st.fragment(run_every=refresh_every(active))
    def draw() -> None:
        require_access(Permission.COMPARE)  # a timed fragment rerun skips the page's first line
        meta = frames.comparable_jobs(include=job_ids, generation=True)
        picked = meta[meta["job_id"].isin(job_ids)]
        if active and not picked["state"].isin(["queued", "running"]).any():
            st.rerun()
        frame = _frame(job_ids, tuple(picked.sort_values("job_id")["results"]))
        if frame.empty:
            st.info("No point measured yet; this page fills in as the worker measures them.")
            return
        measured = frame[frame["status"].isin(["ok", "wrong outputs"])]
        st.caption(
            f"{counted(len(measured), 'measured point')} in {frame['series'].nunique()} series"
            + (" · refreshing while the benchmark runs" if active else "")
        )
        empty = {key: points.nothing_to_draw(key, frame) for key in points.CHARTS if key in chosen}
        for why in filter(None, empty.values()):
            st.caption(why)
        figures = [(key, points.CHARTS[key][1](frame)) for key, why in empty.items() if not why]
        captions = points.chart_captions(frame)  # as the sweep view says its fronts'
        for index in range(0, len(figures), 2):
            cols = st.columns(2)
            for col, (key, figure) in zip(cols, figures[index : index + 2], strict=False):
                col.plotly_chart(figure, key=f"gen_chart_{key}")
                if key in captions:  # what its fronts span, a point one leaves out with numbers
                    col.caption(plain(captions[key]))
        said = bool(measured["verdict"].fillna("").astype(bool).any())  # else empty in every row
        shown = ["label", "status", *POINT_COLUMNS, "precision", "stable", *["verdict"] * said]
        st.dataframe(
            measured[shown],
            hide_index=True,
            column_config=point_columns() | {"label": wide("label")},
            key="generation_table",
            placeholder=EMPTY,
        )
        for caption in what_the_points_stand_on(measured):
            st.caption(caption)
        downloads = st.columns(2)  # the same files as `optiboard export` (generate/jobreport)
        for column, fmt in zip(downloads, ("csv", "json"), strict=True):
            data, _count = jobreport.export_generation(list(job_ids), fmt)
            column.download_button(
                fmt.upper(),
                data,
                f"optiboard-generation.{fmt}",
                "text/csv" if fmt == "csv" else "application/json",
                icon="⬇️",
                key=f"download_generation_{fmt}",
                on_click="ignore",  # a download reruns nothing (pages/compare.py says why)
            )
        failed = frame[~frame["status"].isin(["ok", "wrong outputs"])]
        if not failed.empty:
            with st.expander(f"{counted(len(failed), 'point')} did not run"):
                st.dataframe(
                    failed[["label", "status", "error"]], hide_index=True, placeholder=EMPTY
                )

    draw()
