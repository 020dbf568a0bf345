"""Deployment manifests: record the wheels a team tested, then prove production runs those bytes.

``build_manifest`` turns what was read from each wheel (checksum, size, metadata, audit) into a
JSON document; ``load_manifest`` validates one; ``verify_files`` compares wheel files with it and
``verify_environment`` compares an installed Python environment with it (distribution versions,
``torch.version.cuda``, the ``nvidia-*`` pins, and the bytes of every native library against the
wheel's RECORD hashes). Every mismatch is listed; nothing stops at the first.

Everything here is pure: files are hashed and environments probed by the callers.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
from msgspec import Meta
from packaging.markers import InvalidMarker, Marker
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from archwheel.binary.model import InputInventory
from archwheel.binary.wheelmeta import WheelMetadata
from archwheel.errors import InputError
from archwheel.facts.arch import CodeKind, Target
from archwheel.facts.documents import Table, load_document
from archwheel.facts.typed import decode, missing_or_not
from archwheel.verdicts.document import document_header

MANIFEST_SCHEMA_VERSION = 1
MANIFEST_KIND = "archwheel-manifest"
VERIFY_SCHEMA_VERSION = 1
# Bounds on a manifest read from a file (docs/limits.md).
MAX_MANIFEST_BYTES = 16 << 20
MAX_NESTING = 32  # lists and objects inside each other (a real manifest nests 4 deep)
MAX_FILE_NAME = 255

_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_RECORD_HASH = re.compile(r"^sha256=[A-Za-z0-9_-]{43}\Z")


# -- building -----------------------------------------------------------------------------------


MAX_FILE_SIZE = (1 << 63) - 1  # the largest size a manifest may record (a file's st_size)


def _sorted_archs(names: set[str]) -> list[str]:
    def key(name: str) -> tuple[Target, str]:
        kind, target = Target.from_name(name)
        return target, kind.value

    return sorted(names, key=key)


def wheel_entry(
    file_name: str,
    sha256: str,
    size: int,
    metadata: WheelMetadata,
    inventory: InputInventory,
    *,
    native_libraries: Mapping[str, str],
) -> dict[str, Any]:
    """The manifest record of one wheel; ``native_libraries``: member -> the RECORD-form
    sha256 of its bytes (``wheelmeta.native_library_digests``), what ``verify --env`` checks
    the installed files against."""
    libraries = []
    all_sass: set[str] = set()
    all_ptx: set[str] = set()
    for lib in inventory.device_libraries:
        sass = {t.sm for t in lib.targets(CodeKind.SASS)}
        ptx = {t.compute for t in lib.targets(CodeKind.PTX)}
        all_sass |= sass
        all_ptx |= ptx
        libraries.append({"path": lib.path, "sass": _sorted_archs(sass), "ptx": _sorted_archs(ptx)})
    cuda = metadata.cuda_runtime
    return {
        "file": file_name,
        "sha256": sha256,
        "size": size,
        "name": metadata.name,
        "version": metadata.version,
        "tags": list(metadata.tags),
        "cuda": {
            "version": str(cuda) if cuda else None,
            "major": metadata.cuda_major,
            "source": metadata.cuda_source,
        },
        "requires_cuda": {
            pin.name: {"specifier": pin.specifier, "marker": pin.marker or None}
            for pin in metadata.cuda_pins
        },
        "cudnn": metadata.cudnn_version,
        "nccl": metadata.nccl_version,
        "native_libraries": dict(sorted(native_libraries.items())),
        "archs": {
            "sass": _sorted_archs(all_sass),
            "ptx": _sorted_archs(all_ptx),
            "libraries": libraries,
            "audit_complete": inventory.complete,
        },
    }


def build_manifest(wheels: Sequence[dict[str, Any]], facts_version: str) -> dict[str, Any]:
    """The manifest document listing ``wheels`` (one entry each); the same file name twice is an
    input error."""
    counts = Counter(w["file"] for w in wheels)
    duplicates = sorted(n for n, count in counts.items() if count > 1)
    if duplicates:
        raise InputError(f"the same wheel file name twice: {', '.join(duplicates)}")
    return {
        **document_header(MANIFEST_SCHEMA_VERSION, MANIFEST_KIND, facts_version=facts_version),
        "wheels": list(wheels),
    }


# -- loading ------------------------------------------------------------------------------------


# A manifest is written by archwheel: a field of the wrong type or missing is one message.
_Str = Annotated[str, missing_or_not("str")]
_Dict = Annotated[dict[str, Any], missing_or_not("dict")]
# manifest.schema.json: a size is a byte count (-1 was reported as a size mismatch)
_Size = Annotated[int, Meta(ge=0, le=MAX_FILE_SIZE), missing_or_not("int")]


class _WheelRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of a manifest's wheel record that verify reads (others are kept as written)."""

    file: _Str
    sha256: _Str
    size: _Size
    name: _Str
    version: _Str
    cuda: _Dict
    requires_cuda: _Dict
    native_libraries: _Dict


