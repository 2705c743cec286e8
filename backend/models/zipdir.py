"""A zip's layout checked from raw bytes before `zipfile` is trusted with it.

`zipfile.ZipFile` parses the whole central directory on open, however many entries it holds, and
reads each member where the directory says it is, even when members overlap. So the entry count
comes from the end-of-central-directory record (and its ZIP64 twin) first, the directory is walked
with that count as a hard stop, and every member's bytes must lie apart from every other's and
before the directory. A hostile archive fails here in milliseconds, before anything is written.
"""

from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from backend.errors import UserError

EOCD = struct.Struct("<4s4H2LH")  # end of central directory, 22 bytes
LOCATOR = struct.Struct("<4sLQL")  # ZIP64 end-of-directory locator, 20 bytes
EOCD64 = struct.Struct("<4sQ2H2L4Q")  # ZIP64 end of central directory, 56 bytes
CENTRAL = struct.Struct("<4s6H3L5H2L")  # one central directory header, 46 bytes
LOCAL = struct.Struct("<4s5H3L2H")  # one local file header, 30 bytes
MAX_COMMENT = 0xFFFF
MAX_NAME = 4096  # PATH_MAX; longer names only serve to swell the directory zipfile reads whole
MAX_EXTRA = 4096  # extra field plus comment of one entry
REBUILD = "re-create the zip with a standard tool (zip, 7-Zip) and upload it again"


@dataclass(frozen=True)
class Directory:
    """Where the central directory is, as the end records state it and its walk confirmed."""

    entries: int
    start: int  # absolute offset of the first central header
    end: int  # absolute offset just past the last central header


def _damaged(what: str) -> UserError:
    return UserError(f"The zip is damaged or crafted: {what}; {REBUILD}.")


def _end_records(handle: BinaryIO, size: int) -> tuple[int, int, int, int]:
    """(entries, directory size, directory offset, directory end) from the end records."""
    tail_size = min(size, EOCD.size + MAX_COMMENT)
    handle.seek(size - tail_size)
    tail = handle.read(tail_size)
    at = tail.rfind(b"PK\x05\x06", 0, max(len(tail) - EOCD.size + 4, 0))
    if at < 0:
        raise UserError(
            "The upload is not a readable zip file (it has no end-of-directory record); "
            "re-create the zip and upload it again."
        )
    _sig, disk, cd_disk, on_disk, entries, cd_size, cd_offset, _comment = EOCD.unpack_from(tail, at)
    eocd_at = size - tail_size + at
    cd_end = eocd_at
    wants64 = 0xFFFF in (entries, on_disk) or 0xFFFFFFFF in (cd_size, cd_offset)
    locator_at = eocd_at - LOCATOR.size
    has_locator = locator_at >= 0 and tail[at - LOCATOR.size : at].startswith(b"PK\x06\x07")
    if has_locator:
        _sig, _disk64, record_offset, _disks = LOCATOR.unpack_from(tail, at - LOCATOR.size)
        record_at = locator_at - EOCD64.size
        if record_at < 0 or record_offset > record_at:
            raise _damaged("its ZIP64 locator points past the ZIP64 directory record")
        handle.seek(record_at)
        raw = handle.read(EOCD64.size)
        if len(raw) < EOCD64.size or not raw.startswith(b"PK\x06\x06"):
            raise _damaged("its ZIP64 directory record is missing where the locator says")
        record = EOCD64.unpack(raw)
        _sig, _rec, _made, _need, disk, cd_disk, on_disk, entries, cd_size, cd_offset = record
        cd_end = record_at
    elif wants64:
        raise _damaged("its end record asks for a ZIP64 record that is not there")
    if disk != 0 or cd_disk != 0 or on_disk != entries:
        raise UserError(
            "The zip is split over several disks (a multi-part archive); join the parts into "
            "one ordinary zip and upload that."
        )
    return entries, cd_size, cd_offset, cd_end


