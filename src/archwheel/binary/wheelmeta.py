"""A wheel's own metadata, read straight from the zip: never extracted, never executed.

``read_wheel_metadata`` returns the name, version (with its ``+cu130`` local part), tags, the
``Requires-Dist`` lines (with the ``nvidia-*``/``cuda-*`` pins picked out), the RECORD hashes of its
native libraries, and every piece of evidence for the CUDA runtime the wheel targets:

1. the local version of ``METADATA``'s ``Version`` (``2.7.0+cu128``),
2. an exact pin of the runtime package (``cuda-toolkit==13.0.3``,
   ``nvidia-cuda-runtime-cu12==12.8.90``),
3. the package's ``version.py`` (``cuda = '13.0'``, ``__version__ = '2.14.1+cu130'``), read as
   text (PyPI's torch wheels carry no local version; this file does),
4. a bundled ``libcudart.so.X.Y`` (or ``.so.13``, which gives the major only),
5. the ``-cuXX`` suffix of other ``nvidia-*`` pins (major only).

The most precise evidence wins, in that order; disagreements are kept as warnings.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from archwheel.binary.coremetadata import parse_core_metadata
from archwheel.binary.variantname import split_label
from archwheel.binary.zipmember import MemberError, member_chunks
from archwheel.binary.zipread import Source, WheelReader, open_zip
from archwheel.effects import files
from archwheel.errors import InputError
from archwheel.facts.versions import CudaVersion

# Metadata files are small; a larger one is hostile or broken, and is not read past this.
MAX_METADATA_BYTES = 16 * 1024 * 1024
MAX_VERSION_PY_BYTES = 64 * 1024
MAX_REQUIREMENTS = 10_000  # Requires-Dist lines read from METADATA (torch 2.14.1: 30)
MAX_WARNINGS_SHOWN = 20  # lines of one kind of warning; the rest are counted on one more line

_LOCAL_CUDA = re.compile(r"(?:^|[.+])cu([0-9]{2,3})(?:$|[.])", re.IGNORECASE)
_CU_SUFFIX = re.compile(r"-cu([0-9]{2})$")
_CUDART = re.compile(
    r"(?:^|/)libcudart(?:\.[0-9a-f]{8})?\.so\.([0-9]{1,2})(?:\.([0-9]{1,2}))?(?:\.[0-9]+)*$"
)
_VERSION_PY_CUDA = re.compile(
    r"^cuda\s*(?::[^=]*)?=\s*['\"]([0-9]{1,2}\.[0-9]{1,2})['\"]", re.MULTILINE
)
_VERSION_PY_VERSION = re.compile(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)
_NATIVE_LIBRARY = re.compile(r"\.so(\.[0-9]+)*$")
# Packages whose exact pin names the CUDA runtime a wheel was built against.
_RUNTIME_PACKAGES = (
    "cuda-toolkit",
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu11",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu13",
)


@dataclass(frozen=True)
class Pin:
    """One ``Requires-Dist`` line, parsed."""

    name: str  # canonical name, e.g. "nvidia-cudnn-cu13"
    specifier: str  # "==9.24.0.43", "" when unpinned
    extras: tuple[str, ...] = ()
    marker: str = ""  # 'platform_system == "Linux"', "" when none

    @property
    def exact_version(self) -> str | None:
        """The version of an ``==X.Y.Z`` pin (not of ``==X.*`` or ranges)."""
        m = re.fullmatch(r"===?([0-9][0-9A-Za-z.+!_-]*)", self.specifier)
        return m.group(1) if m and "*" not in m.group(1) else None

    @property
    def is_optional(self) -> bool:
        """Only installed with an extra (``extra == "..."`` in its marker)."""
        return "extra" in self.marker

    def __str__(self) -> str:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        return f"{self.name}{extras}{self.specifier}"


@dataclass(frozen=True)
class CudaEvidence:
    """One piece of evidence for the CUDA runtime a wheel targets."""

    source: str  # "local version", "Requires-Dist", "version.py", "bundled libcudart", "pin suffix"
    detail: str  # what was read, e.g. "Version: 2.7.0+cu128"
    major: int
    minor: int | None  # None when the evidence gives the major only

    @property
    def version(self) -> CudaVersion | None:
        """The major.minor this evidence names; None when it gives the major only."""
        return CudaVersion(self.major, self.minor) if self.minor is not None else None

    def describe(self) -> str:
        """One line for the report: the version, where it was read and what was read."""
        what = f"{self.major}.{self.minor}" if self.minor is not None else f"{self.major}.x"
        return f"CUDA {what} from {self.source} ({self.detail})"


@dataclass(frozen=True)
class WheelMetadata:
    """What a wheel says about itself."""

    filename: str
    name: str  # canonical distribution name
    version: str  # as in METADATA, with its local part
    tags: tuple[str, ...]
    requires: tuple[Pin, ...]
    cuda_evidence: tuple[CudaEvidence, ...]
    native_library_hashes: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({})
    )  # member -> "sha256=<urlsafe b64>", from RECORD
    warnings: tuple[str, ...] = ()

    @property
    def local_version(self) -> str | None:
        """The part after ``+`` (``cu128`` in ``2.7.0+cu128``); None without one."""
        return self.version.split("+", 1)[1] if "+" in self.version else None

    @property
    def cuda_pins(self) -> tuple[Pin, ...]:
        """The ``nvidia-*`` and ``cuda-*`` requirements (CUDA libraries from PyPI)."""
        return tuple(
            p
            for p in self.requires
            if (p.name.startswith("nvidia-") or p.name.startswith("cuda-")) and not p.is_optional
        )

    @property
    def cuda_runtime(self) -> CudaVersion | None:
        """The CUDA runtime version (major.minor) from the most precise evidence."""
        for evidence in self.cuda_evidence:
            if evidence.version is not None:
                return evidence.version
        return None

    @property
    def cuda_major(self) -> int | None:
        """The CUDA major of the most precise evidence, for wheels that name no minor."""
        return self.cuda_evidence[0].major if self.cuda_evidence else None

    @property
    def cuda_source(self) -> str | None:
        """One line saying where the CUDA version came from."""
        for evidence in self.cuda_evidence:
            if evidence.version is not None:
                return evidence.describe()
        return self.cuda_evidence[0].describe() if self.cuda_evidence else None

    def pinned_version(self, prefix: str) -> str | None:
        """The exact pinned version of the first CUDA pin whose name starts with ``prefix``."""
        for pin in self.cuda_pins:
            if pin.name.startswith(prefix) and pin.exact_version:
                return pin.exact_version
        return None

    @property
    def cudnn_version(self) -> str | None:
        """The exact ``nvidia-cudnn*`` version the wheel pins, if it pins one."""
        return self.pinned_version("nvidia-cudnn")

    @property
    def nccl_version(self) -> str | None:
        """The exact ``nvidia-nccl*`` version the wheel pins, if it pins one."""
        return self.pinned_version("nvidia-nccl")


def read_wheel_metadata(path: Path, *, source: Source | None = None) -> WheelMetadata:
    """Read a wheel's metadata from its zip; raise ``InputError`` when it cannot be read. With
    ``source`` the zip is read from it (a file on a package index; ``path`` names it)."""
    try:
        if source is not None:
            with open_zip(source.reader(), path) as archive:
                return _read(path, archive)
        # Only a regular file is opened: a FIFO or a device would block or never end.
        with files.open_regular(path) as handle, open_zip(handle, path) as archive:
            return _read(path, archive)
    except InputError:
        raise
    except files.NotRegularFile as exc:
        why = "is a directory, not a wheel" if path.is_dir() else exc.strerror
        raise InputError(f"{path}: {why}") from None
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a wheel") from None
    except zipfile.BadZipFile as exc:
        raise InputError(f"{path}: not a readable wheel (zip): {exc}") from None
    except (OSError, EOFError, zipfile.LargeZipFile, ValueError) as exc:
        raise InputError(f"{path}: cannot read the wheel: {exc}") from None


@dataclass(frozen=True)
class NativeDigests:
    """The hashes of a wheel's native libraries taken from their bytes, not from RECORD."""

    hashes: Mapping[str, str]  # member -> sha256 in RECORD's form
    unreadable: tuple[tuple[str, str], ...] = ()  # (member, why): no hash taken


