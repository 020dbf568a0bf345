"""Byte-for-byte reproducible wheels: a deterministic re-pack, and the comparison of two builds.

Build backends write zip archives with the current time, the file system's order and the
builder's umask. ``repack_wheel`` rewrites a wheel so that its bytes depend only on its
contents and ``SOURCE_DATE_EPOCH``: entries sorted (``.dist-info`` last, ``RECORD`` at the
very end, as the wheel spec recommends), every timestamp set to ``SOURCE_DATE_EPOCH`` (clamped
to 1980, the zip minimum), permissions 0644 or 0755 (from the executable bit), no extra fields,
DEFLATE at a fixed level, and ``RECORD`` regenerated. Member contents are never changed.

``compare_wheels`` names the members that differ between two builds (content, or only the zip
metadata), which is what ``--check-reproducible`` reports.
"""

from __future__ import annotations

import hashlib
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from archwheel.effects.files import record_form, sha256_file, sha256_stream
from archwheel.errors import BuildError, InputError

ZIP_EPOCH_MIN = 315532800
DEFLATE_LEVEL = 6
MAX_MEMBER_BYTES = 8 << 30
MAX_MEMBERS = 200_000


def _record_hash(data: bytes) -> str:
    return record_form(hashlib.sha256(data).hexdigest())


def _safe_name(name: str, wheel: Path) -> str:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\\" in name or "\0" in name:
        raise InputError(f"{wheel}: unsafe member name {name!r}")
    return name


def _order(name: str, dist_info: str | None) -> tuple[int, str]:
    if dist_info and name == f"{dist_info}/RECORD":
        return (2, name)
    if dist_info and name.startswith(dist_info + "/"):
        return (1, name)
    return (0, name)


def _dist_info(names: list[str]) -> str | None:
    candidates = sorted(
        {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    )
    return candidates[0] if len(candidates) == 1 else None


def repack_wheel(source: Path, target: Path, source_date_epoch: int) -> None:
    """Write a deterministic copy of wheel ``source`` to ``target``."""
    stamp = time.gmtime(max(ZIP_EPOCH_MIN, source_date_epoch))[:6]
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BuildError(f"the build produced an unreadable wheel {source.name}: {exc}") from None
    with archive:
        infos = [i for i in archive.infolist() if not i.is_dir()]
        if len(infos) > MAX_MEMBERS:
            raise BuildError(f"{source.name} has more than {MAX_MEMBERS} members")
        names = [_safe_name(i.filename, source) for i in infos]
        if len(set(names)) != len(names):
            raise BuildError(f"{source.name} holds duplicate member names")
        dist_info = _dist_info(names)
        if dist_info is None:
            raise BuildError(f"{source.name} has no single .dist-info folder; not a wheel")
        record_name = f"{dist_info}/RECORD"
        ordered = sorted(infos, key=lambda i: _order(i.filename, dist_info))
        records: list[str] = []
        with zipfile.ZipFile(target, "w") as out:
            for info in ordered:
                if info.filename == record_name:
                    continue
                if info.file_size > MAX_MEMBER_BYTES:
                    raise BuildError(f"{source.name}: member {info.filename} is implausibly large")
                data = archive.read(info)
                executable = bool((info.external_attr >> 16) & 0o111)
                _write(out, info.filename, data, executable, stamp)
                records.append(f"{info.filename},{_record_hash(data)},{len(data)}")
            records.append(f"{record_name},,")
            _write(out, record_name, ("\n".join(records) + "\n").encode(), False, stamp)


def _write(
    out: zipfile.ZipFile,
    name: str,
    data: bytes,
    executable: bool,
    stamp: tuple[int, int, int, int, int, int],
) -> None:
    info = zipfile.ZipInfo(name, date_time=stamp)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # Unix, so the permissions below are read
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    out.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=DEFLATE_LEVEL)


@dataclass(frozen=True)
class MemberDifference:
    """A member that differs between two builds of a wheel, and how (content, metadata, ...)."""

    name: str
    reason: str  # "content", "only in first", "only in second", "metadata"


@dataclass(frozen=True)
class WheelComparison:
    """Whether two builds of a wheel are byte-identical, and which members differ when not."""

    identical: bool
    first_sha256: str
    second_sha256: str
    differences: tuple[MemberDifference, ...]

    def summary(self) -> str:
        """One line: byte-identical with the sha256, or the first 20 differing members."""
        if self.identical:
            return f"byte-identical (sha256 {self.first_sha256})"
        names = ", ".join(f"{d.name} ({d.reason})" for d in self.differences[:20])
        more = f" and {len(self.differences) - 20} more" if len(self.differences) > 20 else ""
        return f"the two builds differ: {names or 'zip structure only'}{more}"

    def to_json_dict(self) -> dict[str, object]:
        """The comparison as ``.reproducibility.json`` and the provenance record it."""
        return {
            "identical": self.identical,
            "first_sha256": self.first_sha256,
            "second_sha256": self.second_sha256,
            "differences": [{"member": d.name, "reason": d.reason} for d in self.differences],
        }


def compare_wheels(first: Path, second: Path) -> WheelComparison:
    """Compare two wheels by sha256, then member by member (content before zip metadata).

    ``--check-reproducible`` uses it on the wheels of two builds of one plan.
    """
    a_sha, b_sha = sha256_file(first), sha256_file(second)
    if a_sha == b_sha:
        return WheelComparison(True, a_sha, b_sha, ())
    differences: list[MemberDifference] = []
    with zipfile.ZipFile(first) as a, zipfile.ZipFile(second) as b:
        a_infos = {i.filename: i for i in a.infolist()}
        b_infos = {i.filename: i for i in b.infolist()}
        for name in sorted(a_infos.keys() | b_infos.keys()):
            if name not in b_infos:
                differences.append(MemberDifference(name, "only in first"))
            elif name not in a_infos:
                differences.append(MemberDifference(name, "only in second"))
            elif _member_digest(a, name) != _member_digest(b, name):
                differences.append(MemberDifference(name, "content"))
            elif _meta(a_infos[name]) != _meta(b_infos[name]):
                differences.append(MemberDifference(name, "metadata"))
    return WheelComparison(False, a_sha, b_sha, tuple(differences))


def _member_digest(archive: zipfile.ZipFile, name: str) -> str:
    with archive.open(name) as handle:
        return sha256_stream(handle)


def _meta(info: zipfile.ZipInfo) -> tuple[object, ...]:
    return (info.date_time, info.external_attr, info.compress_type, info.extra, info.create_system)
