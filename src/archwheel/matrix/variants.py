"""Publish wheels as wheel variants (PEP 825 draft) into an archwheel index (``--variants``).

Each wheel is audited, its NVIDIA properties derived from the audit (``verdicts.variants``),
and a variant copy written (``variant_wheel``: label in the file name, ``variant.json`` in its
``.dist-info``); the copy goes through the index's own publish (audited again, atomically
swapped). What a publish adds to the tree beside the plain index:

    wheels/<name>-<version>-variants.json    every label of that version (linked from the
                                              project page and the find-links pages)
    wheels/<label>/<plain wheel>             the wheel as built, without a label, with its
                                              provenance: for installers without variants
    <find-links page stem>-<label>.html      one find-links page per arch list (label)
                                              linking that plain wheel (pip --find-links)

A wheel whose audit fails, that has no device code, whose properties another wheel of the same
file name already has, or whose label another version's wheel gives other properties, is
refused with one line. Wheels already published are never touched (their file names are
new ones, never given other bytes). docs/variants.md.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from archwheel.binary.scan.inputs import scan_path
from archwheel.binary.variantname import split_label
from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.effects.files import (
    ZIP_MEMBER_ERRORS,
    open_regular,
    read_document,
    sha256_file,
    write_bytes_atomic,
    write_text_atomic,
)
from archwheel.errors import ArchwheelError, UsageError
from archwheel.facts.arch import ArchList
from archwheel.facts.versions import CudaVersion, parse_or_none
from archwheel.matrix.index import (
    CURRENT,
    METADATA_SUFFIX,
    PROVENANCE_SUFFIX,
    Candidate,
    IndexEntry,
    Landing,
    PublishResult,
    Refusal,
    load_provenance,
    publish,
)
from archwheel.matrix.pages import WHEELS, link_page, variants_json_name
from archwheel.matrix.plan import MatrixPlan
from archwheel.matrix.run import Publisher
from archwheel.matrix.variant_wheel import write_variant_wheel
from archwheel.verdicts.audit import audit
from archwheel.verdicts.variants import (
    VARIANT_JSON,
    Derivation,
    NoVariant,
    VariantProperties,
    derive,
    document_bytes,
    duplicates,
    read_claims,
    variants_document,
)

MAX_VARIANT_JSON = 1 << 20  # a variant.json or variants.json read (one label: about 400 bytes)
_NOT_READ: tuple[type[Exception], ...] = (ArchwheelError, *ZIP_MEMBER_ERRORS)


def _toolkit(candidate: Candidate) -> tuple[CudaVersion | None, str]:
    """The CUDA a candidate was built with: ``--cuda`` (or its manifest's), else the toolkit its
    provenance records (archwheel's own build), else its METADATA's CUDA runtime requirement;
    with the hint a refusal gives when none of them says."""
    if candidate.cuda:
        return CudaVersion.parse(candidate.cuda), ""
    if candidate.provenance is not None:
        toolchain = load_provenance(candidate.provenance).get("toolchain")
        cuda = toolchain.get("cuda") if isinstance(toolchain, dict) else None
        found = parse_or_none(CudaVersion.parse, cuda)
        if found is not None:
            return found, ""
    runtime = read_wheel_metadata(candidate.wheel).cuda_runtime
    where = "its provenance names no toolkit" if candidate.provenance else "no provenance beside it"
    return runtime, f"{where}, no CUDA runtime in its METADATA: give it --cuda X.Y"


def _expect(candidate: Candidate) -> ArchList | None:
    if candidate.expect is not None or candidate.provenance is None:
        return candidate.expect
    arch = load_provenance(candidate.provenance).get("arch")
    requested = arch.get("requested") if isinstance(arch, dict) else None
    return ArchList.parse(requested) if isinstance(requested, str) and requested else None


def derive_candidate(candidate: Candidate) -> Derivation | NoVariant:
    """The variant properties a candidate's device code proves (its audit against the arch
    list it was built for), or why it cannot be a variant."""
    try:
        report = audit(scan_path(candidate.wheel), _expect(candidate))
        toolkit, unknown_hint = _toolkit(candidate)
        return derive(report, toolkit, unknown_hint=unknown_hint)
    except UsageError as exc:
        return NoVariant(exc.one_line())
    except _NOT_READ as exc:
        return NoVariant(exc.one_line() if isinstance(exc, ArchwheelError) else str(exc))


def _read_json_member(wheel: Path) -> object | None:
    """The parsed ``.dist-info/variant.json`` of a wheel; None when it has none."""
    with open_regular(wheel) as handle, zipfile.ZipFile(handle) as archive:
        names = [n for n in archive.namelist() if n.endswith(f".dist-info/{VARIANT_JSON}")]
        if len(names) != 1 or archive.getinfo(names[0]).file_size > MAX_VARIANT_JSON:
            return None
        document: object = json.loads(archive.read(names[0]))
        return document


def _properties(document: object) -> dict[str, VariantProperties]:
    claims, problem = read_claims(document)
    if problem is not None:
        return {}
    found = {}
    for claim in claims:
        if len(claim.lower_bounds) == 1:
            bound = CudaVersion.parse(claim.lower_bounds[0])
            found[claim.label] = VariantProperties(claim.sm_arch, bound)
    return found


def published_labels(index: Path) -> dict[str, dict[str, VariantProperties]]:
    """``{name}-{version}`` -> label -> properties, from the current tree's variants files."""
    found: dict[str, dict[str, VariantProperties]] = {}
    for path in sorted((index / CURRENT / WHEELS).glob("*-variants.json")):
        document, _ = read_document(path, MAX_VARIANT_JSON, 8, what="a variants file")
        found[path.name.removesuffix("-variants.json")] = _properties(document)
    return found


@dataclasses.dataclass(frozen=True)
class VariantTree:
    """What a variants publish does inside the index's own publish, under the index's lock
    (``index.publish(..., variants=...)``): ``screen`` refuses a variant whose label the index
    already publishes for its version with other properties (read under the lock, so two
    publishes at once cannot both give one label), ``extras`` writes the variants' files into
    each new tree (see the module's text). ``made``: variant file name -> the candidate of the
    plain wheel it was made from; ``properties``: variant file name -> its properties."""

    made: dict[str, Candidate]
    properties: dict[str, VariantProperties]

    def screen(
        self, index: Path, candidates: Sequence[Candidate]
    ) -> tuple[list[Candidate], list[Refusal]]:
        """The candidates that may join the index as it is now, and the refusals."""
        known = published_labels(index)
        kept: list[Candidate] = []
        refused: list[Refusal] = []
        for candidate in candidates:
            props = self.properties.get(candidate.wheel.name)
            problem = _published_conflict(candidate, props, known) if props else None
            if problem is None:
                kept.append(candidate)
            else:
                plain = self.made[candidate.wheel.name].wheel.name
                refused.append(Refusal(plain, problem))
        return kept, refused

    def extras(self, tree: Path, old: Path | None, entries: Sequence[IndexEntry]) -> None:
        """Write the variants files of ``tree`` (``old``: the previous tree, None: the first)."""
        wheels = tree / WHEELS
        versions: dict[str, dict[str, VariantProperties]] = {}
        pages: dict[str, list[IndexEntry]] = {}
        for entry in entries:
            plain, label = split_label(entry.file)
            if label is None:
                continue
            folder = wheels / label
            folder.mkdir(exist_ok=True)
            source = self.made.get(entry.file)
            for suffix in ("", PROVENANCE_SUFFIX):
                target = folder / (plain + suffix)
                if source is not None:
                    given = source.wheel if not suffix else source.provenance
                    if given is not None:
                        shutil.copyfile(given, target)
                elif old is not None and (old / WHEELS / label / (plain + suffix)).is_file():
                    _link_or_copy(old / WHEELS / label / (plain + suffix), target)
            metadata = wheels / (entry.file + METADATA_SUFFIX)  # the plain wheel's METADATA too
            if metadata.is_file() and not (folder / (plain + METADATA_SUFFIX)).exists():
                _link_or_copy(metadata, folder / (plain + METADATA_SUFFIX))
            name = variants_json_name(entry.file)
            assert name is not None
            props = _properties(_read_json_member(wheels / entry.file))
            versions.setdefault(name, {}).update(props)
            if (folder / plain).is_file():
                shown = dataclasses.replace(
                    entry,
                    file=plain,
                    sha256=sha256_file(folder / plain),
                    size=(folder / plain).stat().st_size,
                )
                for page in entry.find_links_pages or ("variant.html",):
                    key = f"{page.removesuffix('.html')}-{label}.html"
                    pages.setdefault(key, []).append(shown)
        for name, labels in versions.items():
            write_bytes_atomic(wheels / name, document_bytes(variants_document(labels)))
        for page, shown_entries in sorted(pages.items()):
            label = page.removesuffix(".html").rsplit("-", 1)[1]
            write_text_atomic(tree / page, link_page(page, shown_entries, f"{WHEELS}/{label}/"))


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        target.hardlink_to(source)
    except OSError:
        shutil.copyfile(source, target)


def publish_variants(
    index: Path,
    candidates: Sequence[Candidate],
    *,
    defaults: Sequence[Candidate] = (),
    landing: Landing | None = None,
) -> PublishResult:
    """Publish ``candidates`` as variants (and ``defaults`` as plain wheels) into ``index`` in
    one atomic step; a wheel that cannot be a variant is refused with its reason."""
    index.mkdir(parents=True, exist_ok=True)
    refused: list[Refusal] = []
    staging = Path(tempfile.mkdtemp(prefix=".variants-", dir=index))
    try:
        made: dict[str, Candidate] = {}
        properties: dict[str, VariantProperties] = {}
        offered: list[tuple[str, VariantProperties]] = []
        accepted: list[Candidate] = []
        for candidate in candidates:
            got = derive_candidate(candidate)
            if isinstance(got, NoVariant):
                refused.append(Refusal(candidate.wheel.name, f"not a variant: {got.reason}"))
                continue
            problem = _offered_twice(candidate, got.properties, offered)
            if problem is not None:
                refused.append(Refusal(candidate.wheel.name, problem))
                continue
            offered.append((candidate.wheel.name, got.properties))
            document = document_bytes(variants_document({got.label: got.properties}))
            variant = write_variant_wheel(candidate.wheel, got.label, document, staging)
            made[variant.name] = candidate
            properties[variant.name] = got.properties
            expect = _expect(candidate)
            accepted.append(
                dataclasses.replace(candidate, wheel=variant, provenance=None, expect=expect)
            )
        tree = VariantTree(made, properties)
        result = publish(index, [*accepted, *defaults], landing=landing, variants=tree)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dataclasses.replace(result, refused=(*refused, *result.refused))


def _offered_twice(
    candidate: Candidate,
    props: VariantProperties,
    offered: Sequence[tuple[str, VariantProperties]],
) -> str | None:
    """Why ``candidate`` cannot join this publish: another wheel of it with its file name has
    the same properties (or label)."""
    same_name = [(w, p) for w, p in offered if w == candidate.wheel.name]
    problems = duplicates([*same_name, (candidate.wheel.name + " (again)", props)])
    return problems[0] if problems else None


def _published_conflict(
    candidate: Candidate, props: VariantProperties, known: dict[str, dict[str, VariantProperties]]
) -> str | None:
    """Why ``candidate`` cannot join the index: a published label of its version has other
    properties (``known``: ``published_labels`` of the index, read under its lock)."""
    name, version = split_label(candidate.wheel.name)[0].split("-")[:2]
    published = known.get(f"{name}-{version}", {}).get(props.label)
    if published is not None and published != props:
        return (
            f"label {props.label} of {canonicalize_name(name)} {version} is published with "
            "other properties: give this build another version"
        )
    return None


def expected_properties(arch: str, cuda: str | None) -> VariantProperties | None:
    """What a cell of this arch list and toolkit is expected to prove once built (its SASS as
    ``_real``, its PTX as ``_virtual``; the lower bound ``X.0``, or ``X.Y`` with PTX, which
    carries the toolkit's PTX ISA): the plan's preview. The published wheel's properties are
    derived from its audit. None without a known toolkit."""
    if cuda is None:
        return None
    arch_list = ArchList.parse(arch)
    toolkit = CudaVersion.parse(cuda)
    sass = [f"{t.number}_real" for t in sorted(arch_list.sass_targets)]
    ptx = [f"{t.number}_virtual" for t in sorted(arch_list.ptx_targets)]
    bound = toolkit if ptx else CudaVersion(toolkit.major, 0)
    return VariantProperties((*sass, *ptx), bound)


def matrix_publisher(default_arch: str | None) -> Publisher:
    """``matrix --variants``: each cell's wheel published as a variant, but the wheel of the
    cell of ``default_arch`` plain (the wheel installers without variant support get)."""
    default = str(ArchList.parse(default_arch)) if default_arch else None

    def publish_cell(
        index: Path, candidates: list[Candidate], *, landing: Landing | None
    ) -> PublishResult:
        plain = [c for c in candidates if default and str(c.expect) == default]
        variant = [c for c in candidates if c not in plain]
        return publish_variants(index, variant, defaults=plain, landing=landing)

    return publish_cell


def variant_preview(plan: MatrixPlan, default_arch: str | None) -> list[dict[str, Any]]:
    """Each cell of a ``--variants`` plan with the label and properties it is expected to
    publish (proven by its audit when published), or "plain" for the default arch list; a
    skipped cell names the labels already published."""
    default = str(ArchList.parse(default_arch)) if default_arch else None
    rows: list[dict[str, Any]] = []
    for planned in plan.cells:
        recipe = plan.recipes.get(planned.cell.recipe)
        row: dict[str, Any] = {"cell": planned.cell.label, "action": planned.action.value}
        if planned.cell.arch == default:
            row.update(label=None, properties=None, plain=True)
        else:
            props = expected_properties(planned.cell.arch, recipe.cuda if recipe else None)
            row.update(
                label=props.label if props else None,
                properties=props.to_json_dict() if props else None,
                plain=False,
            )
        labels = [label for _, label in map(split_label, planned.existing) if label]
        row["published"] = labels
        rows.append(row)
    return rows