def native_library_digests(path: Path, known: Mapping[str, str] | None = None) -> NativeDigests:
    """The sha256 of every native library a wheel holds, from its bytes: inflated and checked
    as the scan reads them (declared size, CRC, bounds), in RECORD's form. RECORD is the
    builder's word; these are what an installer writes to disk.

    ``known``: member -> hex sha256 already taken (a scan's ``member_digests``, hashed as it
    inflated them); only the others are read here (a ``.so`` that is no ELF, say).
    """
    known = known or {}
    reader = WheelReader(path)
    hashes: dict[str, str] = {}
    unreadable: list[tuple[str, str]] = []
    with files.open_regular(path) as handle:
        for member in reader.members:
            if not _NATIVE_LIBRARY.search(member.name):
                continue
            if member.name in known:
                hashes[member.name] = files.record_form(known[member.name])
                continue
            digest = hashlib.sha256()
            try:
                chunks = member_chunks(
                    path, reader.archive_size, member, reader.max_member_bytes, handle=handle
                )
                for chunk in chunks:
                    digest.update(chunk)
            except MemberError as exc:
                unreadable.append((member.name, str(exc)))
                continue
            hashes[member.name] = files.record_form(digest.hexdigest())
    return NativeDigests(MappingProxyType(dict(sorted(hashes.items()))), tuple(unreadable))


