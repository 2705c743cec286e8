"""What a PyTorch archive is, and whether an ExportedProgram (.pt2) may be loaded, from its bytes.

Checked in this process without torch, before any child starts. torch 2.13's torch.export.load
reads models/<name>.json (a graph whose symbolic sizes it parses with sympy.sympify, i.e. eval,
and whose call targets it resolves by attribute lookup from torch, operator and math), weights and
constants as raw bytes (or with torch.load(weights_only=False) where a config says use_pickle),
torchbind and opaque constants with pickle, the sample inputs with torch.load (weights_only=True,
falling back to weights_only=False), and AOTInductor shared libraries. So only the plain layout
is let through: an allow-list of members, no pickled weights or objects, graph targets that are
torch operators or symbolic arithmetic, size expressions of sympy constructors and symbol names
only, and a sample-inputs pickle whose globals rebuild tensors and nothing else. The child then
loads it under bubblewrap with TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 (backend.models.pt2convert).
"""

from __future__ import annotations

import io
import json
import pickletools
import re
import tokenize
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from backend.errors import UserError
from backend.models.safezip import ZipLimits, checked_zip
from backend.models.zipdir import read_stream_directory

EXPORT_HINT = (
    "export it with torch.export.export(model, example_inputs, dynamic_shapes=...) and save that "
    "with torch.export.save(program, 'model.pt2'), then upload the .pt2"
)
JSON_CAP = 256 << 20  # bytes of models/model.json read (a large model's graph is a few MB)
CONFIG_CAP = 16 << 20  # bytes of a weights or constants config
PICKLE_CAP = 16 << 20  # bytes of the sample inputs' data.pkl
SAMPLE_CAP = 1 << 30  # bytes of the nested sample-inputs archive
SAMPLE_MEMBERS = 10_000  # its members: a pickle, a few records and one file per tensor storage
# members of a torch.export.save archive (below its root folder), torch 2.13
FIXED_MEMBERS = {
    "archive_format",
    "archive_version",
    "byteorder",
    ".data/version",
    ".data/serialization_id",
    "models/model.json",
    "data/weights/model_weights_config.json",
    "data/constants/model_constants_config.json",
    "data/sample_inputs/model.pt",
}
REQUIRED_MEMBERS = (
    "archive_format",
    "models/model.json",
    "data/weights/model_weights_config.json",
    "data/constants/model_constants_config.json",
)
PATTERN_MEMBERS = re.compile(r"data/weights/weight_\d+|data/constants/tensor_\d+|extra/[^/]+")
# node targets the deserializer resolves: torch operators (aten.add.Tensor) and higher-order ones
OPERATOR = re.compile(r"torch\.ops\.[a-z][A-Za-z0-9_]*\.[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?")
SYMBOLIC = {  # torch._export.serde.serialize._SYM_OPS, by the names it serializes them under
    *(f"_operator.{n}" for n in "eq ne le ge lt gt neg pos mul add sub floordiv mod pow".split()),
    *(f"_operator.{n}" for n in ("truediv", "and_", "or_", "lshift", "rshift", "getitem")),
    "math.trunc",
    *(f"torch.sym_{n}" for n in ("not", "int", "float", "ite", "max", "min", "sqrt")),
}
# names a size expression may use: sympy's srepr constructors, torch's sympy functions, flags
EXPR_NAMES = set(
    "Symbol Integer Rational Float Add Mul Pow Min Max Mod Abs floor ceiling Eq Ne Lt Le Gt Ge "
    "StrictLessThan StrictGreaterThan LessThan GreaterThan Equality Unequality And Or Not "
    "Piecewise ExprCondPair BooleanTrue BooleanFalse true false oo zoo nan Infinity "
    "NegativeInfinity Half One Zero NegativeOne True False FloorDiv ModularIndexing Where "
    "PythonMod CleanDiv CeilToInt FloorToInt CeilDiv LShift RShift PowByNatural FloatPow "
    "FloatTrueDiv IntTrueDiv IsNonOverlappingAndDenseIndicator TruncToFloat TruncToInt "
    "RoundToInt RoundDecimal ToFloat Identity integer positive nonnegative negative real "
    "finite nonzero precision".split()
)
BARE_SYMBOL = re.compile(r"[a-z]{1,4}\d+")  # s77, u0: sympy makes a Symbol of it
SYMBOL_NAME = re.compile(r"'[a-z]{1,4}\d+'|\"[a-z]{1,4}\d+\"|'-?\d+(\.\d+)?(e-?\d+)?'")
EXPR_OPS = {*"(),=+-*/<>%", "**", "//", "==", "!=", "<=", ">="}
EXPR_TOKENS = {tokenize.NAME, tokenize.STRING, tokenize.OP, tokenize.NUMBER, tokenize.NEWLINE}
EXPR_TOKENS |= {tokenize.NL, tokenize.ENDMARKER}
TENSOR_GLOBALS = {
    "torch._utils _rebuild_tensor_v2",
    "torch._utils _rebuild_parameter",
    "collections OrderedDict",
    "torch device",
    "torch Size",
    *(
        f"torch {kind}Storage"
        for kind in "Float Double Half BFloat16 Long Int Short Char Byte Bool".split()
    ),
}
CODE_OPCODES = {"INST", "OBJ", "EXT1", "EXT2", "EXT4", "STACK_GLOBAL"}


