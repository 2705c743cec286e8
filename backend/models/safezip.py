"""Extraction of untrusted zip uploads: no escapes, no links, no bombs, no full disks.

The zip's layout is checked from raw bytes first (zipdir: entry count from the end record, no
overlapping members), then every member is checked before anything is written, and the bytes are
counted while they are written too, so a header that understates a member's size cannot get past
the caps. Nothing is created on disk until every check has passed.
"""

from __future__ import annotations

import os
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
from backend.models.zipdir import check_layout, read_directory

CHUNK = 1 << 20
MB = 1 << 20
RATIO_FLOOR_BYTES = 1 * MB  # members smaller than this are never judged by their ratio
FREE_DISK_RECHECK_BYTES = 64 * MB  # how often free disk space is looked at while writing


@dataclass(frozen=True)
class ZipLimits:
    """Caps on what one upload may unpack to; defaults read from settings when built."""

    max_members: int = field(default_factory=settings.MAX_ZIP_MEMBERS.get)
    max_total_bytes: int = field(default_factory=lambda: settings.MAX_UNCOMPRESSED_MB.get() * MB)
    max_ratio: float = field(default_factory=settings.MAX_COMPRESSION_RATIO.get)
    disk_quota_bytes: int = field(default_factory=lambda: settings.UPLOAD_DISK_QUOTA_MB.get() * MB)
    min_free_bytes: int = field(default_factory=lambda: settings.MIN_FREE_DISK_MB.get() * MB)

    def __post_init__(self) -> None:
        if self.max_members < 1 or self.max_total_bytes < 1 or self.max_ratio < 1:
            raise ValueError(f"zip limits must be positive: {self}")
        if self.disk_quota_bytes < 1 or self.min_free_bytes < 0:
            raise ValueError(f"zip disk limits must be positive: {self}")


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


def _check_totals(members: list[zipfile.ZipInfo], limits: ZipLimits) -> int:
    """The declared unpacked size, refused past the size cap or the overall ratio cap."""
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
    return declared