class _Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """A manifest's wheels (its header is checked before, in its own words)."""

    wheels: tuple[_WheelRecord, ...]


def load_manifest(text: str, origin: str) -> dict[str, Any]:
    """Parse and validate a manifest; ``InputError`` names the first bad key."""
    doc = load_document(text, origin=origin, nesting=MAX_NESTING, error=_not_a_manifest)
    return manifest_from_document(doc, origin)


def _not_a_manifest(message: str) -> InputError:
    return InputError(f"{message}: not a manifest")


def manifest_from_document(doc: object, origin: str) -> dict[str, Any]:
    """Validate a parsed manifest (``effects.files.read_document``); ``InputError`` names the first
    bad key."""
    if not isinstance(doc, dict) or doc.get("kind") != MANIFEST_KIND:
        raise InputError(f"{origin}: not an archwheel manifest (kind != {MANIFEST_KIND!r})")
    version = doc.get("schema_version")
    if isinstance(version, bool) or version != MANIFEST_SCHEMA_VERSION:  # true == 1 in Python
        raise InputError(
            f"{origin}: manifest schema_version {doc.get('schema_version')!r} is not "
            f"{MANIFEST_SCHEMA_VERSION}",
            hint="regenerate it with this archwheel, or verify with the archwheel that wrote it",
        )
    wheels = doc.get("wheels")
    if not isinstance(wheels, list) or not wheels:
        raise InputError(f"{origin}: 'wheels' must be a non-empty list")
    top = Table(doc, origin, InputError)
    decode(top, _Manifest)  # the types of each wheel's record (msgspec: facts/typed.py)
    for wheel in top.tables("wheels"):
        file = wheel.data["file"]
        if any(c in file for c in "/\\\0") or file in ("", ".", "..") or len(file) > MAX_FILE_NAME:
            raise wheel.fail("file", f"must be a bare file name, not {file[:MAX_FILE_NAME]!r}")
        if not _SHA256.match(wheel.data["sha256"]):
            raise wheel.fail("sha256", "not a hex sha256")
        for member, digest in wheel.data["native_libraries"].items():
            if not isinstance(digest, str) or not _RECORD_HASH.match(digest):
                raise wheel.fail("native_libraries", f"{member!r}: not a sha256= hash")
    return doc


# -- verifying ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    """One way the files or the environment differ from the manifest."""

    subject: str  # the wheel file or the distribution
    what: str  # "file", "size", "sha256", "version", "cuda", "requirement", "library", "import"
    expected: str | None
    found: str | None
    message: str

    def to_json_dict(self) -> dict[str, Any]:
        """One entry of the verify document's ``mismatches``."""
        return {
            "subject": self.subject,
            "what": self.what,
            "expected": self.expected,
            "found": self.found,
            "message": self.message,
        }


@dataclass(frozen=True)
class FileFacts:
    """What a caller measured of one wheel file."""

    path: str
    size: int
    sha256: str


def verify_files(
    manifest: Mapping[str, Any],
    found: Mapping[str, FileFacts | None],
    extra: Sequence[str] = (),
) -> list[Mismatch]:
    """Compare wheel files (by file name; None = not found) with the manifest."""
    mismatches: list[Mismatch] = []
    for wheel in manifest["wheels"]:
        name = wheel["file"]
        facts = found.get(name)
        if facts is None:
            mismatches.append(Mismatch(name, "file", name, None, f"{name}: not found"))
            continue
        if facts.size != wheel["size"]:
            mismatches.append(
                Mismatch(
                    name,
                    "size",
                    str(wheel["size"]),
                    str(facts.size),
                    f"{facts.path}: {facts.size} bytes, the manifest says {wheel['size']}",
                )
            )
        if facts.sha256 != wheel["sha256"]:
            mismatches.append(
                Mismatch(
                    name,
                    "sha256",
                    wheel["sha256"],
                    facts.sha256,
                    f"{facts.path}: sha256 {facts.sha256[:16]}..., the manifest says "
                    f"{wheel['sha256'][:16]}... (the file was changed or replaced)",
                )
            )
    mismatches.extend(
        Mismatch(name, "file", None, name, f"{name}: given but not in the manifest")
        for name in extra
    )
    return mismatches


@dataclass(frozen=True)
class InstalledEnvironment:
    """What a caller probed of a Python environment (see effects.host)."""

    python: str
    python_version: str | None
    distributions: Mapping[str, str]  # canonical name -> version
    native_files: Mapping[str, Mapping[str, str]]  # dist -> RECORD path -> absolute path
    torch_cuda: str | None
    torch_import_error: str | None