def read_directory(archive: Path, max_members: int) -> Directory:
    """Check the end records and walk the central directory, stopping past `max_members`."""
    with open(archive, "rb") as handle:
        return read_stream_directory(handle, Path(archive).stat().st_size, max_members)


def read_stream_directory(handle: BinaryIO, size: int, max_members: int) -> Directory:
    """read_directory of a seekable stream of `size` bytes (a zip inside a zip member), before
    zipfile builds an entry object per member of its directory."""
    entries, cd_size, cd_offset, cd_end = _end_records(handle, size)
    if entries > max_members:
        raise UserError(
            f"The zip holds {entries} entries, more than the limit of {max_members}; "
            "zip only the model files."
        )
    start = cd_end - cd_size  # any bytes before cd_offset were prepended (self-extractor)
    if start < 0 or cd_offset > start:
        raise _damaged(
            f"its directory claims {cd_size} bytes at offset {cd_offset}, past the {size}-byte file"
        )
    if entries * CENTRAL.size > cd_size:
        raise _damaged(f"its directory of {cd_size} bytes cannot hold {entries} entries")
    walked = _walk(handle, start, cd_end, max_members)
    if walked != entries:
        raise _damaged(f"its end record says {entries} entries but the directory holds {walked}")
    return Directory(entries=entries, start=start, end=cd_end)


def _walk(handle: BinaryIO, start: int, end: int, max_members: int) -> int:
    """Count central headers between start and end; more than max_members is refused at once."""
    handle.seek(start)
    position, count = start, 0
    while position < end:
        raw = handle.read(CENTRAL.size)
        if len(raw) < CENTRAL.size or not raw.startswith(b"PK\x01\x02"):
            raise _damaged(f"entry {count + 1} of its directory has no valid header")
        name_length, extra_length, comment_length = CENTRAL.unpack(raw)[10:13]
        if name_length > MAX_NAME or extra_length + comment_length > MAX_EXTRA:
            raise _damaged(
                f"entry {count + 1} of its directory has a {name_length}-byte name and "
                f"{extra_length + comment_length} bytes of extra fields (limits {MAX_NAME} "
                f"and {MAX_EXTRA})"
            )
        position += CENTRAL.size + name_length + extra_length + comment_length
        handle.seek(position)
        count += 1
        if count > max_members:
            raise UserError(
                f"The zip's directory holds more than {max_members} entries, the limit; "
                "zip only the model files."
            )
    if position != end:
        raise _damaged("its directory runs past where its end record begins")
    return count


def check_layout(archive: Path, members: list[zipfile.ZipInfo], directory: Directory) -> None:
    """Every member's header and data must lie apart from the others' and before the directory.

    Overlapping members let a small file unpack to many times its size (each entry's data is
    the next entry's header plus one shared deflate block), so overlap is refused outright.
    """
    previous: zipfile.ZipInfo | None = None
    previous_end = 0
    with open(archive, "rb") as handle:
        for info in sorted(members, key=lambda m: m.header_offset):
            handle.seek(info.header_offset)
            raw = handle.read(LOCAL.size)
            if len(raw) < LOCAL.size or not raw.startswith(b"PK\x03\x04"):
                raise _damaged(f"the entry {info.filename!r} has no local header where listed")
            fields = LOCAL.unpack(raw)
            data_end = info.header_offset + LOCAL.size + fields[9] + fields[10] + info.compress_size
            if previous is not None and info.header_offset < previous_end:
                raise UserError(
                    f"The zip entries {previous.filename!r} and {info.filename!r} overlap (one's "
                    "data contains the other), a trick used by zip bombs; re-create the zip "
                    "with a standard tool and upload it again."
                )
            if data_end > directory.start:
                raise _damaged(
                    f"the entry {info.filename!r} declares {info.compress_size} compressed bytes, "
                    "running into the directory"
                )
            previous, previous_end = info, data_end
