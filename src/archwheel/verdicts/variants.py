"""Wheel variant properties (PEP 825 draft, NVIDIA provider) proven from a wheel's audit.

A variant wheel names the GPUs and drivers it serves in properties an installer matches against
the machine (uv's ``--preview-features wheel-variants`` with its NVIDIA provider). archwheel
derives them from what the audit found, never from what a build asked for:

- ``nvidia :: sm_arch``: each SASS target (``90_real``, ``90a_real``) and PTX target
  (``90_virtual``) present in **every** module (fatbin container) of every library with device
  code. The installer takes a wheel when the machine supports one value of the feature, so an
  arch one module lacks would send a GPU a wheel that fails with "no kernel image" there.
  Relocatable images (``__nv_relfatbin``, rule ``relocatable-link-only``) and LTO-IR never
  count; a library's raw cubins count only where it has no fatbin code (rule ``raw-cubin``).
- ``nvidia :: cuda_version_lower_bound``: the newest of what the code needs of the driver:
  ``X.0`` of the toolkit ``X.Y`` it was built with (rule ``runtime-driver``: a driver of the
  major's minor-version-compatibility branch serves it), the CUDA each PTX ISA version needs
  (rule ``ptx-isa-driver``), and ``X.0`` where fatbins are compressed (rule
  ``fatbin-compression``).
- a label, derived from the properties alone: ``sm`` and the SASS numbers joined by ``_``
  (``sm80``, ``sm90_120``), then ``_p`` and the PTX numbers (``sm80_p90``); at most
  ``MAX_LABEL`` characters of ``[0-9a-z_.]`` (the draft's first limit, which uv 0.13 keeps),
  else a shortened label ending in a digest of the properties.

Everything here judges values handed to it (an ``AuditReport``, a toolkit version, a parsed
``variant.json``): no I/O. docs/variants.md explains the choices and where they differ from
the draft.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archwheel.binary.model import Compression, LibraryInventory, VariantFile
from archwheel.errors import UsageError
from archwheel.facts.arch import CodeKind, Target
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.verdicts.compat.judge import split_modules

if TYPE_CHECKING:  # the audit imports this module for its variant.json check
    from archwheel.verdicts.audit import AuditReport

NAMESPACE = "nvidia"
SM_ARCH = "sm_arch"
LOWER_BOUND = "cuda_version_lower_bound"
# What uv 0.13.9 accepted (docs/variants.md): the schema URL, the provider without "enable-if".
SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json"
PROVIDER: Mapping[str, Any] = {
    "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin",
    "requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
}
VARIANT_JSON = "variant.json"  # in the wheel's .dist-info
MAX_LABEL = 16
LABEL_RE = re.compile(r"[0-9a-z_.]{1,%d}" % MAX_LABEL)  # noqa: UP031 - a regex quantifier
_VALUE_RE = re.compile(r"([0-9]{2,3}[af]?)_(real|virtual)")
_COMPRESSED = frozenset({Compression.LZ4, Compression.ZSTD, Compression.LEGACY})
_SUFFIX = {CodeKind.SASS: "real", CodeKind.PTX: "virtual"}


def arch_value(kind: CodeKind, target: Target) -> str:
    """The ``sm_arch`` value of an image: ``90_real``, ``90a_real``, ``120_virtual``."""
    return f"{target.number}_{_SUFFIX[kind]}"


@dataclass(frozen=True)
class VariantProperties:
    """One wheel's NVIDIA variant properties."""

    sm_arch: tuple[str, ...]  # SASS values first, then PTX, each by compute capability
    cuda_lower_bound: CudaVersion

    @property
    def label(self) -> str:
        """The label these properties get (the same properties, the same label)."""
        sass = [v.split("_")[0] for v in self.sm_arch if v.endswith("_real")]
        ptx = [v.split("_")[0] for v in self.sm_arch if v.endswith("_virtual")]
        label = "sm" + "_".join(sass) if sass else ""
        if ptx:
            label += ("_p" if label else "p") + "_".join(ptx)
        if len(label) <= MAX_LABEL:
            return label
        digest = hashlib.sha256(json.dumps(self.to_json_dict(), sort_keys=True).encode())
        return label[: MAX_LABEL - 9] + "_" + digest.hexdigest()[:8]

    def to_json_dict(self) -> dict[str, dict[str, list[str]]]:
        """The properties as ``variant.json`` writes them under the label."""
        return {NAMESPACE: {LOWER_BOUND: [str(self.cuda_lower_bound)], SM_ARCH: list(self.sm_arch)}}


@dataclass(frozen=True)
class Reason:
    """Why the lower bound is at least ``needs``: the rule and what in the wheel asks it."""

    needs: CudaVersion
    rule: str
    because: str

    def __str__(self) -> str:
        return f"{self.needs} ({self.rule}: {self.because})"


@dataclass(frozen=True)
class Derivation:
    """Properties derived from an audit, with the reasons of the lower bound."""

    properties: VariantProperties
    reasons: tuple[Reason, ...]

    @property
    def label(self) -> str:
        return self.properties.label


@dataclass(frozen=True)
class NoVariant:
    """A wheel that cannot be published as a variant, and why (one line)."""

    reason: str


