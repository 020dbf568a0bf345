"""Compilation targets and arch lists: one model for every spelling users write.

A ``Target`` is a compute capability plus an optional variant (``a`` arch-specific, ``f``
family-specific). A ``CodeKind`` says what a binary carries for it: SASS (a cubin), PTX, or
LTO-IR. An ``ArchList`` is what a user asks for: per target, SASS and/or PTX.

``ArchList.parse`` accepts PyTorch's ``TORCH_CUDA_ARCH_LIST`` syntax (``8.0;9.0 12.0+PTX``,
``9.0a``, names such as ``Ampere``) and the other forms in circulation (``10.0f``, ``sm_90``,
``sm_100a``, ``compute_90``, ``90``, CMake's ``90-real``/``90-virtual``, comma lists). It renders
``TORCH_CUDA_ARCH_LIST``, ``CMAKE_CUDA_ARCHITECTURES`` and nvcc ``-gencode`` flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from archwheel.errors import ArchListError
from archwheel.facts.versions import ComputeCapability

if TYPE_CHECKING:
    from archwheel.facts.catalog import CudaFacts, Toolkit


def load_facts() -> CudaFacts:
    """``catalog.load_facts``, imported on first use: the model of targets is imported by
    every scan (``binary.model``), the facts file's reader (TOML, resources) only by what
    parses an arch list or judges one."""
    from archwheel.facts.catalog import load_facts as load

    return load()


VALID_FORMS = (
    "8.0, 9.0a, 10.0f, 12.0+PTX, sm_90, sm_100a, compute_90, 90, 90-real, 90-virtual, "
    "or a name (Turing, Ampere, Ada, Hopper, Blackwell)"
)


class Variant(str, Enum):
    """How far a target's code may travel: plain, arch-specific (a), family-specific (f)."""

    PLAIN = ""
    ARCH_SPECIFIC = "a"
    FAMILY_SPECIFIC = "f"


class CodeKind(str, Enum):
    """What a fatbin entry carries."""

    SASS = "sass"
    PTX = "ptx"
    LTOIR = "ltoir"


@dataclass(frozen=True, order=True)
class Target:
    """A compute capability with its variant: 9.0, 9.0a, 10.0f."""

    cc: ComputeCapability
    variant: Variant = Variant.PLAIN

    @property
    def number(self) -> str:
        """``90a``: the SM number with its suffix."""
        return f"{self.cc.number}{self.variant.value}"

    @property
    def dotted(self) -> str:
        """``9.0a``: the TORCH_CUDA_ARCH_LIST spelling."""
        return f"{self.cc}{self.variant.value}"

    def name(self, kind: CodeKind) -> str:
        """``sm_90a`` for SASS, ``compute_90a`` for PTX, ``lto_90a`` for LTO-IR."""
        prefix = {CodeKind.SASS: "sm", CodeKind.PTX: "compute", CodeKind.LTOIR: "lto"}[kind]
        return f"{prefix}_{self.number}"

    @property
    def sm(self) -> str:
        """``sm_90a``: the SASS name, as nvcc's ``code=`` and the audit write it."""
        return self.name(CodeKind.SASS)

    @property
    def compute(self) -> str:
        """``compute_90a``: the PTX name, as nvcc's ``arch=`` and the audit write it."""
        return self.name(CodeKind.PTX)

    def __str__(self) -> str:
        return self.dotted

    @classmethod
    def from_name(cls, name: str) -> tuple[CodeKind, Target]:
        """Parse an image name as the audit prints it: ``sm_90a``, ``compute_120``, ``lto_90``."""
        m = re.fullmatch(r"(sm|compute|lto)_([0-9]{2,3})([af]?)", name.strip())
        if not m:
            raise ArchListError(f"invalid image arch name {name!r}", hint="expected e.g. sm_90a")
        kind = {"sm": CodeKind.SASS, "compute": CodeKind.PTX, "lto": CodeKind.LTOIR}[m.group(1)]
        return kind, cls(ComputeCapability.from_number(int(m.group(2))), Variant(m.group(3)))


@dataclass(frozen=True, order=True)
class ArchSpec:
    """One requested target: SASS for it, PTX for it, or both."""

    target: Target
    sass: bool = True
    ptx: bool = False

    def render(self) -> str:
        """The canonical spelling: ``8.0``, ``9.0+PTX``, ``10.0f``, ``compute_90`` (PTX only)."""
        if not self.sass:
            return self.target.compute
        return self.target.dotted + ("+PTX" if self.ptx else "")


_DOTTED = re.compile(r"^([0-9]{1,2})\.([0-9]{1,2})([af]?)(\+ptx)?\Z", re.IGNORECASE)
_PREFIXED = re.compile(r"^(sm|compute)_([0-9]{1,3})([af]?)\Z", re.IGNORECASE)
_NUMBER = re.compile(r"^([0-9]{1,3})([af]?)(?:-(real|virtual))?\Z", re.IGNORECASE)
_SEPARATORS = re.compile(r"[;,\s]")


