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

from archwheel.binary.model import Compression, LibraryInventory
from archwheel.facts.arch import CodeKind, Target
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.verdicts.variant_claims import (
    LOWER_BOUND,
    NAMESPACE,
    SM_ARCH,
    Claim,
    arch_value,
    images_in_every_module,
    unbacked_by,
)

# The variant.json judgements live below the audit; named here too, where callers look for them.
from archwheel.verdicts.variant_claims import ClaimsCheck as ClaimsCheck  # noqa: PLC0414
from archwheel.verdicts.variant_claims import check_variant_file as check_variant_file  # noqa: PLC0414
from archwheel.verdicts.variant_claims import read_claims as read_claims  # noqa: PLC0414

if TYPE_CHECKING:
    from archwheel.verdicts.audit import AuditReport

# What uv 0.13.9 accepted (docs/variants.md): the schema URL, the provider without "enable-if".
SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json"
PROVIDER: Mapping[str, Any] = {
    "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin",
    "requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
}
VARIANT_JSON = "variant.json"  # in the wheel's .dist-info
MAX_LABEL = 16
LABEL_RE = re.compile(r"[0-9a-z_.]{1,%d}" % MAX_LABEL)  # noqa: UP031 - a regex quantifier
_COMPRESSED = frozenset({Compression.LZ4, Compression.ZSTD, Compression.LEGACY})


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
        """The label of the derived properties."""
        return self.properties.label


@dataclass(frozen=True)
class NoVariant:
    """A wheel that cannot be published as a variant, and why (one line)."""

    reason: str


def common_images(report: AuditReport) -> frozenset[tuple[CodeKind, Target]]:
    """The SASS and PTX images present in every serving module of every device library."""
    return images_in_every_module(v.library for v in report.libraries)


def _sorted_values(images: Iterable[tuple[CodeKind, Target]]) -> tuple[str, ...]:
    order = sorted(images, key=lambda image: (image[0] is not CodeKind.SASS, image[1]))
    return tuple(arch_value(kind, target) for kind, target in order)


UNKNOWN_TOOLKIT_HINT = "give it (--cuda X.Y)"


def lower_bound_reasons(
    libraries: Sequence[LibraryInventory],
    toolkit: CudaVersion | None,
    facts: CudaFacts,
    unknown_hint: str = UNKNOWN_TOOLKIT_HINT,
) -> tuple[list[Reason], str | None]:
    """What each rule asks of the driver for these libraries, and a refusal where a need
    cannot be known (compressed fatbins of an unknown toolkit, a PTX ISA the facts lack);
    ``unknown_hint`` ends a refusal for want of the toolkit (where else it was looked for)."""
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
                f"(rule fatbin-compression): {unknown_hint}"
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
    report: AuditReport,
    toolkit: CudaVersion | None,
    facts: CudaFacts | None = None,
    unknown_hint: str = UNKNOWN_TOOLKIT_HINT,
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
    libraries = [v.library for v in report.libraries]
    reasons, refusal = lower_bound_reasons(libraries, toolkit, facts, unknown_hint)
    if refusal is not None:
        return NoVariant(refusal)
    if not reasons:
        return NoVariant(
            f"the CUDA it was built with is unknown and nothing in it bounds the driver: "
            f"{unknown_hint}"
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


def unbacked(
    claims: Sequence[Claim], report: AuditReport, facts: CudaFacts | None = None
) -> list[str]:
    """One line per property a wheel's ``variant.json`` claims that its audited device code
    does not back (``unbacked_by`` on the report's libraries)."""
    return unbacked_by(claims, [v.library for v in report.libraries], facts)