def _serving_modules(library: LibraryInventory) -> list[frozenset[tuple[CodeKind, Target]]]:
    """The images of each module the runtime loads from ``library``: its loadable fatbin
    modules, or (only where it has none) its raw cubins."""
    modules, _ = split_modules(library)
    loadable = [m for m in modules if m.loadable and m.entries]
    chosen = [m for m in loadable if not m.raw] or loadable
    return [frozenset((e.kind, e.target) for e in m.entries if e.kind in _SUFFIX) for m in chosen]


def common_images(report: AuditReport) -> frozenset[tuple[CodeKind, Target]]:
    """The SASS and PTX images present in every serving module of every device library."""
    return images_in_every_module(v.library for v in report.libraries)


def images_in_every_module(
    libraries: Iterable[LibraryInventory],
) -> frozenset[tuple[CodeKind, Target]]:
    """The SASS and PTX images present in every serving module of ``libraries``."""
    found: frozenset[tuple[CodeKind, Target]] | None = None
    for library in libraries:
        for images in _serving_modules(library):
            found = images if found is None else found & images
    return found or frozenset()


def _sorted_values(images: Iterable[tuple[CodeKind, Target]]) -> tuple[str, ...]:
    order = sorted(images, key=lambda image: (image[0] is not CodeKind.SASS, image[1]))
    return tuple(arch_value(kind, target) for kind, target in order)


def lower_bound_reasons(
    libraries: Sequence[LibraryInventory], toolkit: CudaVersion | None, facts: CudaFacts
) -> tuple[list[Reason], str | None]:
    """What each rule asks of the driver for these libraries, and a refusal where a need
    cannot be known (compressed fatbins of an unknown toolkit, a PTX ISA the facts lack)."""
    reasons: list[Reason] = []
    if toolkit is not None:
        reasons.append(
            Reason(CudaVersion(toolkit.major, 0), "runtime-driver", f"built with CUDA {toolkit}")
        )
    entries = [e for lib in libraries for e in lib.entries]
    if any(e.compression in _COMPRESSED for e in entries):
        if toolkit is None:
            return reasons, (
                "its fatbins are compressed and the CUDA it was built with is unknown "
                "(rule fatbin-compression): give it (--cuda X.Y)"
            )
        reasons.append(
            Reason(CudaVersion(toolkit.major, 0), "fatbin-compression", "compressed fatbins")
        )
    for isa in sorted({e.ptx_isa for e in entries if e.ptx_isa is not None}):
        needed = facts.ptx_isa_min_cuda(isa)
        if needed is None:
            return reasons, f"its PTX has ISA {isa}, which the CUDA facts do not know"
        reasons.append(Reason(needed, "ptx-isa-driver", f"PTX ISA {isa}"))
    return reasons, None


def derive(
    report: AuditReport, toolkit: CudaVersion | None, facts: CudaFacts | None = None
) -> Derivation | NoVariant:
    """The variant properties the device code of an audited wheel proves, or why it has none:
    a scan that was not complete, an audit that failed, no device code, no image common to all
    its modules, or no way to bound the driver."""
    facts = facts or load_facts()
    if not report.complete:
        return NoVariant("the audit could not read it completely")
    if not report.ok:
        return NoVariant("its audit failed")
    if not report.libraries:
        return NoVariant("no library has device code: a variant would claim nothing")
    images = common_images(report)
    if not images:
        return NoVariant(
            "no SASS or PTX image is present in every module of its libraries "
            "(every GPU would miss a kernel image somewhere)"
        )
    reasons, refusal = lower_bound_reasons([v.library for v in report.libraries], toolkit, facts)
    if refusal is not None:
        return NoVariant(refusal)
    if not reasons:
        return NoVariant(
            "the CUDA it was built with is unknown and nothing in it bounds the driver: "
            "give it (--cuda X.Y)"
        )
    bound = max(r.needs for r in reasons)
    return Derivation(VariantProperties(_sorted_values(images), bound), tuple(reasons))


def duplicates(labelled: Sequence[tuple[str, VariantProperties]]) -> list[str]:
    """One line per wheel whose properties, or whose label, another wheel of the same list
    already has (``labelled``: wheel file and properties); an installer could not tell them
    apart."""
    seen: dict[str, tuple[str, VariantProperties]] = {}
    problems = []
    for wheel, props in labelled:
        other = seen.setdefault(props.label, (wheel, props))
        if other[0] == wheel:
            continue
        same = "the same variant properties" if other[1] == props else "the same label"
        problems.append(f"{wheel} and {other[0]} have {same} ({props.label}): publish one")
    return problems


# -- the JSON documents --------------------------------------------------------------------------


def variants_document(variants: Mapping[str, VariantProperties]) -> dict[str, Any]:
    """A ``variant.json`` (one label) or an index's ``{name}-{version}-variants.json`` (all):
    the shape uv 0.13.9 accepts, labels sorted, so the same variants give the same bytes."""
    return {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": [NAMESPACE]},
        "providers": {NAMESPACE: dict(PROVIDER)},
        "variants": {label: variants[label].to_json_dict() for label in sorted(variants)},
    }


def document_bytes(document: Mapping[str, Any]) -> bytes:
    """A variants document as bytes: sorted keys, two-space indent, a final newline."""
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


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


def unbacked(
    claims: Sequence[Claim], report: AuditReport, facts: CudaFacts | None = None
) -> list[str]:
    """One line per property a wheel's ``variant.json`` claims that its audited device code
    does not back (``unbacked_by`` on the report's libraries)."""
    return unbacked_by(claims, [v.library for v in report.libraries], facts)


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
