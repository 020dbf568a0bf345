"""One published wheel of an index (``IndexEntry``): the record its manifest (``index.json``)
holds and the pages link to, each field checked when read back.

Below ``index`` (which examines wheels and writes trees) and ``pages`` (which renders entries),
so that neither imports the other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, overload

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from archwheel.binary.variantname import split_label
from archwheel.errors import UsageError
from archwheel.facts.versions import CudaVersion


@dataclass(frozen=True)
class IndexEntry:
    """One published wheel."""

    file: str
    project: str  # canonical name
    version: str
    sha256: str
    size: int
    requires_python: str | None
    metadata_sha256: str | None  # of <wheel>.metadata, the wheel's METADATA (PEP 658)
    torch: str | None
    cuda: str | None  # "13.0"; None: no CUDA known (find-links page "+cpu")
    expect: str | None  # the arch list it was audited against; None: inventory only
    cell_key: str | None
    provenance: bool  # a .provenance.json lies beside it
    published_at: str
    # The torch releases one wheel serves (its build's range check: those that loaded it and
    # that its Requires-Dist admits); () for a wheel of one torch.
    serves: tuple[str, ...] = ()

    @property
    def find_links_page(self) -> str | None:
        """``torch-2.14.1+cu130.html``; None when no torch version is known."""
        if self.torch is None:
            return None
        return self._page_of(self.torch)

    @property
    def find_links_pages(self) -> tuple[str, ...]:
        """The find-links page of the torch it was built against and of each it serves."""
        own = self.find_links_page
        pages = [self._page_of(v) for v in self.serves]
        return tuple(dict.fromkeys([*([own] if own else []), *pages]))

    def _page_of(self, torch: str) -> str:
        tag = CudaVersion.parse(self.cuda).tag if self.cuda else "cpu"
        try:
            public = Version(torch).public  # a pin such as 2.14.1+cu130: its version
        except InvalidVersion:
            public = torch
        return f"torch-{public}+{tag}.html"

    def to_json_dict(self) -> dict[str, Any]:
        """The entry as the index manifest (``index.json``) and ``publish --format json`` write it;
        ``from_json_dict`` reads it back."""
        return {
            "file": self.file,
            "project": self.project,
            "version": self.version,
            "sha256": self.sha256,
            "size": self.size,
            "requires_python": self.requires_python,
            "metadata_sha256": self.metadata_sha256,
            "torch": self.torch,
            "cuda": self.cuda,
            "expect": self.expect,
            "cell_key": self.cell_key,
            "provenance": self.provenance,
            "published_at": self.published_at,
            "serves": list(self.serves),
        }

    @classmethod
    def from_json_dict(cls, data: object) -> IndexEntry:
        """An entry of an index manifest, each field checked (``ValueError`` naming the first
        that is wrong): manifests of CI artifacts come from anywhere, and ``file`` becomes a
        path, so it must be a wheel's file name and nothing else (not ``../../x.whl``)."""
        if not isinstance(data, dict):
            raise ValueError("an entry is not an object")
        file = _field(data, "file")
        if not _PLAIN_NAME.fullmatch(file) or file.startswith("."):
            raise ValueError(f"entry file {file[:80]!r} is not a wheel file name")
        try:
            name, version, _build, _tags = parse_wheel_filename(split_label(file)[0])
        except InvalidWheelFilename:
            raise ValueError(f"entry file {file[:80]!r} is not a wheel file name") from None
        sha256 = _field(data, "sha256")
        if not _SHA256.fullmatch(sha256):
            raise ValueError(f"entry {file}: sha256 is not 64 hex digits")
        # The project names a folder of the simple index and the version is the file's: each
        # must be what the file name says (a project '../../x' made a page outside the tree).
        project = _field(data, "project")
        if project != canonicalize_name(name):
            raise ValueError(f"entry {file}: project {project[:80]!r} is not the file's ({name})")
        if _field(data, "version") != str(version):
            raise ValueError(f"entry {file}: version is not the file's ({version})")
        metadata_sha256 = _field(data, "metadata_sha256", optional=True)
        if metadata_sha256 is not None and not _SHA256.fullmatch(metadata_sha256):
            # It goes into the pages' attributes as it is.
            raise ValueError(f"entry {file}: metadata_sha256 is not 64 hex digits")
        size = data.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < 1 << 63:
            raise ValueError(f"entry {file}: size is not a byte count")
        cuda = _field(data, "cuda", optional=True)
        torch = _field(data, "torch", optional=True)
        try:
            if cuda is not None:
                CudaVersion.parse(cuda)
            if torch is not None:
                Version(torch)
        except (UsageError, InvalidVersion) as exc:
            raise ValueError(f"entry {file}: {exc}") from None
        return cls(
            file=file,
            project=project,
            version=str(version),
            sha256=sha256,
            size=size,
            requires_python=_field(data, "requires_python", optional=True),
            metadata_sha256=metadata_sha256,
            torch=torch,
            cuda=cuda,
            expect=_field(data, "expect", optional=True),
            cell_key=_field(data, "cell_key", optional=True),
            provenance=bool(data.get("provenance")),
            published_at=_field(data, "published_at", optional=True) or "",
            serves=checked_versions(data.get("serves"), f"entry {file}: serves"),
        )


MAX_SERVES = 64  # torch releases one published wheel serves


def checked_versions(value: object, where: str) -> tuple[str, ...]:
    """A list of torch release versions (absent: none), each checked: it names find-links
    pages, so nothing but a version may come through."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_SERVES:
        raise ValueError(f"{where} is not a list of at most {MAX_SERVES} versions")
    found: list[str] = []
    for item in value:
        if not isinstance(item, str) or len(item) > 64:
            raise ValueError(f"{where}: {str(item)[:40]!r} is not a version")
        try:
            found.append(str(Version(item)))
        except InvalidVersion:
            raise ValueError(f"{where}: {item[:40]!r} is not a version") from None
    return tuple(found)


_PLAIN_NAME = re.compile(r"[A-Za-z0-9._+!-]{1,255}")  # a file name: no '/', no NUL
_SHA256 = re.compile(r"[0-9a-f]{64}")


@overload
def _field(data: dict[str, Any], key: str) -> str: ...
@overload
def _field(data: dict[str, Any], key: str, *, optional: bool) -> str | None: ...
def _field(data: dict[str, Any], key: str, *, optional: bool = False) -> str | None:
    """``data[key]``: a string (at most 4096 characters), or None where ``optional``."""
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > 4096:
        raise ValueError(f"entry field {key!r} is not a string")
    return value