def sha256_file(path: Path) -> str:
    """The hex sha256 of a wheel's bytes, streamed; ``InputError`` when it cannot be read."""
    try:
        return files.sha256_file(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


# -- internals ----------------------------------------------------------------------------------


def _read(path: Path, archive: zipfile.ZipFile) -> WheelMetadata:
    # packaging here, not at the top: an audit imports this module for MAX_METADATA_BYTES alone
    from packaging.utils import canonicalize_name

    warnings: list[str] = []
    names = archive.namelist()
    dist_info = _dist_info_dir(path, names)
    metadata_text = _read_text(archive, f"{dist_info}/METADATA", path, MAX_METADATA_BYTES)
    if metadata_text is None:
        raise InputError(f"{path}: no {dist_info}/METADATA", hint="is this a wheel?")
    headers = _parse_headers(metadata_text)
    name = canonicalize_name(_first(headers, "name") or "")
    version = _first(headers, "version") or ""
    if not name or not version:
        raise InputError(f"{path}: METADATA has no Name or Version")

    tags = _tags(path, archive, dist_info, warnings)
    requires = _requirements(headers.get("requires-dist", []), warnings)
    evidence = _cuda_evidence(
        archive, names=names, name=name, version=version, requires=requires, path=path
    )
    precise = {e.version for e in evidence if e.version is not None}
    if len(precise) > 1:
        listed = "; ".join(e.describe() for e in evidence if e.version is not None)
        warnings.append(f"conflicting CUDA versions: {listed}")
    hashes = _native_hashes(archive, dist_info, path, warnings)
    return WheelMetadata(
        filename=path.name,
        name=name,
        version=version,
        tags=tags,
        requires=requires,
        cuda_evidence=evidence,
        native_library_hashes=MappingProxyType(hashes),
        warnings=tuple(warnings),
    )


def _dist_info_dir(path: Path, names: list[str]) -> str:
    tops = sorted(
        {n.split("/", 1)[0] for n in names if n.count("/") == 1 and n.endswith("/METADATA")}
    )
    dist_infos = [t for t in tops if t.endswith(".dist-info")]
    if not dist_infos:
        raise InputError(f"{path}: no *.dist-info/METADATA inside", hint="is this a wheel?")
    if len(dist_infos) > 1:
        # Prefer the one matching the file name, as pip does.
        stem = path.name.split("-", 1)[0].lower()
        matching = [d for d in dist_infos if d.lower().startswith(stem + "-")]
        if len(matching) == 1:
            return matching[0]
        raise InputError(f"{path}: several .dist-info directories: {', '.join(dist_infos)}")
    return dist_infos[0]


def _read_text(archive: zipfile.ZipFile, member: str, path: Path, limit: int) -> str | None:
    try:
        info = archive.getinfo(member)
    except KeyError:
        return None
    if info.file_size > limit:
        raise InputError(
            f"{path}!{member}: declares {info.file_size} bytes, more than the {limit} allowed"
        )
    try:
        with archive.open(info) as handle:
            data = handle.read(limit + 1)
    except files.ZIP_MEMBER_ERRORS as exc:
        raise InputError(f"{path}!{member}: cannot read: {exc}") from None
    if len(data) > limit:
        raise InputError(f"{path}!{member}: larger than its declared size (zip bomb?)")
    return data.decode("utf-8", errors="replace")


def _parse_headers(text: str) -> dict[str, list[str]]:
    """Every field of a metadata file by its lower-case name, each value with its ends
    stripped (pip strips a ``Requires-Dist`` so), read as pip reads them
    (``coremetadata``: folded lines, whitespace-only continuation lines, repeated fields)."""
    return {
        key: [value.strip() for value in values]
        for key, values in parse_core_metadata(text).fields().items()
    }


def _first(headers: Mapping[str, list[str]], key: str) -> str | None:
    values = headers.get(key)
    return values[0] if values else None


def _tags(
    path: Path, archive: zipfile.ZipFile, dist_info: str, warnings: list[str]
) -> tuple[str, ...]:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    tags: set[str] = set()
    wheel_text = _read_text(archive, f"{dist_info}/WHEEL", path, MAX_METADATA_BYTES)
    if wheel_text is not None:
        tags.update(v for v in _parse_headers(wheel_text).get("tag", []) if v)
    try:
        tags.update(str(t) for t in parse_wheel_filename(split_label(path.name)[0])[3])
    except InvalidWheelFilename:
        warnings.append(f"file name {path.name!r} is not a valid wheel name; tags from WHEEL")
    return tuple(sorted(tags))


def _requirements(lines: list[str], warnings: list[str]) -> tuple[Pin, ...]:
    """The Requires-Dist pins, at most ``MAX_REQUIREMENTS``; the unparseable ones are warnings,
    the first ``MAX_WARNINGS_SHOWN`` of them each on a line, the rest counted."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    pins: list[Pin] = []
    if len(lines) > MAX_REQUIREMENTS:
        warnings.append(
            f"METADATA lists {len(lines)} Requires-Dist, above the limit of {MAX_REQUIREMENTS}: "
            "the rest are not read"
        )
        lines = lines[:MAX_REQUIREMENTS]
    unparseable = 0
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            unparseable += 1
            if unparseable <= MAX_WARNINGS_SHOWN:
                why = next(iter(str(exc).splitlines()), "")
                warnings.append(f"unparseable Requires-Dist {line[:200]!r}: {why}")
            continue
        pins.append(
            Pin(
                name=canonicalize_name(req.name),
                specifier=str(req.specifier),
                extras=tuple(sorted(req.extras)),
                marker=str(req.marker) if req.marker else "",
            )
        )
    if unparseable > MAX_WARNINGS_SHOWN:
        warnings.append(
            f"... and {unparseable - MAX_WARNINGS_SHOWN} more unparseable Requires-Dist"
        )
    return tuple(pins)


def _cuda_evidence(
    archive: zipfile.ZipFile,
    *,
    names: list[str],
    name: str,
    version: str,
    requires: tuple[Pin, ...],
    path: Path,
) -> tuple[CudaEvidence, ...]:
    found: list[CudaEvidence] = []
    local = version.split("+", 1)[1] if "+" in version else ""
    m = _LOCAL_CUDA.search(local)
    if m:
        cuda = CudaVersion.parse(f"cu{m.group(1)}")
        found.append(CudaEvidence("local version", f"Version: {version}", cuda.major, cuda.minor))

    for pin in requires:
        if pin.is_optional or pin.name not in _RUNTIME_PACKAGES or not pin.exact_version:
            continue
        parts = pin.exact_version.split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            found.append(CudaEvidence("Requires-Dist", str(pin), int(parts[0]), int(parts[1])))

    package_dir = name.replace("-", "_")
    version_py = _read_text(archive, f"{package_dir}/version.py", path, MAX_VERSION_PY_BYTES)
    if version_py is not None:
        m = _VERSION_PY_CUDA.search(version_py)
        if m:
            major, minor = (int(x) for x in m.group(1).split("."))
            found.append(
                CudaEvidence(
                    "version.py", f"{package_dir}/version.py: cuda = {m.group(1)!r}", major, minor
                )
            )
        else:
            mv = _VERSION_PY_VERSION.search(version_py)
            local_m = _LOCAL_CUDA.search(mv.group(1).partition("+")[2]) if mv else None
            if mv and local_m:
                cuda = CudaVersion.parse(f"cu{local_m.group(1)}")
                found.append(
                    CudaEvidence(
                        "version.py",
                        f"{package_dir}/version.py: {mv.group(1)}",
                        cuda.major,
                        cuda.minor,
                    )
                )

    for member in names:
        m = _CUDART.search(member)
        if m:
            cudart_minor = int(m.group(2)) if m.group(2) is not None else None
            found.append(CudaEvidence("bundled libcudart", member, int(m.group(1)), cudart_minor))

    for pin in requires:
        m = _CU_SUFFIX.search(pin.name)
        if m and pin.name.startswith("nvidia-") and not pin.is_optional:
            found.append(CudaEvidence("pin suffix", str(pin), int(m.group(1)), None))
            break
    return tuple(found)


def _native_hashes(
    archive: zipfile.ZipFile, dist_info: str, path: Path, warnings: list[str]
) -> dict[str, str]:
    """RECORD's hashes of the native libraries the wheel holds. Rows naming a file the wheel
    does not hold are not kept (a RECORD of 230000 invented rows made a manifest that verify
    could not read back); libraries missing from RECORD are counted in a warning."""
    record = _read_text(archive, f"{dist_info}/RECORD", path, MAX_METADATA_BYTES * 4)
    if record is None:
        warnings.append("no RECORD: native library hashes unknown")
        return {}
    held = {n for n in archive.namelist() if _NATIVE_LIBRARY.search(n)}
    hashes: dict[str, str] = {}
    absent: list[str] = []
    for row in csv.reader(io.StringIO(record)):
        if len(row) >= 2 and _NATIVE_LIBRARY.search(row[0]) and row[1].startswith("sha256="):
            if row[0] in held:
                hashes[row[0]] = row[1]
            else:
                absent.append(row[0])
    if absent:
        warnings.append(
            f"RECORD lists {len(absent)} native libraries the wheel does not hold (first: "
            f"{absent[0]}): not recorded"
        )
    unlisted = sorted(held - hashes.keys())
    if unlisted:
        warnings.append(
            f"{len(unlisted)} native libraries have no sha256 in RECORD (first: {unlisted[0]})"
        )
    return hashes