@dataclass(frozen=True)
class ArchList:
    """A normalized, sorted, duplicate-free list of requested targets."""

    specs: tuple[ArchSpec, ...]

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str, facts: CudaFacts | None = None) -> ArchList:
        """Parse any supported spelling; raise ``ArchListError`` naming the bad token."""
        facts = facts or load_facts()
        raw = text.strip()
        if not raw:
            raise ArchListError("empty arch list", hint=f"valid forms: {VALID_FORMS}")
        tokens = _split(raw)
        specs: list[ArchSpec] = []
        for position, token in enumerate(tokens, start=1):
            if not token:
                raise ArchListError(
                    f"empty item at position {position} in arch list {raw!r}",
                    hint="remove the doubled or trailing separator",
                )
            specs.extend(_parse_token(token, raw, facts))
        return cls.of(specs)

    @classmethod
    def of(cls, specs: Iterable[ArchSpec]) -> ArchList:
        """Merge duplicates (8.0 and 8.0+PTX become 8.0+PTX) and sort."""
        merged: dict[Target, ArchSpec] = {}
        for spec in specs:
            old = merged.get(spec.target)
            if old is None:
                merged[spec.target] = spec
            else:
                merged[spec.target] = ArchSpec(
                    spec.target, sass=old.sass or spec.sass, ptx=old.ptx or spec.ptx
                )
        return cls(tuple(sorted(merged.values())))

    # -- queries --------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[ArchSpec]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    @property
    def sass_targets(self) -> frozenset[Target]:
        """The targets the list asks SASS for."""
        return frozenset(s.target for s in self.specs if s.sass)

    @property
    def ptx_targets(self) -> frozenset[Target]:
        """The targets the list asks PTX for."""
        return frozenset(s.target for s in self.specs if s.ptx)

    # -- rendering ------------------------------------------------------------------------------
    def __str__(self) -> str:
        return ";".join(s.render() for s in self.specs)

    def to_torch(self) -> str:
        """``TORCH_CUDA_ARCH_LIST``: ``8.0;9.0a;12.0+PTX``.

        PyTorch cannot express PTX without SASS, nor 'f' targets, nor 'a' PTX; those raise.
        """
        parts: list[str] = []
        for s in self.specs:
            if s.target.variant is Variant.FAMILY_SPECIFIC:
                raise ArchListError(
                    f"TORCH_CUDA_ARCH_LIST does not accept family-specific targets ({s.render()})",
                    hint="use CMAKE_CUDA_ARCHITECTURES or -gencode flags, or the plain target",
                )
            if not s.sass:
                raise ArchListError(
                    f"TORCH_CUDA_ARCH_LIST cannot express PTX without SASS ({s.render()})",
                    hint=f"use {s.target.dotted}+PTX",
                )
            parts.append(s.render())
        return ";".join(parts)

    def to_cmake(self) -> str:
        """``CMAKE_CUDA_ARCHITECTURES``: ``80-real;90`` (``90`` = SASS and PTX)."""
        parts: list[str] = []
        for s in self.specs:
            n = s.target.number
            if s.sass and s.ptx:
                parts.append(n)
            elif s.sass:
                parts.append(f"{n}-real")
            else:
                parts.append(f"{n}-virtual")
        return ";".join(parts)

    def to_gencode(self) -> list[str]:
        """nvcc flags, one ``-gencode`` per SASS and per PTX image."""
        flags: list[str] = []
        for s in self.specs:
            t = s.target
            if s.sass:
                flags.append(f"-gencode=arch={t.compute},code={t.sm}")
            if s.ptx:
                flags.append(f"-gencode=arch={t.compute},code={t.compute}")
        return flags

    # -- checks ---------------------------------------------------------------------------------
    def problems_with(self, toolkit: Toolkit, facts: CudaFacts | None = None) -> list[str]:
        """Why this list cannot be compiled by ``toolkit`` (empty when it can)."""
        facts = facts or load_facts()
        problems: list[str] = []
        for s in self.specs:
            problem = toolkit_problem(s.target, toolkit, facts)
            if problem:
                problems.append(problem)
        return problems

    def check_toolkit(self, toolkit: Toolkit, facts: CudaFacts | None = None) -> None:
        """Raise ``ArchListError`` naming every target ``toolkit`` cannot compile, before a
        build starts rather than in nvcc's error."""
        problems = self.problems_with(toolkit, facts)
        if problems:
            raise ArchListError(
                "; ".join(problems),
                hint=(facts or load_facts()).rule("toolkit-targets").split(" (")[0],
            )


