"""Extraction of untrusted zip uploads: no escapes, no links, no bombs.

Every member is checked before anything is written, and the bytes are counted while they are
written too, so a header that understates a member's size cannot get past the caps.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import settings
from backend.errors import UserError

CHUNK = 1 << 20
MB = 1 << 20
RATIO_FLOOR_BYTES = 1 * MB  # members smaller than this are never judged by their ratio


@dataclass(frozen=True)
class ZipLimits:
    """Caps on what one upload may unpack to; defaults come from settings when built."""

    max_members: int = field(default_factory=settings.MAX_ZIP_MEMBERS.get)
    max_total_bytes: int = field(default_factory=lambda: settings.MAX_UNCOMPRESSED_MB.get() * MB)
    max_ratio: float = field(default_factory=settings.MAX_COMPRESSION_RATIO.get)

    def __post_init__(self) -> None:
        if self.max_members < 1 or self.max_total_bytes < 1 or self.max_ratio < 1:
            raise ValueError(f"zip limits must be positive: {self}")


def _member_path(info: zipfile.ZipInfo) -> PurePosixPath:
    """The member's relative path, or a UserError when it could land outside the folder."""
    raw = info.filename
    name = raw.replace("\\", "/")
    if "\x00" in name:
        raise UserError(
            f"The zip entry {raw!r} has a NUL byte in its name; re-create the zip with plain names."
        )
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UserError(
            f"The zip entry {raw!r} has an absolute path; re-create the zip with paths relative "
            "to its top folder."
        )
    path = PurePosixPath(name)
    if ".." in path.parts:
        raise UserError(
            f"The zip entry {raw!r} points outside the archive with '..'; re-create the zip "
            "with paths inside one folder."
        )
    return path


def _check_member(info: zipfile.ZipInfo, limits: ZipLimits) -> None:
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        raise UserError(
            f"The zip entry {info.filename!r} is a symbolic link; zip the real files instead "
            "(for example with zip without --symlinks)."
        )
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise UserError(
            f"The zip entry {info.filename!r} is a device, pipe or socket, not a file; "
            "re-create the zip with regular files only."
        )
    if info.flag_bits & 0x1:
        raise UserError(
            f"The zip entry {info.filename!r} is encrypted; upload a zip without a password."
        )
    if info.file_size >= RATIO_FLOOR_BYTES:
        ratio = info.file_size / max(info.compress_size, 1)
        if ratio > limits.max_ratio:
            raise UserError(
                f"The zip entry {info.filename!r} expands {ratio:.0f} times (more than "
                f"{limits.max_ratio:g}), which looks like a zip bomb; upload the files "
                "without such extreme compression."
            )


def _check_count(members: list[zipfile.ZipInfo], limits: ZipLimits) -> None:
    if len(members) > limits.max_members:
        raise UserError(
            f"The zip holds {len(members)} entries, more than the limit of "
            f"{limits.max_members}; zip only the model files."
        )


def _check_totals(members: list[zipfile.ZipInfo], limits: ZipLimits) -> None:
    declared = sum(m.file_size for m in members)
    if declared > limits.max_total_bytes:
        raise UserError(
            f"The zip would unpack to {declared / MB:.1f} MB, more than the limit of "
            f"{limits.max_total_bytes / MB:.0f} MB; upload a smaller model or raise "
            "OPTIBOARD_MAX_UNCOMPRESSED_MB."
        )
    compressed = sum(m.compress_size for m in members)
    if declared >= RATIO_FLOOR_BYTES and declared / max(compressed, 1) > limits.max_ratio:
        raise UserError(
            f"The zip expands {declared / max(compressed, 1):.0f} times overall (more than "
            f"{limits.max_ratio:g}), which looks like a zip bomb; upload the files without "
            "such extreme compression."
        )


def _too_big(limits: ZipLimits) -> UserError:
    return UserError(
        f"The zip unpacks to more than {limits.max_total_bytes / MB:.0f} MB; upload a smaller "
        "model or raise OPTIBOARD_MAX_UNCOMPRESSED_MB."
    )


def extract_zip(archive: Path, limits: ZipLimits | None = None, parent: Path | None = None) -> Path:
    """Unpack `archive` into a new temp folder (under `parent`) and return it; caller removes it."""
    limits = limits or ZipLimits()
    try:
        handle = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(
            f"The upload is not a readable zip file ({exc}); re-create the zip and upload it again."
        ) from None
    if parent is not None:
        Path(parent).mkdir(parents=True, exist_ok=True)
    target = Path(tempfile.mkdtemp(prefix="unzip-", dir=parent)).resolve()
    try:
        with handle:
            members = handle.infolist()
            _check_count(members, limits)
            plan: list[tuple[zipfile.ZipInfo, PurePosixPath]] = []
            seen: set[str] = set()
            for info in members:
                path = _member_path(info)
                _check_member(info, limits)
                key = path.as_posix().rstrip("/")
                if key in ("", "."):
                    continue
                if key in seen:
                    raise UserError(
                        f"The zip holds {info.filename!r} twice; re-create the zip so each file "
                        "appears once."
                    )
                seen.add(key)
                plan.append((info, path))
            _check_totals(members, limits)
            written = 0
            for info, path in plan:
                destination = target.joinpath(*path.parts)
                if not destination.resolve().is_relative_to(target):
                    raise UserError(
                        f"The zip entry {info.filename!r} points outside the archive; re-create "
                        "the zip with paths inside one folder."
                    )
                if info.is_dir():
                    destination.mkdir(parents=True, exist_ok=True)
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                written = _copy_member(handle, info, destination, written, limits)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target


def _copy_member(
    handle: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    destination: Path,
    written: int,
    limits: ZipLimits,
) -> int:
    """Stream one member out, counting bytes against the member's header and the total cap."""
    member_bytes = 0
    try:
        with handle.open(info) as source, open(destination, "xb") as out:
            while chunk := source.read(CHUNK):
                member_bytes += len(chunk)
                written += len(chunk)
                if written > limits.max_total_bytes:
                    raise _too_big(limits)
                if member_bytes > info.file_size:
                    raise UserError(
                        f"The zip entry {info.filename!r} is larger than its header says; "
                        "the zip is damaged or crafted, re-create it."
                    )
                out.write(chunk)
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
        if isinstance(exc, FileExistsError):
            raise UserError(
                f"The zip entry {info.filename!r} collides with another entry; re-create the zip "
                "so each file appears once."
            ) from None
        raise UserError(
            f"The zip entry {info.filename!r} could not be read ({exc}); re-create the zip "
            "and upload it again."
        ) from None
    return written


@contextmanager
def extracted(
    archive: Path, limits: ZipLimits | None = None, parent: Path | None = None
) -> Iterator[Path]:
    """`extract_zip` as a context manager that always removes the folder."""
    folder = extract_zip(archive, limits, parent)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