def _bytes_under(root: Path) -> int:
    """Bytes of the regular files below root (other uploads being unpacked right now)."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue  # removed while we looked
    return total


def _disk_budget(declared: int, limits: ZipLimits, quota_root: Path | None, disk: Path) -> int:
    """Bytes this extraction may write: within the scratch quota and above the free-disk floor.

    The quota covers every upload being unpacked under `quota_root` at once, so parallel uploads
    cannot together fill the disk that the database and artifact store live on.
    """
    in_use = _bytes_under(quota_root) if quota_root is not None and quota_root.is_dir() else 0
    budget = limits.disk_quota_bytes - in_use
    if declared > budget:
        raise UserError(
            f"The zip would unpack to {declared / MB:.1f} MB but only {max(budget, 0) / MB:.0f} MB "
            f"of the {limits.disk_quota_bytes / MB:.0f} MB upload disk quota is free; wait for "
            "other uploads to finish, upload a smaller model or raise "
            "OPTIBOARD_UPLOAD_DISK_QUOTA_MB."
        )
    _check_free_disk(disk, declared, limits)
    return budget


def _check_free_disk(where: Path, still_to_write: int, limits: ZipLimits) -> None:
    probe = next((p for p in (where, *where.parents) if p.exists()), Path(tempfile.gettempdir()))
    free = shutil.disk_usage(probe).free
    if free - still_to_write < limits.min_free_bytes:
        raise UserError(
            f"Unpacking the zip would leave less than {limits.min_free_bytes / MB:.0f} MB free "
            "on the data disk; free some disk space or lower OPTIBOARD_MIN_FREE_DISK_MB."
        )


def _plan(
    handle: zipfile.ZipFile, limits: ZipLimits
) -> list[tuple[zipfile.ZipInfo, PurePosixPath]]:
    """Every member checked (path, kind, ratio, duplicates); the files and folders to create."""
    plan: list[tuple[zipfile.ZipInfo, PurePosixPath]] = []
    seen: set[str] = set()
    for info in handle.infolist():
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
    return plan


def _open_checked(archive: Path, limits: ZipLimits) -> zipfile.ZipFile:
    """The archive opened only after its end records and directory passed the raw checks."""
    try:
        directory = read_directory(archive, limits.max_members)
        handle = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise UserError(
            f"The upload is not a readable zip file ({exc}); re-create the zip and upload it again."
        ) from None
    try:
        check_layout(archive, handle.infolist(), directory)
    except BaseException:
        handle.close()
        raise
    return handle


def extract_zip(
    archive: Path,
    limits: ZipLimits | None = None,
    parent: Path | None = None,
    quota_root: Path | None = None,
) -> Path:
    """Unpack `archive` into a new temp folder (under `parent`) and return it; caller removes it.

    `quota_root` is the folder whose contents count against the upload disk quota (default
    `parent`; with neither, only this zip counts); every check runs before the temp folder is
    created.
    """
    limits = limits or ZipLimits()
    with _open_checked(Path(archive), limits) as handle:
        plan = _plan(handle, limits)
        declared = _check_totals(handle.infolist(), limits)
        root = Path(quota_root or parent) if (quota_root or parent) else None
        disk = Path(parent or quota_root or tempfile.gettempdir())
        budget = min(_disk_budget(declared, limits, root, disk), limits.max_total_bytes)
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        target = Path(tempfile.mkdtemp(prefix="unzip-", dir=parent)).resolve()
        try:
            _write_all(handle, plan, target, _Budget(budget, declared, limits))
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
    return target


@dataclass
class _Budget:
    """Bytes written so far against what may be written, with periodic free-disk checks."""

    allowed: int
    declared: int
    limits: ZipLimits
    written: int = 0
    since_check: int = 0

    def take(self, count: int, where: Path) -> None:
        self.written += count
        self.since_check += count
        if self.written > self.allowed:
            raise UserError(
                f"The zip unpacks to more than {self.allowed / MB:.0f} MB, its size limit or disk "
                "quota; upload a smaller model or raise OPTIBOARD_MAX_UNCOMPRESSED_MB and "
                "OPTIBOARD_UPLOAD_DISK_QUOTA_MB."
            )
        if self.since_check >= FREE_DISK_RECHECK_BYTES:
            self.since_check = 0
            _check_free_disk(where, max(self.declared - self.written, 0), self.limits)


def _write_all(
    handle: zipfile.ZipFile,
    plan: list[tuple[zipfile.ZipInfo, PurePosixPath]],
    target: Path,
    budget: _Budget,
) -> None:
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
        _copy_member(handle, info, destination, budget)


def _copy_member(
    handle: zipfile.ZipFile, info: zipfile.ZipInfo, destination: Path, budget: _Budget
) -> None:
    """Stream one member out, counting bytes against the member's header and the budget."""
    member_bytes = 0
    try:
        with handle.open(info) as source, open(destination, "xb") as out:
            while chunk := source.read(CHUNK):
                member_bytes += len(chunk)
                if member_bytes > info.file_size:
                    raise UserError(
                        f"The zip entry {info.filename!r} is larger than its header says; "
                        "the zip is damaged or crafted, re-create it."
                    )
                budget.take(len(chunk), destination.parent)
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


@contextmanager
def extracted(
    archive: Path, limits: ZipLimits | None = None, parent: Path | None = None
) -> Iterator[Path]:
    """`extract_zip` as a context manager that always removes the folder (generate/variants)."""
    folder = extract_zip(archive, limits, parent)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def checked_zip(archive: Path, limits: ZipLimits | None = None) -> Iterator[zipfile.ZipFile]:
    """The archive opened for reading in place (a .pt2 is never unpacked): the raw layout checks
    and every member's checks (path, kind, ratio, duplicates, declared totals) have passed."""
    limits = limits or ZipLimits()
    with _open_checked(Path(archive), limits) as handle:
        _plan(handle, limits)
        _check_totals(handle.infolist(), limits)
        yield handle