@dataclass(frozen=True)
class Pt2Archive:
    """A checked ExportedProgram archive: its root folder and what it holds."""

    root: str
    weights: int
    constants: int
    nodes: int
    operators: tuple[str, ...]


def torch_kind(names: list[str]) -> str | None:
    """'exported', 'aoti', 'torchscript', 'pickled' or None for a zip torch did not write."""
    roots = {n.split("/", 1)[0] for n in names if "/" in n}
    if len(roots) != 1:
        return None
    root = roots.pop()
    inner = {n[len(root) + 1 :] for n in names if n.startswith(root + "/")}
    if "archive_format" in inner and any(n.startswith("models/") for n in inner):
        return "aoti" if any(n.startswith("data/aotinductor/") for n in inner) else "exported"
    if "archive_format" in inner and any(n.startswith("data/aotinductor/") for n in inner):
        return "aoti"
    scripted = "constants.pkl" in inner or any(n.startswith("code/") for n in inner)
    if "data.pkl" in inner and scripted:
        return "torchscript"
    if "data.pkl" in inner:
        return "pickled"
    return None


def refuse_other_kinds(kind: str, filename: str) -> None:
    """One sentence for every torch archive that is not a plain ExportedProgram."""
    if kind == "torchscript":
        raise UserError(
            f"The file {filename!r} is a TorchScript archive (torch.jit.save), which is never "
            f"loaded here because it runs its own code; {EXPORT_HINT}."
        )
    if kind == "pickled":
        raise UserError(
            f"The file {filename!r} is a pickled PyTorch model or state dict (torch.save), which "
            f"is never loaded here because unpickling runs code; {EXPORT_HINT}."
        )
    if kind == "aoti":
        raise UserError(
            f"The file {filename!r} is an AOTInductor package (compiled native code), which is "
            f"never loaded here; {EXPORT_HINT} without aoti_compile_and_package."
        )


def sniff_torch_zip(path: Path) -> str | None:
    """The torch archive kind of a zip upload (names only, after the raw layout checks)."""
    try:
        with checked_zip(Path(path)) as handle:
            return torch_kind(handle.namelist())
    except UserError:
        return None  # not for us to judge here: the zip path refuses it with its own sentence


def check_archive(path: Path, filename: str, limits: ZipLimits | None = None) -> Pt2Archive:
    """Refuse anything but a plain ExportedProgram, one sentence each; nothing is unpickled."""
    with checked_zip(Path(path), limits) as handle:
        names = [info.filename for info in handle.infolist() if not info.is_dir()]
        kind = torch_kind(names)
        if kind != "exported":
            refuse_other_kinds(kind or "", filename)
            raise UserError(
                f"The file {filename!r} is not an archive written by torch.export.save; "
                f"{EXPORT_HINT}."
            )
        root = names[0].split("/", 1)[0]
        inner = [n[len(root) + 1 :] for n in names]
        _check_members(inner, filename)
        graph = _read_json(handle, f"{root}/models/model.json", JSON_CAP, filename)
        weights = _check_config(handle, root, "weights", "weight_", filename)
        constants = _check_config(handle, root, "constants", "tensor_", filename)
        operators = _check_graph(graph, filename)
        if "data/sample_inputs/model.pt" in inner:
            _check_sample_inputs(handle, f"{root}/data/sample_inputs/model.pt", filename)
    nodes = len(graph.get("graph_module", {}).get("graph", {}).get("nodes", []))
    return Pt2Archive(root, weights, constants, nodes, tuple(sorted(operators)))


