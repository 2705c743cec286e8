"""The Netron graph viewer, served by the dashboard itself and patched to work offline for good.

The netron package ships its whole browser viewer. We copy it under static/netron (Streamlit
serves that folder at /app/static/netron) and patch three behaviours of the packaged build:

- the build-date check that refuses to open anything once the build is 180 days old;
- the cookie-consent dialog that blocks the viewer until clicked (it also asks ipinfo.io first);
- Google Analytics telemetry (page views, errors and events sent with navigator.sendBeacon).

and add two: Netron has no URL parameter that selects a node (its browser host reads only url,
identifier and gist), so a `node=` parameter selects and scrolls to the node of that name, or
the node producing the tensor of that name (unnamed ONNX nodes), once the model has opened; and
an `overlay=` parameter (a same-origin JSON URL) loads our own optiboard-overlay.js
(backend/viewer_overlay.js), which paints node fills, plain-text tooltips and a legend.

Every patch must match exactly once or `prepare_viewer` raises ViewerPatchError naming it, so a
netron upgrade that moves the code fails loudly (and tests/backend/test_viewer.py fails) instead
of silently showing a dialog. A Content-Security-Policy that starts from `default-src 'none'`
and allows only same-origin connections backs the telemetry patch up inside the browser.

Models are never copied into static/: the page hands the viewer a short-lived, per-session URL
(see pages/graph.py), so an upload is not published as a public file.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import settings

ROOT = settings.PROJECT_ROOT
STATIC_DIR = ROOT / "static" / "netron"
URL_PATH = "/app/static/netron/index.html"
PATCH_VERSION = 4  # bump when PATCHES or CSP change, so prepared copies are refreshed
MARKER = "optiboard-viewer.json"
# Our own script, copied beside netron's: paints an overlay's JSON (backend/graphview/overlay.py)
OVERLAY_SCRIPT = "optiboard-overlay.js"
OVERLAY_SOURCE = Path(__file__).with_name("viewer_overlay.js")


def max_viewer_bytes() -> int:
    """The browser tab holds the whole model in memory (Netron parses it there); past this the
    Graph page shows a structure-only copy (backend/graphview/skeleton.py) instead."""
    return settings.VIEWER_MAX_MB.get() * 1024 * 1024


# Deny everything, then allow only what the packaged viewer uses (checked in real Chromium by
# tests/backend/test_viewer.py): its own scripts, models fetched from our origin, images and
# workers it builds from blobs. Inline styles are allowed because netron's index.html and its
# SVG rendering use style attributes and one <style> element; CSS cannot send data anywhere
# because img-src, font-src and connect-src admit only our origin, data: and blob:.
# No inline or eval'd script, no frames, no forms, no plugins.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self' blob: data:; "
    "worker-src 'self' blob:; manifest-src 'self'; frame-src 'none'; object-src 'none'; "
    "base-uri 'none'; form-action 'none'"
)


class ViewerPatchError(RuntimeError):
    """The installed netron no longer matches a patch; update backend/viewer.py for it."""


@dataclass(frozen=True)
class Patch:
    """One textual change to one viewer file; `pattern` must match exactly once."""

    name: str
    file: str
    pattern: str  # a regular expression
    replacement: str


PATCHES: tuple[Patch, ...] = (
    Patch(
        "build-date expiry",
        "browser.js",
        r"const age = async \(\) => \{",
        "const age = async () => { return; /* optiboard: never expire */",
    ),
    Patch(
        "cookie consent dialog",
        "browser.js",
        r"const consent = async \(\) => \{",
        "const consent = async () => { return; /* optiboard: no dialog, no ipinfo.io */",
    ),
    Patch(
        "telemetry",
        "browser.js",
        r"const telemetry = async \(\) => \{",
        "const telemetry = async () => { return; /* optiboard: no analytics */",
    ),
    Patch(
        "focus a node and paint an overlay named in the URL",
        "browser.js",
        r"const status = await this\._openModel\(location, identifier\);",
        "const status = await this._openModel(location, identifier); /* optiboard: node= */ "
        "const paint = params.get('overlay'); if (paint && this._view.target) { "
        f"import('./{OVERLAY_SCRIPT}').then((m) => m.paint(this._view.target, paint, document))"
        ".catch((e) => document.body.setAttribute('data-optiboard-overlay-error', String(e))); } "
        "const focus = params.get('node'); const graph = this._view.target; "
        "if (focus && graph && graph._table) { "
        "const hit = Array.from(graph._table.values()).find((e) => e && e.id && "
        "String(e.id).startsWith('node-') && e.value && (e.value.name === focus || "
        "(e.value.outputs || []).some((a) => (a.value || []).some((v) => v && v.name === focus))));"
        " if (hit) { graph.scrollTo(graph.select([hit.value], 'sidebar'), 'instant'); "
        "document.body.setAttribute('data-optiboard-focused', focus); } }",
    ),
    Patch(
        "build date meta",
        "index.html",
        r'<meta name="date" content="[^"]*">',
        "",
    ),
    Patch(
        "content security policy",
        "index.html",
        r'<meta http-equiv="Content-Security-Policy" content="[^"]*">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
    ),
)


def netron_package_dir() -> Path:
    import netron

    return Path(netron.__file__).resolve().parent


def netron_version() -> str:
    import netron

    return str(getattr(netron, "__version__", "unknown"))


def apply_patches(files: dict[str, str]) -> dict[str, str]:
    """Return patched copies of the viewer's texts; raise if any patch no longer applies."""
    patched = dict(files)
    for patch in PATCHES:
        text = patched[patch.file]
        found = len(re.findall(patch.pattern, text))
        if found != 1:
            raise ViewerPatchError(
                f"Netron patch {patch.name!r} matched {found} times in {patch.file} "
                f"(netron {netron_version()}); update backend/viewer.py for this netron version."
            )
        patched[patch.file] = re.sub(patch.pattern, lambda _m, p=patch: p.replacement, text)
    return patched