def toolkit_problem(target: Target, toolkit: Toolkit, facts: CudaFacts) -> str | None:
    """One sentence saying why ``toolkit`` cannot compile ``target``, or None."""
    cc, variant = target.cc, target.variant
    pool = {
        Variant.PLAIN: toolkit.targets,
        Variant.ARCH_SPECIFIC: toolkit.arch_specific,
        Variant.FAMILY_SPECIFIC: toolkit.family_specific,
    }[variant]
    if cc in pool:
        return None
    v = toolkit.version
    for old, new in toolkit.renamed.items():
        if old == cc:
            return (
                f"{target.sm} was renamed sm_{new.number}{variant.value} in CUDA {v}; "
                f"use {new}{variant.value}"
            )
    for family, ccs in toolkit.removed.items():
        if cc in ccs:
            last = facts.last_toolkit_targeting(cc)
            tail = f"; the last toolkit that targets it is CUDA {last.version}" if last else ""
            return f"{cc} ({family}) was removed in CUDA {v}{tail}"
    first = facts.first_toolkit_targeting(cc, variant.value)
    if first is not None and first.version > v:
        return f"{target.sm} needs CUDA >= {first.version}; this build uses CUDA {v}"
    if first is None:
        kind = {"a": "arch-specific ('a')", "f": "family-specific ('f')", "": ""}[variant.value]
        return f"no known toolkit can compile {kind + ' ' if kind else ''}{target.sm}".strip()
    last = facts.last_toolkit_targeting(cc)
    if last is not None and last.version < v:
        return f"{cc} was removed after CUDA {last.version}; CUDA {v} cannot target it"
    return f"CUDA {v} cannot target {target.sm}"


def _split(raw: str) -> list[str]:
    # Spaces around separators are tolerated ("8.0; 9.0"); doubled ';' or ',' is an empty item.
    normalized = re.sub(r"\s*([;,])\s*", r"\1", raw)
    normalized = re.sub(r"\s+", ";", normalized)
    return _SEPARATORS.split(normalized) if normalized else []


def _parse_token(token: str, raw: str, facts: CudaFacts) -> list[ArchSpec]:
    for name, expansion in facts.torch_arch_names:
        if token.lower() == name.lower():
            return [s for t in expansion.split(";") for s in _parse_token(t, raw, facts)]
    m = _DOTTED.match(token)
    if m:
        cc = ComputeCapability(int(m.group(1)), int(m.group(2)))
        if int(m.group(2)) > 9:
            _bad(token, raw, f"minor version {m.group(2)} is not a digit")
        target = _target(cc, m.group(3).lower(), token, raw, facts)
        return [ArchSpec(target, sass=True, ptx=bool(m.group(4)))]
    m = _PREFIXED.match(token)
    if m:
        cc = _from_number(m.group(2), token, raw, facts)
        target = _target(cc, m.group(3).lower(), token, raw, facts)
        sass = m.group(1).lower() == "sm"
        return [ArchSpec(target, sass=sass, ptx=not sass)]
    m = _NUMBER.match(token)
    if m:
        cc = _from_number(m.group(1), token, raw, facts)
        target = _target(cc, m.group(2).lower(), token, raw, facts)
        mode = (m.group(3) or "real").lower()
        return [ArchSpec(target, sass=mode == "real", ptx=mode == "virtual")]
    if "+" in token and _DOTTED.match(token.split("+", 1)[0]):
        _bad(token, raw, "the only suffix is a single '+PTX'")
    _bad(token, raw, "not an arch")
    raise AssertionError("unreachable")  # pragma: no cover


def _from_number(digits: str, token: str, raw: str, facts: CudaFacts) -> ComputeCapability:
    cc = ComputeCapability.from_number(int(digits))
    if not facts.is_known(cc):
        guess = ComputeCapability.from_number(int(digits) * 10)
        hint = f"; did you mean sm_{guess.number}?" if facts.is_known(guess) else ""
        _bad(token, raw, f"it would be compute capability {cc}, which does not exist{hint}")
    return cc


def _target(cc: ComputeCapability, suffix: str, token: str, raw: str, facts: CudaFacts) -> Target:
    if not facts.is_known(cc):
        known = ", ".join(str(c) for c in sorted(facts.capabilities))
        _bad(token, raw, f"unknown compute capability {cc} (known: {known})")
    variant = Variant(suffix)
    if variant is not Variant.PLAIN:
        attr = "arch_specific" if variant is Variant.ARCH_SPECIFIC else "family_specific"
        having = sorted({c for tk in facts.toolkits for c in getattr(tk, attr)})
        if cc not in having:
            label = "arch-specific 'a'" if variant is Variant.ARCH_SPECIFIC else "family 'f'"
            _bad(
                token,
                raw,
                f"{cc} has no {label} variant (it exists for {', '.join(str(c) for c in having)})",
            )
    return Target(cc, variant)


def _bad(token: str, raw: str, why: str) -> None:
    where = f" in {raw!r}" if raw != token else ""
    raise ArchListError(f"invalid arch {token!r}{where}: {why}", hint=f"valid forms: {VALID_FORMS}")