def child_check_archive(path: str, filename: str) -> dict[str, Any]:
    """check_archive in a parse child (pt2convert.check_archive_in_child): what it found."""
    return asdict(check_archive(Path(path), filename))


def _check_members(inner: list[str], filename: str) -> None:
    odd = [n for n in inner if n not in FIXED_MEMBERS and not PATTERN_MEMBERS.fullmatch(n)]
    if odd:
        raise UserError(
            f"The .pt2 file {filename!r} holds {odd[0]!r}, which a plain torch.export.save "
            "archive does not (only one program, with tensor weights and constants, is "
            f"accepted: no pickled objects, AOTInductor code or extra models); {EXPORT_HINT}."
        )
    missing = [n for n in REQUIRED_MEMBERS if n not in inner]
    if missing:
        raise UserError(
            f"The .pt2 file {filename!r} has no {missing[0]}, so it is not a complete "
            f"torch.export.save archive; {EXPORT_HINT}."
        )


def _read(handle: zipfile.ZipFile, name: str, cap: int, filename: str) -> bytes:
    info = handle.getinfo(name)
    if info.file_size > cap:
        raise UserError(
            f"The .pt2 file {filename!r} has a {info.file_size >> 20} MB {name.split('/', 1)[1]}, "
            f"more than the {cap >> 20} MB that is read; {EXPORT_HINT}."
        )
    with handle.open(info) as member:
        return member.read(cap + 1)[:cap]


def _read_json(handle: zipfile.ZipFile, name: str, cap: int, filename: str) -> dict[str, Any]:
    try:
        loaded = json.loads(_read(handle, name, cap, filename))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(
            f"The .pt2 file {filename!r} has an unreadable {name.split('/', 1)[1]} ({exc}); "
            f"{EXPORT_HINT}."
        ) from None
    if not isinstance(loaded, dict):
        raise UserError(
            f"The .pt2 file {filename!r} has a {name.split('/', 1)[1]} that is not a JSON object; "
            f"{EXPORT_HINT}."
        )
    return loaded


def _check_config(
    handle: zipfile.ZipFile, root: str, folder: str, prefix: str, filename: str
) -> int:
    """Every weight or constant stored as raw bytes (use_pickle false), none as an object."""
    name = f"{root}/data/{folder}/model_{folder}_config.json"
    config = _read_json(handle, name, CONFIG_CAP, filename).get("config", {})
    if not isinstance(config, dict):
        raise UserError(
            f"The .pt2 file {filename!r} has a malformed {folder} config; {EXPORT_HINT}."
        )
    for fqn, entry in config.items():
        path_name = entry.get("path_name", "") if isinstance(entry, dict) else ""
        if (
            not isinstance(entry, dict)
            or entry.get("use_pickle") is not False
            or not (isinstance(path_name, str) and re.fullmatch(rf"{prefix}\d+", path_name))
        ):
            raise UserError(
                f"The .pt2 file {filename!r} stores the {folder[:-1]} {str(fqn)[:80]!r} as a "
                "pickled object (a tensor subclass, torchbind or opaque object), which is never "
                f"loaded here because unpickling runs code; {EXPORT_HINT} with plain tensors."
            )
    return len(config)


