"""A wheel's ``variant.json`` judged against its device code (the ``variant`` of ``audit``,
``can-run`` and ``doctor``).

An installer trusts a variant wheel's NVIDIA properties to pick it for a machine; a claim the
device code does not back sends a GPU or driver a wheel that does not run there. The audit, the
can-run report and the variant derivation (``verdicts.variants``) all use these judgements, so
they live here, below each of them. No I/O: a parsed document and inventories in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from archwheel.binary.model import LibraryInventory, VariantFile
from archwheel.errors import UsageError
from archwheel.facts.arch import CodeKind, Target
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.verdicts.compat.modules import split_modules

NAMESPACE = "nvidia"
SM_ARCH = "sm_arch"
LOWER_BOUND = "cuda_version_lower_bound"
_VALUE_RE = re.compile(r"([0-9]{2,3}[af]?)_(real|virtual)")
_SUFFIX = {CodeKind.SASS: "real", CodeKind.PTX: "virtual"}


def arch_value(kind: CodeKind, target: Target) -> str:
    """The ``sm_arch`` value of an image: ``90_real``, ``90a_real``, ``120_virtual``."""
    return f"{target.number}_{_SUFFIX[kind]}"


def _serving_modules(library: LibraryInventory) -> list[frozenset[tuple[CodeKind, Target]]]:
    """The images of each module the runtime loads from ``library``: its loadable fatbin
    modules, or (only where it has none) its raw cubins."""
    modules, _ = split_modules(library)
    loadable = [m for m in modules if m.loadable and m.entries]
    chosen = [m for m in loadable if not m.raw] or loadable
    return [frozenset((e.kind, e.target) for e in m.entries if e.kind in _SUFFIX) for m in chosen]


def images_in_every_module(
    libraries: Iterable[LibraryInventory],
) -> frozenset[tuple[CodeKind, Target]]:
    """The SASS and PTX images present in every serving module of ``libraries``."""
    found: frozenset[tuple[CodeKind, Target]] | None = None
    for library in libraries:
        for images in _serving_modules(library):
            found = images if found is None else found & images
    return found or frozenset()


@dataclass(frozen=True)
class Claim:
    """What a wheel's ``variant.json`` claims for one label (values as written)."""

    label: str
    sm_arch: tuple[str, ...]
    lower_bounds: tuple[str, ...]


def read_claims(document: object) -> tuple[list[Claim], str | None]:
    """The NVIDIA claims of a parsed ``variant.json`` (anyone's), and a problem with its shape
    (None when it is readable). Other namespaces are not archwheel's to judge."""
    if not isinstance(document, dict) or not isinstance(document.get("variants"), dict):
        return [], "variant.json has no 'variants' object"
    claims = []
    for label, namespaces in document["variants"].items():
        if not isinstance(label, str) or not isinstance(namespaces, dict):
            return [], "variant.json: a variant is not an object of namespaces"
        nvidia = namespaces.get(NAMESPACE, {})
        if not isinstance(nvidia, dict):
            return [], f"variant.json: {label}: '{NAMESPACE}' is not an object"
        values = {}
        for feature in (SM_ARCH, LOWER_BOUND):
            raw = nvidia.get(feature, [])
            if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
                return [], f"variant.json: {label}: {NAMESPACE} :: {feature} is not a list"
            values[feature] = tuple(raw)
        claims.append(Claim(label, values[SM_ARCH], values[LOWER_BOUND]))
    return claims, None


def _ptx_needs(libraries: Sequence[LibraryInventory], facts: CudaFacts) -> CudaVersion | None:
    """The newest CUDA the PTX ISA of ``libraries`` needs of the driver (rule
    ``ptx-isa-driver``); None: no PTX, or only ISA versions the facts do not know."""
    isas = {e.ptx_isa for lib in libraries for e in lib.entries if e.ptx_isa is not None}
    needs = [n for n in (facts.ptx_isa_min_cuda(isa) for isa in isas) if n is not None]
    return max(needs, default=None)


def unbacked_by(
    claims: Sequence[Claim],
    libraries: Sequence[LibraryInventory],
    facts: CudaFacts | None = None,
) -> list[str]:
    """One line per property a wheel's ``variant.json`` claims that the device code of
    ``libraries`` (those with device code) does not back: an ``sm_arch`` value some module
    lacks (or that names no image), and a ``cuda_version_lower_bound`` below what its PTX needs
    (rule ``ptx-isa-driver``). An installer trusts these properties to pick the wheel for a
    machine: each such line is a GPU or driver that would get a wheel that does not run."""
    facts = facts or load_facts()
    have = {arch_value(kind, target) for kind, target in images_in_every_module(libraries)}
    need = _ptx_needs(libraries, facts)
    problems = []
    for claim in claims:
        for value in claim.sm_arch:
            if not _VALUE_RE.fullmatch(value):
                problems.append(f"{claim.label}: sm_arch {value!r} names no image")
            elif value not in have:
                kind = "SASS" if value.endswith("_real") else "PTX"
                problems.append(
                    f"{claim.label}: sm_arch {value} without {kind} "
                    f"{'sm' if kind == 'SASS' else 'compute'}_{value.split('_')[0]} "
                    "in every module with device code"
                )
        for text in claim.lower_bounds:
            try:
                bound = CudaVersion.parse(text)
            except UsageError:
                problems.append(f"{claim.label}: cuda_version_lower_bound {text!r} is no version")
                continue
            if need is not None and bound < need:
                problems.append(
                    f"{claim.label}: cuda_version_lower_bound {bound} below the {need} its PTX "
                    "needs (rule ptx-isa-driver)"
                )
    return problems


@dataclass(frozen=True)
class ClaimsCheck:
    """A wheel's ``variant.json`` judged against its device code: the claims judged and one
    line per claim the code does not back (or the one reason the file cannot be judged)."""

    member: str
    label: str | None  # the label of the wheel's file name (None: no label, or installed)
    claims: tuple[Claim, ...]
    unbacked: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Every claim judged is backed by the device code."""
        return not self.unbacked

    def to_json_dict(self) -> dict[str, Any]:
        """The ``variant`` object of the audit, can-run and doctor documents."""
        return {
            "member": self.member,
            "label": self.label,
            "ok": self.ok,
            "claims": [
                {"label": c.label, SM_ARCH: list(c.sm_arch), LOWER_BOUND: list(c.lower_bounds)}
                for c in self.claims
            ],
            "unbacked": list(self.unbacked),
        }


def check_variant_file(
    found: VariantFile,
    libraries: Sequence[LibraryInventory],
    label: str | None = None,
    facts: CudaFacts | None = None,
) -> ClaimsCheck:
    """Judge a ``variant.json`` (archwheel's or anyone's) against the device code of
    ``libraries``. With ``label`` (the wheel's file name has one), only that label's claims are
    the wheel's, and a ``variant.json`` without it is itself a line; without, every label's."""
    if found.problem is not None:
        return ClaimsCheck(found.member, label, (), (f"variant.json: {found.problem}",))
    claims, problem = read_claims(found.document)
    if problem is not None:
        return ClaimsCheck(found.member, label, (), (problem,))
    judged = [c for c in claims if label is None or c.label == label]
    missing: list[str] = []
    if label is not None and not judged:
        written = ", ".join(sorted(c.label for c in claims)) or "none"
        missing.append(f"{label}: the file name's label is not in its variant.json ({written})")
    lines = missing + unbacked_by(judged, libraries, facts)
    return ClaimsCheck(found.member, label, tuple(judged), tuple(lines))