def prepare_viewer(target: Path = STATIC_DIR, force: bool = False) -> Path:
    """Copy netron's static viewer to `target` and patch it; cheap when already up to date."""
    target = Path(target)
    stamp = {"netron": netron_version(), "patch_version": PATCH_VERSION}
    marker = target / MARKER
    if not force and marker.is_file() and json.loads(marker.read_text()) == stamp:
        return target
    source = netron_package_dir()
    texts = {
        name: (source / name).read_text(encoding="utf-8")
        for name in {patch.file for patch in PATCHES}
    }
    patched = apply_patches(texts)  # fails before anything is written
    staging = target.with_name(target.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns("*.py", "__pycache__", "*.pyc"))
    for name, text in patched.items():
        (staging / name).write_text(text, encoding="utf-8")
    shutil.copy(OVERLAY_SOURCE, staging / OVERLAY_SCRIPT)
    (staging / MARKER).write_text(json.dumps(stamp))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def viewer_url(
    model_url: str, filename: str, node: str | None = None, overlay: str | None = None
) -> str:
    """The iframe address that makes the viewer fetch `model_url` (same origin) as `filename`,
    selecting `node` (a node name, or the tensor an unnamed node produces) once it is drawn,
    and painting the overlay JSON at `overlay` (same origin; backend/viewer_overlay.js)."""
    url = f"{URL_PATH}?url={quote(model_url, safe='/')}&identifier={quote(filename, safe='')}"
    url += f"&node={quote(node, safe='')}" if node else ""
    return url + (f"&overlay={quote(overlay, safe='/')}" if overlay else "")


def focus_keys(path: Path) -> dict[str, str]:
    """{node name as profiles name it: what the viewer's node= finds it by}.

    Profiles name an unnamed node '<op>_<index>' (backend.engine.profile.name_nodes), which the
    uploaded file does not hold; the viewer finds such a node by the first tensor it produces.
    Read through graphview.structure, so a large file's weights are parsed in a limited child,
    never in the web process.
    """
    from backend.graphview.structure import read_structure

    return {node.key: node.focus for node in read_structure(path).nodes}


def op_histogram(path: Path) -> dict[str, int]:
    """Operator counts of an ONNX graph (weights are not loaded), for graphs ingestion never saw
    (a worker's variant, up to OPTIBOARD_VIEWER_MAX_MB): past models.graphread's
    IN_PROCESS_BYTES the protobuf is parsed in a limited child, as the structure's is."""
    from backend.models.graphread import parse_graph

    path = Path(path)
    what = f"Counting the operators of {path.name!r}"
    return parse_graph(path, child_op_histogram, what, read=_counts)


def _counts(answer: object) -> dict[str, int]:
    """A child's operator counts: a number per operator."""
    if not isinstance(answer, dict) or not all(isinstance(n, int) for n in answer.values()):
        raise TypeError("not a count per operator")
    return {str(op): n for op, n in answer.items()}


def child_op_histogram(path: str) -> dict[str, int]:
    from backend.models.graphread import load_graph
    from backend.models.inspect import op_histogram as histogram_of

    return histogram_of(load_graph(path))