def verify_environment(
    manifest: Mapping[str, Any],
    env: InstalledEnvironment,
    hash_file: Callable[[str], str | None] | None = None,
) -> list[Mismatch]:
    """Compare an installed environment with the manifest.

    ``hash_file(path)`` returns the RECORD-style ``sha256=...`` of an installed file (None when
    it cannot be read); without it, native libraries are not compared.
    """
    mismatches: list[Mismatch] = []
    marker_env = {"extra": ""}
    if env.python_version:
        marker_env["python_version"] = ".".join(env.python_version.split(".")[:2])
        marker_env["python_full_version"] = env.python_version
    for wheel in manifest["wheels"]:
        dist = canonicalize_name(wheel["name"])
        installed = env.distributions.get(dist)
        if installed is None:
            mismatches.append(
                Mismatch(
                    dist,
                    "version",
                    wheel["version"],
                    None,
                    f"{dist} {wheel['version']} is not installed in {env.python}",
                )
            )
            continue
        if not _same_version(installed, wheel["version"]):
            mismatches.append(
                Mismatch(
                    dist,
                    "version",
                    wheel["version"],
                    installed,
                    f"{dist} {installed} is installed; the manifest says {wheel['version']}",
                )
            )
        cuda = wheel["cuda"].get("version")
        if dist == "torch":
            if env.torch_import_error:
                mismatches.append(
                    Mismatch(
                        dist,
                        "import",
                        None,
                        env.torch_import_error,
                        f"import torch fails: {env.torch_import_error}",
                    )
                )
            elif cuda and env.torch_cuda != cuda:
                mismatches.append(
                    Mismatch(
                        dist,
                        "cuda",
                        cuda,
                        env.torch_cuda,
                        f"torch.version.cuda is {env.torch_cuda}; the manifest says {cuda}",
                    )
                )
        for requirement, pin in wheel["requires_cuda"].items():
            mismatches.extend(_check_pin(dist, requirement, pin, env, marker_env))
        if hash_file is not None:
            mismatches.extend(_check_libraries(dist, wheel, env, hash_file))
    return mismatches


def _same_version(installed: str, expected: str) -> bool:
    try:
        return Version(installed) == Version(expected)
    except InvalidVersion:
        return installed == expected


def _check_pin(
    dist: str,
    requirement: str,
    pin: Mapping[str, Any],
    env: InstalledEnvironment,
    marker_env: dict[str, str],
) -> list[Mismatch]:
    marker = pin.get("marker")
    if marker:
        try:
            if not Marker(str(marker)).evaluate(marker_env):
                return []
        except InvalidMarker:
            pass
    name = canonicalize_name(requirement)
    specifier = str(pin.get("specifier") or "")
    installed = env.distributions.get(name)
    if installed is None:
        return [
            Mismatch(
                dist,
                "requirement",
                f"{name}{specifier}",
                None,
                f"{dist} requires {name}{specifier}, which is not installed",
            )
        ]
    try:
        ok = SpecifierSet(specifier).contains(installed, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        ok = True
    if ok:
        return []
    return [
        Mismatch(
            dist,
            "requirement",
            f"{name}{specifier}",
            installed,
            f"{name} {installed} is installed; {dist} was tested with {name}{specifier}",
        )
    ]


def _check_libraries(
    dist: str,
    wheel: Mapping[str, Any],
    env: InstalledEnvironment,
    hash_file: Callable[[str], str | None],
) -> list[Mismatch]:
    mismatches: list[Mismatch] = []
    installed = env.native_files.get(canonicalize_name(wheel["name"]), {})
    for member, digest in sorted(wheel["native_libraries"].items()):
        path = installed.get(member)
        if path is None:
            mismatches.append(
                Mismatch(
                    dist,
                    "library",
                    digest,
                    None,
                    f"{member} is not among the installed files of {dist}",
                )
            )
            continue
        actual = hash_file(path)
        if actual != digest:
            mismatches.append(
                Mismatch(
                    dist,
                    "library",
                    digest,
                    actual,
                    f"{path} differs from the tested wheel's {member}",
                )
            )
    return mismatches


@dataclass(frozen=True)
class VerifyReport:
    """``verify``: the manifest against the files (and the environment) found, one mismatch per
    difference."""

    manifest: str
    files_checked: tuple[str, ...]
    environment: str | None  # the interpreter checked with --env
    libraries_hashed: bool
    mismatches: tuple[Mismatch, ...]

    @property
    def ok(self) -> bool:
        """Everything checked matches the manifest."""
        return not self.mismatches

    @property
    def exit_code(self) -> int:
        """0 when everything matches, else 1."""
        return 0 if self.ok else 1

    def to_json_dict(self) -> dict[str, Any]:
        """The verify JSON document."""
        return {
            **document_header(VERIFY_SCHEMA_VERSION, "verify"),
            "manifest": self.manifest,
            "files_checked": list(self.files_checked),
            "environment": self.environment,
            "libraries_hashed": self.libraries_hashed,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "mismatches": [m.to_json_dict() for m in self.mismatches],
        }
