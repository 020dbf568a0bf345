"""A PEP 503 simple index of audited wheels, published atomically.

Layout of an index folder ``INDEX`` (serve ``INDEX/current`` with any static web server)::

    INDEX/current -> trees/<id>          a symlink, replaced by rename: the one atomic step
    INDEX/trees/<id>/simple/index.html   PEP 503 root: one link per project
    INDEX/trees/<id>/simple/<project>/index.html
                                         one link per wheel, ``#sha256=`` and
                                         ``data-requires-python`` where the wheel declares it
    INDEX/trees/<id>/torch-2.14.1+cu130.html
                                         a find-links page per torch+CUDA (PyG style)
    INDEX/trees/<id>/wheels/<wheel>      the wheel, its ``.metadata`` (PEP 658), its
                                         ``.audit.json`` (made here) and its
                                         ``.provenance.json`` (when the build wrote one)
    INDEX/trees/<id>/index.json          the manifest: every entry with its matrix cell key,
                                         and which wheels the publish added and kept

Publishing writes a whole new tree (earlier wheels hard-linked, not copied), then points
``current`` at it with one ``rename``: a reader sees the old index or the new one, never a mix.
The two newest trees are kept, so that a reader still inside the previous tree finishes.
Publishers take a lock (``INDEX/.lock``, ``matrix.layout``: the lock and every removal here).

Nothing gets in unaudited: every wheel is scanned and audited here, by archwheel's own audit,
against the arch list it was built for (given, or read from its provenance); a wheel the scan
could not read completely, or that lacks a requested image, is refused with the reason. A file
name already published is never given other bytes (pip caches by name and hash).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from archwheel.binary.coremetadata import parse_core_metadata
from archwheel.binary.scan.inputs import scan_path
from archwheel.binary.variantname import split_label
from archwheel.binary.wheelmeta import Pin, read_wheel_metadata
from archwheel.binary.zipread import open_zip
from archwheel.effects.files import (
    ZIP_MEMBER_ERRORS,
    open_regular,
    read_document,
    sha256_file,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)
from archwheel.errors import ArchwheelError, InputError, UsageError
from archwheel.facts.arch import ArchList
from archwheel.facts.versions import CudaVersion
from archwheel.matrix.entry import IndexEntry as IndexEntry  # noqa: PLC0414 - its record
from archwheel.matrix.entry import checked_versions
from archwheel.matrix.index_doc import INDEX_SCHEMA_VERSION, check_index_manifest
from archwheel.matrix.index_manifest import manifest_document
from archwheel.matrix.layout import CURRENT as CURRENT  # noqa: PLC0414 - the index's layout
from archwheel.matrix.layout import TREES as TREES  # noqa: PLC0414
from archwheel.matrix.layout import (
    collect,
    current_tree,
    locked,
    new_tree_name,
    remove_unfinished,
    swap,
    writing_into,
)
from archwheel.matrix.layout import simple_url as simple_url  # noqa: PLC0414
from archwheel.matrix.pages import WHEELS as WHEELS  # noqa: PLC0414 - the tree's layout
from archwheel.matrix.pages import (
    find_links_page,
    landing_page,
    project_page,
    simple_root_page,
)
from archwheel.verdicts.audit import AuditReport, audit, audit_document
from archwheel.verdicts.wheelname import name_version_disagreement

MANIFEST = "index.json"
AUDIT_SUFFIX = ".audit.json"
METADATA_SUFFIX = ".metadata"
PROVENANCE_SUFFIX = ".provenance.json"
METADATA_LIMIT = 4 << 20  # bytes of METADATA read at most
# Renders a tree's index.html from the written tree (its index.json and the audit JSON beside
# each wheel); the interfaces floor passes one with a chart, else ``landing_page`` is used.
Landing = Callable[[Path], str]
_LOCAL_CUDA = re.compile(r"(?:^|[._-]|pt[0-9]+)cu([0-9]{2,3})(?:$|[._-])")


@dataclass(frozen=True)
class Candidate:
    """A wheel offered for publishing, with what its builder knows about it."""

    wheel: Path
    provenance: Path | None = None  # <wheel>.provenance.json, published beside it
    expect: ArchList | None = None  # the arch list it was built for (else: the provenance's)
    cell_key: str | None = None  # the matrix cell that made it
    torch: str | None = None  # the torch version it was built against (else: its torch== pin)
    cuda: str | None = None  # the CUDA it was built with, "13.0" (else: read from the wheel)


@dataclass(frozen=True)
class Refusal:
    """A wheel that was not published, and why."""

    wheel: str
    reason: str

    def to_json_dict(self) -> dict[str, str]:
        """The refusal as ``publish --format json`` lists it."""
        return {"wheel": self.wheel, "reason": self.reason}


@dataclass(frozen=True)
class PublishResult:
    """What one publish did: the tree it made (None: nothing new), the entries it added and
    the wheels it refused, and the whole index afterwards."""

    index: Path
    tree: Path | None
    published: tuple[IndexEntry, ...]
    unchanged: tuple[IndexEntry, ...]  # offered again with the same bytes
    refused: tuple[Refusal, ...]
    entries: tuple[IndexEntry, ...]
    stale_removed: tuple[str, ...] = ()  # what publishes that did not finish left (trees/...)

    @property
    def ok(self) -> bool:
        """True when no wheel was refused: ``publish`` exits 0 only then."""
        return not self.refused

    def to_json_dict(self) -> dict[str, Any]:
        """The result as ``publish --format json`` prints it (the publish schema): what was added,
        kept and refused."""
        return {
            "schema_version": INDEX_SCHEMA_VERSION,
            "index": str(self.index),
            "tree": str(self.tree) if self.tree else None,
            "ok": self.ok,
            "published": [e.to_json_dict() for e in self.published],
            "unchanged": [e.to_json_dict() for e in self.unchanged],
            "refused": [r.to_json_dict() for r in self.refused],
            "entries": len(self.entries),
            "stale_removed": list(self.stale_removed),
        }


class TreeExtras(Protocol):
    """What another publish adds under the index's lock (``variants.VariantTree``): ``screen``
    keeps the candidates that may join the index as it is now and refuses the others,
    ``extras`` writes its files into each new tree (``old``: the previous tree, None: the
    first)."""

    def screen(
        self, index: Path, candidates: Sequence[Candidate]
    ) -> tuple[list[Candidate], list[Refusal]]:
        """Split ``candidates`` into those that may join the index as it is now and the refusals of
        the others."""

    def extras(self, tree: Path, old: Path | None, entries: Sequence[IndexEntry]) -> None:
        """Write the publish's own files into the new ``tree`` (``old``: the tree it replaces, None
        for the first)."""


@dataclass(frozen=True)
class _Examined:
    entry: IndexEntry
    candidate: Candidate
    audit_document: dict[str, Any]
    metadata: bytes  # served as <wheel>.metadata (PEP 658)


# -- reading --------------------------------------------------------------------------------------


def read_index(index: Path) -> tuple[IndexEntry, ...]:
    """The entries of the index's current tree (none when it has not been published yet, or
    its tree is gone); a ``current`` that is not archwheel's link is a ``UsageError``
    (``layout.current_tree``: it is never followed out of the index)."""
    tree = current_tree(index)
    if tree is None or not (tree / MANIFEST).exists():
        return ()
    return tuple(_manifest_entries(tree / MANIFEST))


MAX_MANIFEST_BYTES = 64 << 20  # an index manifest (index.json): 10000 entries are about 5 MB
MAX_MANIFEST_NESTING = 8  # lists and objects inside each other (an index manifest nests 3 deep)


def _manifest_entries(path: Path) -> list[IndexEntry]:
    """The entries of an index manifest, read bounded and checked (``InputError``, one line)."""
    document, _ = read_document(
        path, MAX_MANIFEST_BYTES, MAX_MANIFEST_NESTING, what="an archwheel index manifest"
    )
    if not isinstance(document, dict):
        raise InputError(f"{path}: not a readable archwheel index manifest: not a JSON object")
    check_index_manifest(document, path)  # its version and entry list, before any entry
    try:
        return [IndexEntry.from_json_dict(e) for e in document["entries"]]
    except ValueError as exc:  # an entry's field
        raise InputError(f"{path}: not a readable archwheel index manifest: {exc}") from None


# -- examining one wheel --------------------------------------------------------------------------


def _core_metadata(wheel: Path) -> bytes:
    """The wheel's ``.dist-info/METADATA`` bytes (bounded)."""
    with open_regular(wheel) as handle, open_zip(handle, wheel) as archive:
        names = [
            n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        if len(names) != 1:
            raise InputError(f"{wheel.name}: expected one .dist-info/METADATA, found {len(names)}")
        info = archive.getinfo(names[0])
        if info.file_size > METADATA_LIMIT:
            raise InputError(f"{wheel.name}: METADATA is larger than {METADATA_LIMIT} bytes")
        return archive.read(info)


def _requires_python(metadata: bytes) -> str | None:
    value = parse_core_metadata(metadata.decode("utf-8", errors="replace")).get("Requires-Python")
    return value.strip() if value and value.strip() else None


def _provenance_text(provenance: dict[str, Any], table: str, key: str) -> str | None:
    """``provenance[table][key]`` when it is a string; None when it is absent or not one."""
    section = provenance.get(table)
    value = section.get(key) if isinstance(section, dict) else None
    return value if isinstance(value, str) else None


def _served(provenance: dict[str, Any] | None, requires: Sequence[Pin]) -> tuple[str, ...]:
    """The torch releases a wheel serves: those its build's range check passed (provenance
    ``torch_range.passed``) that its ``Requires-Dist: torch`` admits (a wheel whose metadata
    was changed after its provenance serves only what both say). () without a range."""
    section = provenance.get("torch_range") if provenance is not None else None
    if not isinstance(section, dict):
        return ()
    passed = checked_versions(section.get("passed"), "passed")
    try:
        admitted = SpecifierSet(torch_requirement(requires))
    except InvalidSpecifier:
        return ()
    return tuple(v for v in passed if admitted.contains(v, prereleases=True))


def torch_requirement(requires: Sequence[Pin]) -> str:
    """What a wheel's ``Requires-Dist`` asks of torch, as one specifier set ("" for nothing):
    its unconditional torch requirements together."""
    specifiers = [p.specifier for p in requires if p.name == "torch" and not p.is_optional]
    return ",".join(s for s in specifiers if s)


MAX_PROVENANCE_BYTES = 16 << 20  # a provenance file (a build's is a few KB)
MAX_PROVENANCE_NESTING = 32  # lists and objects inside each other (a build's nests 4 deep)


def load_provenance(path: Path) -> dict[str, Any]:
    """A wheel's provenance JSON read within archwheel's bounds (size, nesting; an ``InputError``
    otherwise): it may come from a CI artifact, so it is untrusted."""
    document, _ = read_document(
        path, MAX_PROVENANCE_BYTES, MAX_PROVENANCE_NESTING, what="provenance JSON"
    )
    if not isinstance(document, dict):
        raise InputError(f"{path}: provenance is not a JSON object")
    return document


def _first_problem(report: AuditReport) -> str:
    for problem in report.inventory.problems:
        return f"{problem.member or report.inventory.source}: {problem.message}"
    return "the scan stopped early"


def _cuda_of(candidate: Candidate, version: str, meta_cuda: CudaVersion | None) -> str | None:
    if candidate.cuda:
        return str(CudaVersion.parse(candidate.cuda))
    if meta_cuda is not None:
        return str(meta_cuda)
    local = version.split("+", 1)[1] if "+" in version else ""
    m = _LOCAL_CUDA.search(local)
    return str(CudaVersion.parse("cu" + m.group(1))) if m else None


# What examining a wheel may meet: archwheel's own errors, and a member zipfile cannot read.
_NOT_EXAMINED: tuple[type[Exception], ...] = (ArchwheelError, *ZIP_MEMBER_ERRORS)


def examine(candidate: Candidate, now: str) -> _Examined | Refusal:
    """Audit one wheel and read what the index needs from it; a Refusal says why not."""
    wheel = candidate.wheel
    try:
        name, version, _build, _tags = parse_wheel_filename(split_label(wheel.name)[0])
    except InvalidWheelFilename as exc:
        return Refusal(wheel.name, f"not a wheel file name: {exc}")
    if not wheel.is_file():
        return Refusal(wheel.name, f"{wheel}: no such file")
    try:
        meta = read_wheel_metadata(wheel)
        metadata = _core_metadata(wheel)
        requires_python = _requires_python(metadata)
        provenance = load_provenance(candidate.provenance) if candidate.provenance else None
    except _NOT_EXAMINED as exc:
        return Refusal(wheel.name, exc.one_line() if isinstance(exc, ArchwheelError) else str(exc))
    disagreement = name_version_disagreement(meta.filename, meta.name, meta.version)
    if disagreement is not None:  # pip would find it by its name, then refuse it
        return Refusal(wheel.name, disagreement)
    digest = sha256_file(wheel)
    expect = candidate.expect
    if provenance is not None:
        # The provenance comes with the wheel (from a CI artifact, say): each value it holds
        # is checked for its type before it is believed.
        recorded = _provenance_text(provenance, "wheel", "sha256")
        if recorded is not None and recorded != digest:
            return Refusal(
                wheel.name,
                f"its provenance records sha256 {recorded[:12]}..., the file has "
                f"{digest[:12]}...: the provenance is of another build",
            )
        requested = _provenance_text(provenance, "arch", "requested")
        if expect is None and requested:
            try:
                expect = ArchList.parse(requested)
            except UsageError as exc:
                return Refusal(wheel.name, f"its provenance's arch list: {exc.one_line()}")
    report = audit(scan_path(wheel), expect)
    if not report.complete:
        return Refusal(
            wheel.name, f"the audit could not read it completely: {_first_problem(report)}"
        )
    if report.no_device_code:
        return Refusal(wheel.name, f"no library has device code, but {expect} was requested")
    if not report.ok:
        lacking = "; ".join(f"{v.library.path} lacks {' '.join(v.missing)}" for v in report.failing)
        return Refusal(wheel.name, f"the audit against {expect} failed: {lacking}")
    torch = candidate.torch
    if torch is None:
        torch = next((p.exact_version for p in meta.requires if p.name == "torch"), None)
    try:
        serves = _served(provenance, meta.requires)
    except ValueError as exc:
        return Refusal(wheel.name, f"its provenance's torch_range: {exc}")
    entry = IndexEntry(
        file=wheel.name,
        project=str(canonicalize_name(name)),
        version=str(version),
        sha256=digest,
        size=wheel.stat().st_size,
        requires_python=requires_python,
        metadata_sha256=hashlib.sha256(metadata).hexdigest(),
        torch=torch,
        cuda=_cuda_of(candidate, str(version), meta.cuda_runtime),
        expect=str(expect) if expect is not None else None,
        cell_key=candidate.cell_key,
        provenance=candidate.provenance is not None,
        published_at=now,
        serves=serves,
    )
    return _Examined(entry, candidate, audit_document([report]), metadata)


# -- publishing -----------------------------------------------------------------------------------


def _place(source: Path, target: Path, *, link: bool) -> None:
    if link:
        try:
            os.link(source, target)
            return
        except OSError:
            pass
    shutil.copyfile(source, target)


def _write_tree(tree: Path, old: Path | None, entries: Sequence[IndexEntry],
                new: Sequence[_Examined], landing: Landing | None) -> None:  # fmt: skip
    wheels = tree / WHEELS
    wheels.mkdir(parents=True)
    fresh = {x.entry.file for x in new}
    for entry in entries:
        if entry.file in fresh or old is None:
            continue
        for suffix in ("", METADATA_SUFFIX, AUDIT_SUFFIX, PROVENANCE_SUFFIX):
            source = old / WHEELS / (entry.file + suffix)
            if source.exists():
                _place(source, wheels / (entry.file + suffix), link=True)
    for item in new:
        _place(item.candidate.wheel, wheels / item.entry.file, link=False)
        if item.candidate.provenance is not None:
            _place(item.candidate.provenance, wheels / (item.entry.file + PROVENANCE_SUFFIX),
                   link=False)  # fmt: skip
        write_json_atomic(wheels / (item.entry.file + AUDIT_SUFFIX), item.audit_document)
        write_bytes_atomic(wheels / (item.entry.file + METADATA_SUFFIX), item.metadata)
    simple = tree / "simple"
    simple.mkdir()
    write_text_atomic(simple / "index.html", simple_root_page(entries))
    # Each page from its own entries (filtering all entries for each page was quadratic in
    # an index of many projects).
    by_project: dict[str, list[IndexEntry]] = {}
    by_page: dict[str, list[IndexEntry]] = {}
    for e in entries:
        by_project.setdefault(e.project, []).append(e)
        for page in e.find_links_pages:
            by_page.setdefault(page, []).append(e)
    for project in sorted(by_project):
        (simple / project).mkdir()
        write_text_atomic(
            simple / project / "index.html", project_page(project, by_project[project])
        )
    for page in sorted(by_page):
        write_text_atomic(tree / page, find_links_page(page, by_page[page]))
    write_json_atomic(tree / MANIFEST, manifest_document(entries, [x.entry for x in new], old))
    text = landing(tree) if landing is not None else landing_page(entries)
    write_text_atomic(tree / "index.html", text)


def publish(index: Path, candidates: Sequence[Candidate], *, landing: Landing | None = None,
            variants: TreeExtras | None = None) -> PublishResult:  # fmt: skip
    """Audit each candidate and publish those that pass, in one atomic step.

    ``landing`` renders the tree's ``index.html`` (default: a plain list of the pages). An
    index the system will not let grow (a full or read-only file system) is an
    ``OutputError`` naming the index, not a file inside it or the wheel being copied."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with writing_into(index):
        index.mkdir(parents=True, exist_ok=True)
        return _publish(index, candidates, landing, now, variants)


def _publish(index: Path, candidates: Sequence[Candidate], landing: Landing | None, now: str,
             variants: TreeExtras | None) -> PublishResult:  # fmt: skip
    with locked(index):
        stale = remove_unfinished(index)
        old_tree = current_tree(index)
        existing = {e.file: e for e in read_index(index)}
        accepted: list[_Examined] = []
        unchanged: list[IndexEntry] = []
        candidates, refused = variants.screen(index, candidates) if variants else (candidates, [])
        for candidate in candidates:
            result = examine(candidate, now)
            if isinstance(result, Refusal):
                refused.append(result)
                continue
            before = existing.get(result.entry.file)
            if before is not None and before.sha256 != result.entry.sha256:
                refused.append(
                    Refusal(
                        result.entry.file,
                        f"the index already holds {result.entry.file} with other bytes "
                        f"(sha256 {before.sha256[:12]}...): a published file never changes; "
                        "give the new build another version or build tag",
                    )
                )
            elif before is not None:
                unchanged.append(before)
            elif any(a.entry.file == result.entry.file for a in accepted):
                refused.append(Refusal(result.entry.file, "offered twice in one publish"))
            else:
                accepted.append(result)
        if not accepted:
            return PublishResult(index, None, (), tuple(unchanged), tuple(refused),
                                 tuple(existing.values()), stale)  # fmt: skip
        entries = [*existing.values(), *(a.entry for a in accepted)]
        (index / TREES).mkdir(exist_ok=True)
        tree = index / TREES / new_tree_name()
        try:
            _write_tree(tree, old_tree, entries, accepted, landing)
            if variants is not None:  # the variants' files, beside the pages
                variants.extras(tree, old_tree, entries)
            swap(index, tree)
        except BaseException:
            shutil.rmtree(tree, ignore_errors=True)
            raise
        collect(index, tree)
    return PublishResult(
        index,
        tree,
        tuple(a.entry for a in accepted),
        tuple(unchanged),
        tuple(refused),
        tuple(sorted(entries, key=lambda e: e.file)),
        stale,
    )


def _trees_under(folder: Path) -> list[Path]:
    """The index trees a folder holds: an index's current tree, a tree, or trees below it."""
    if (folder / CURRENT / MANIFEST).is_file():
        return [(folder / CURRENT).resolve()]
    if (folder / MANIFEST).is_file():
        return [folder]
    found = [
        p.parent
        for p in sorted(folder.rglob(MANIFEST))
        if (p.parent / WHEELS).is_dir() and len(p.relative_to(folder).parts) <= 5
    ]
    return [t for t in found if CURRENT not in t.relative_to(folder).parts]


def _expect_of(entry: IndexEntry, manifest: Path) -> ArchList | None:
    try:
        return ArchList.parse(entry.expect) if entry.expect else None
    except UsageError as exc:  # the manifest's, not the user's: an input error
        raise InputError(f"{manifest}: entry {entry.file}: {exc.one_line()}") from None


def candidates_from(folder: Path) -> list[Candidate]:
    """Every wheel of the archwheel index trees under ``folder`` (as CI jobs leave them), with
    what their manifest says (arch list, cell key, torch, CUDA); each is audited again when
    published. The same file with the same bytes in two trees is offered once."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder")
    trees = _trees_under(folder)
    if not trees:
        raise InputError(f"{folder}: holds no archwheel index (no {MANIFEST} beside a wheels/)")
    seen: set[tuple[str, str]] = set()
    candidates: list[Candidate] = []
    root = folder.resolve()
    for tree in trees:
        entries = _manifest_entries(tree / MANIFEST)
        for entry in entries:
            if (entry.file, entry.sha256) in seen:
                continue
            seen.add((entry.file, entry.sha256))
            wheel = tree / WHEELS / entry.file
            provenance = tree / WHEELS / (entry.file + PROVENANCE_SUFFIX)
            for path in (wheel, provenance):
                # The folder is a CI artifact: a link in it is not followed out of it (one to
                # a wheel elsewhere on this machine would publish that wheel).
                if (path.is_symlink() or path.exists()) and not path.resolve().is_relative_to(root):
                    raise InputError(
                        f"{tree / MANIFEST}: entry {entry.file}: {path} leads out of {folder} "
                        "(a link): not followed"
                    )
            candidates.append(
                Candidate(
                    wheel,
                    provenance if provenance.is_file() else None,
                    expect=_expect_of(entry, tree / MANIFEST),
                    cell_key=entry.cell_key,
                    torch=entry.torch,
                    cuda=entry.cuda,
                )
            )
    return candidates