def _walk(value: Any, found: dict[str, list[str]]) -> None:
    """Collect every node target and every size expression anywhere in the graph JSON."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if key in ("target", "expr_str") and isinstance(inner, str):
                    found[key].append(inner)
                elif isinstance(inner, (dict, list)):
                    stack.append(inner)
        elif isinstance(item, list):
            stack.extend(x for x in item if isinstance(x, (dict, list)))


def _check_graph(graph: dict[str, Any], filename: str) -> set[str]:
    found: dict[str, list[str]] = {"target": [], "expr_str": []}
    _walk(graph.get("graph_module", {}), found)
    operators = set()
    for target in found["target"]:
        if target in SYMBOLIC:
            continue
        if not OPERATOR.fullmatch(target) or target.startswith("torch.ops.load_library"):
            raise UserError(
                f"The .pt2 file {filename!r} calls {target[:80]!r}, which is not a torch "
                "operator; only graphs of torch.ops operators (what torch.export produces) are "
                f"loaded here; {EXPORT_HINT}."
            )
        operators.add(target)
    for expression in found["expr_str"]:
        check_expression(expression, filename)
    return operators


def check_expression(expression: str, filename: str) -> None:
    """A size expression must be sympy constructors over numbers and symbol names: sympify
    evaluates it with Python's eval, so anything else is refused before it gets there."""
    bad = None
    if len(expression) > 10_000:
        bad = "a size expression of more than 10,000 characters"
    else:
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(expression).readline))
        except (tokenize.TokenError, SyntaxError, IndentationError):
            tokens, bad = [], "an unreadable size expression"
        for token in tokens:
            kind, text = token.type, token.string
            if kind == tokenize.NAME and not (text in EXPR_NAMES or BARE_SYMBOL.fullmatch(text)):
                bad = f"the name {text!r} in a size expression"
            elif kind == tokenize.STRING and not SYMBOL_NAME.fullmatch(text):
                bad = f"the string {text[:40]!r} in a size expression"
            elif kind == tokenize.OP and text not in EXPR_OPS:
                bad = f"the operator {text!r} in a size expression"
            elif kind not in EXPR_TOKENS:
                bad = f"the token {text[:40]!r} in a size expression"
            if bad:
                break
    if bad:
        raise UserError(
            f"The .pt2 file {filename!r} has {bad}, which torch.export never writes (sympy would "
            f"run it as Python code); {EXPORT_HINT}."
        )


def _check_sample_inputs(handle: zipfile.ZipFile, name: str, filename: str) -> None:
    """The sample inputs are a torch.save archive: its pickle may only rebuild tensors."""
    info = handle.getinfo(name)
    if info.file_size > SAMPLE_CAP:
        raise UserError(
            f"The .pt2 file {filename!r} has {info.file_size >> 20} MB of sample inputs, more "
            f"than {SAMPLE_CAP >> 20} MB; {EXPORT_HINT} with smaller example inputs."
        )
    with handle.open(info) as member:  # read as a stream: it never sits whole in memory
        _walk_sample_directory(member, info.file_size, filename)
        try:
            member.seek(0)
            with zipfile.ZipFile(member) as inner:
                pickles = [n for n in inner.namelist() if n.endswith(".pkl")]
                if [p.rsplit("/", 1)[-1] for p in pickles] != ["data.pkl"]:
                    raise ValueError("not one data.pkl")
                data = _read(inner, pickles[0], PICKLE_CAP, filename)
        except (zipfile.BadZipFile, ValueError, OSError, KeyError) as exc:
            raise UserError(
                f"The .pt2 file {filename!r} has sample inputs that are not a torch.save "
                f"archive ({exc}); {EXPORT_HINT}."
            ) from None
    check_pickle(data, filename)


def _walk_sample_directory(member: Any, size: int, filename: str) -> None:
    """The nested archive's end records and directory, checked before zipfile reads them (it
    builds an object per entry: millions of tiny entries in a small file)."""
    try:
        read_stream_directory(member, size, SAMPLE_MEMBERS)
    except UserError as exc:  # its sentence, without the advice meant for an upload
        reason = str(exc).split(";")[0]
        raise UserError(
            f"The .pt2 file {filename!r} has sample inputs that are not a plain torch.save "
            f"archive ({reason[:1].lower()}{reason[1:]}); {EXPORT_HINT}."
        ) from None


def check_pickle(data: bytes, filename: str) -> None:
    """Walk the pickle's opcodes without running it: only the globals that rebuild tensors."""
    try:
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name in CODE_OPCODES or (
                opcode.name == "GLOBAL" and str(arg).replace("\n", " ") not in TENSOR_GLOBALS
            ):
                shown = str(arg).replace("\n", " ").replace(" ", ".") if arg else opcode.name
                raise UserError(
                    f"The .pt2 file {filename!r} has sample inputs whose pickle would call "
                    f"{shown[:80]!r}, which is not a tensor (a crafted archive that runs code is "
                    f"never loaded here); {EXPORT_HINT}."
                )
    except ValueError as exc:
        raise UserError(
            f"The .pt2 file {filename!r} has sample inputs with an unreadable pickle ({exc}); "
            f"{EXPORT_HINT}."
        ) from None
