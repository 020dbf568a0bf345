"""What each consumer of an arch list makes of a value: one reader per grammar.

``read_select_compute_arch`` follows ``CUDA_SELECT_NVCC_ARCH_FLAGS`` step by step (with the tables
of PyTorch's ``select_compute_arch.cmake`` or of CMake's own FindCUDA copy), ``read_cpp_extension``
follows ``torch.utils.cpp_extension._get_cuda_arch_flags``, ``read_cmake`` CMake's
``CUDA_ARCHITECTURES``, ``read_nvcc`` plain ``-gencode``/``-arch`` flags and ``read_project`` a
project's own variable (``FLASH_ATTN_CUDA_ARCHS``). Each returns a ``Reading``: the images the
consumer asks nvcc for, or the entries it would reject, drop, ignore or reinterpret
(``Finding``), with the consumer's own error text where it stops. The tables they apply are
``arch_consumers``; ``arch_grammars.read`` picks the reader and checks the images are real.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from archwheel.facts.arch import ArchList, ArchSpec, CodeKind, Target
from archwheel.facts.arch_consumers import (
    CMAKE,
    CMAKE_FINDCUDA,
    CPP_EXTENSION,
    NVCC,
    CmakeName,
    ProjectGrammar,
    SelectComputeArch,
    TorchGrammar,
    cmake_regex,
)
from archwheel.facts.versions import CudaVersion

FindingKind = Literal["reject", "drop", "ignore", "reinterpret"]

# the sources the readings of CMake and nvcc name (they read no versioned file)
CMAKE_DOC = "CMake's CUDA_ARCHITECTURES (prop_tgt/CUDA_ARCHITECTURES)"
NVCC_DOC = "nvcc's -gencode/-arch options"


@dataclass(frozen=True)
class Finding:
    """One entry a consumer would not take as meant: rejected, dropped, ignored, reinterpreted."""

    kind: FindingKind
    entry: str
    rule: str

    def sentence(self) -> str:
        """``silently drops '8.6': <rule>``: the finding as the report says it."""
        verb = {
            "reject": "rejects",
            "drop": "silently drops",
            "ignore": "ignores",
            "reinterpret": "reinterprets",
        }[self.kind]
        return f"{verb} {self.entry!r}: {self.rule}"


@dataclass(frozen=True)
class Reading:
    """What one consumer makes of one value."""

    consumer: str
    variable: str
    value: str | None
    source: str
    images: tuple[str, ...]  # sm_80, compute_90: what the compiler is asked for
    flags: tuple[str, ...]  # the nvcc flags as the consumer writes them
    findings: tuple[Finding, ...] = ()
    error: str | None = None  # the consumer's own words where it stops

    @property
    def ok(self) -> bool:
        """Whether the consumer takes the value exactly as meant (nothing found wrong)."""
        return not self.findings

    @property
    def fails(self) -> bool:
        """The consumer itself stops (exception, CMake error)."""
        return any(f.kind == "reject" for f in self.findings)

    def targets(self) -> ArchList | None:
        """The images as an ArchList (None when the consumer stops or names no real target)."""
        if self.fails or not self.images:
            return None
        return images_to_archs(self.images)

    def describe(self) -> str:
        """One line: the images when ``ok``, else every finding's sentence."""
        if self.ok:
            return " ".join(self.images)
        return "; ".join(f.sentence() for f in self.findings)


def _reading(
    consumer: str,
    variable: str,
    value: str | None,
    source: str,
    findings: Iterable[Finding],
    *,
    images: Iterable[str] = (),
    flags: Iterable[str] = (),
    error: str | None = None,
) -> Reading:
    """What ``consumer`` makes of ``value``: the images only when nothing was found wrong."""
    found = tuple(findings)
    return Reading(
        consumer,
        variable,
        value,
        source,
        () if found else tuple(images),
        tuple(flags),
        found,
        error,
    )


def images_to_archs(images: Iterable[str]) -> ArchList:
    """The ``ArchList`` asking for exactly these ``sm_``/``compute_`` images."""
    specs = []
    for name in images:
        kind, target = Target.from_name(name)
        specs.append(ArchSpec(target, sass=kind is CodeKind.SASS, ptx=kind is CodeKind.PTX))
    return ArchList.of(specs)


def image_names(archs: ArchList) -> tuple[str, ...]:
    """The sorted ``sm_``/``compute_`` images ``archs`` asks for, to compare with a reading."""
    out: list[str] = []
    for s in archs:
        if s.sass:
            out.append(s.target.sm)
        if s.ptx:
            out.append(s.target.compute)
    return tuple(sorted(out))


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


# PyTorch's CMake ------------------------------------------------------------------------------


def _cmake_false(value: str) -> bool:
    """CMake's false constants (``if(NOT var)``): 0, OFF, NO, FALSE, N, IGNORE, *-NOTFOUND."""
    upper = value.upper()
    return upper in ("", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND") or upper.endswith(
        "-NOTFOUND"
    )


def read_select_compute_arch(
    value: str | None, tables: SelectComputeArch, variable: str, consumer: str
) -> Reading:
    """``CUDA_SELECT_NVCC_ARCH_FLAGS`` step by step, with the tables of one copy of it: PyTorch's
    (reached through ``torch_cuda_get_nvcc_gencode_flag``) or CMake's own FindCUDA module."""
    src = tables.source
    # set(TORCH_CUDA_ARCH_LIST $ENV{...}); cuda_select_nvcc_arch_flags(v ${TORCH_CUDA_ARCH_LIST}):
    # the unquoted expansion splits on ';' and drops empty elements.
    argn = ";".join(p for p in (value or "").split(";") if p)
    if argn in ("", "Auto", "All", "Common"):
        rule = (
            "empty means Auto: the build machine's GPUs, and with none visible (a build "
            "container) the 'Common' list, which depends on the CUDA version"
            if argn in ("", "Auto")
            else f"'{argn}' is a list of its own that depends on the CUDA version "
            "(select_compute_arch.cmake); name the targets instead"
        )
        finding = Finding("reinterpret", argn or "(empty)", rule)
        return _reading(consumer, variable, value, src, [finding])
    items = _dedupe(p for p in re.sub(r"[ \t]+", ";", argn).split(";") if p)
    if not items:
        finding = Finding(
            "ignore",
            argn,
            "only blanks: no architecture, so CUDA_SELECT_NVCC_ARCH_FLAGS adds no flag and nvcc "
            "builds its own default target",
        )
        return _reading(consumer, variable, value, src, [finding])
    number = cmake_regex(tables.number_regex)
    names = {n.name: n for n in tables.names}
    bins: list[str] = []
    ptxs: list[str] = []
    findings: list[Finding] = []
    error: str | None = None
    for item in items:
        arch_name = item
        add_ptx = False
        m = re.fullmatch(r"(.*)\+PTX", arch_name, re.DOTALL)
        if m:
            add_ptx = True
            arch_name = m.group(1)
        if number.search(arch_name):
            arch_bin: tuple[str, ...] = (arch_name,)
            arch_ptx: tuple[str, ...] = (arch_name,)
        elif arch_name in names:
            arch_bin, arch_ptx = names[arch_name].arch_bin, names[arch_name].arch_ptx
        elif not arch_name:
            # if(${arch_name} STREQUAL "<first name>") with nothing to expand: if() itself fails
            findings.append(
                Finding(
                    "reject",
                    item,
                    "'+PTX' needs a number or a name right before it (a blank splits it off); "
                    "CMake stops with 'Unknown arguments specified'",
                )
            )
            first = tables.names[0].name
            error = error or (
                f'if given arguments: "STREQUAL" "{first}" Unknown arguments specified'
            )
            continue
        else:
            rule = _cmake_unknown_rule(arch_name, names)
            if consumer == CMAKE_FINDCUDA:
                rule = rule.replace("X.Y, X.Ya, X.Yf, X.Y(X.Y)", "X.Y (one-digit X), X.Y(X.Y)")
            findings.append(Finding("reject", item, rule))
            error = error or tables.unknown_error.replace("{name}", arch_name)
            continue
        bins.extend(arch_bin)
        if add_ptx:
            ptxs.extend(arch_ptx or arch_bin)
    # remove dots and convert to lists, exactly as the CMake code does
    bin_list = _dedupe(re.findall(r"[0-9()]+[af]?", ";".join(bins).replace(".", "")))
    ptx_list = _dedupe(re.findall(r"[0-9]+[af]?", ";".join(ptxs).replace(".", "")))
    flags: list[str] = []
    images: list[str] = []
    for arch in bin_list:
        pair = re.search(r"([0-9]+)\(([0-9]+)\)", arch)
        if pair:
            flags += ["-gencode", f"arch=compute_{pair.group(2)},code=sm_{pair.group(1)}"]
            images.append(f"sm_{pair.group(1)}")
        else:
            flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
            images.append(f"sm_{arch}")
    for arch in ptx_list:
        flags += ["-gencode", f"arch=compute_{arch},code=compute_{arch}"]
        images.append(f"compute_{arch}")
    bad_images = [i for i in images if not re.fullmatch(r"(sm|compute)_[0-9]+[af]?", i)]
    for image in bad_images:
        findings.append(Finding("reject", image, "the CMake code writes an nvcc flag nvcc refuses"))
    return _reading(
        consumer, variable, value, src, findings, images=images, flags=flags, error=error
    )


def _cmake_unknown_rule(arch_name: str, names: Mapping[str, CmakeName]) -> str:
    rule = (
        "not X.Y, X.Ya, X.Yf, X.Y(X.Y), a name, or one of these with a trailing '+PTX'; "
        "CMake stops with 'Unknown CUDA Architecture Name'"
    )
    lower = {n.lower(): n for n in names}
    if arch_name.lower() in lower:
        return f"names are case-sensitive: write {lower[arch_name.lower()]!r}; " + rule
    if arch_name.lower().endswith("+ptx"):
        return "the suffix is '+PTX', in capitals; " + rule
    if "," in arch_name:
        return "',' is not a separator (only ';', blanks and tabs); " + rule
    return rule


# torch.utils.cpp_extension -----------------------------------------------------------------------


def read_cpp_extension(
    value: str | None, g: TorchGrammar, cflags: tuple[str, ...], variable: str
) -> Reading:
    """``_get_cuda_arch_flags(cflags)`` with TORCH_CUDA_ARCH_LIST set to ``value``."""
    src = f"torch {g.torch} {g.cpp_extension_file}"
    for flag in cflags:
        if "TORCH_EXTENSION_NAME" in flag:
            continue
        if "arch" in flag:
            finding = Finding(
                "ignore",
                value or "(unset)",
                f"the extension's own nvcc flag {flag!r} contains 'arch', so "
                "_get_cuda_arch_flags returns no flags and TORCH_CUDA_ARCH_LIST is "
                "ignored entirely",
            )
            return _reading(CPP_EXTENSION, variable, value, src, [finding])
    if not value or value == "native":
        finding = Finding(
            "reject",
            value or "(unset)",
            "unset, empty or 'native' means the visible GPUs; with none visible (a build "
            "container) _get_cuda_arch_flags fails",
        )
        return _reading(
            CPP_EXTENSION,
            variable,
            value,
            src,
            [finding],
            error="IndexError: list index out of range",
        )
    text = value.replace(" ", ";")
    for name, expansion in g.cpp_extension_names:
        text = text.replace(name, expansion)
    valid = set(g.cpp_extension_valid)
    flags: list[str] = []
    findings: list[Finding] = []
    error: str | None = None
    for arch in text.split(";"):
        if arch not in valid:
            findings.append(Finding("reject", arch, _cpp_extension_rule(arch, value, g)))
            error = error or f"ValueError: Unknown CUDA arch ({arch}) or GPU not supported"
            continue
        version = arch.split("+")[0]
        major, minor = version.split(".")
        num = f"{major}{minor}"
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if arch.endswith("+PTX"):
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    flags = sorted(set(flags))
    images = sorted({f.rsplit("code=", 1)[1] for f in flags})
    kept_flags = () if findings else flags
    return _reading(
        CPP_EXTENSION, variable, value, src, findings, images=images, flags=kept_flags, error=error
    )


def _cpp_extension_rule(arch: str, value: str, g: TorchGrammar) -> str:
    listed = "every entry must be one of " + " ".join(g.cpp_extension_supported) + " (+PTX)"
    if arch == "":
        return "an empty entry (a doubled or trailing ';')"
    if "," in arch:
        return "',' is not a separator (only ';' and ' ')"
    if "+PTX+PTX" in arch:
        named = [(n, e) for n, e in g.cpp_extension_names if n + "+PTX" in value]
        how = f" ({named[0][0]} becomes {named[0][1]})" if named else ""
        return "names are replaced as substrings, so NAME+PTX becomes X.Y+PTX+PTX" + how
    if re.fullmatch(r"[0-9]+\.[0-9]+f(\+PTX)?", arch):
        return "family-specific 'f' targets are not accepted"
    if arch.lower().endswith("+ptx") and not arch.endswith("+PTX"):
        return "the suffix is '+PTX', in capitals"
    if any(arch.lower() == n.lower() for n, _ in g.cpp_extension_names):
        return "names are case-sensitive"
    return f"not in torch {g.torch}'s supported list; {listed}"


# CMake CUDA_ARCHITECTURES ------------------------------------------------------------------------

_CMAKE_ARCH = re.compile(r"([0-9]+[af]?)(?:-(real|virtual))?")


def read_cmake(value: str | None, variable: str) -> Reading:
    """What CMake makes of a ``CUDA_ARCHITECTURES`` value: the images of ``NN``, ``NN-real``
    and ``NN-virtual`` entries, and what it rejects or what depends on the machine."""
    items = [p for p in (value or "").split(";") if p]
    if not items:
        finding = Finding(
            "reject",
            "(empty)",
            "CUDA_ARCHITECTURES must be non-empty on targets that compile CUDA (policy CMP0104)",
        )
        return _reading(CMAKE, variable, value, CMAKE_DOC, [finding], error="CMP0104")
    if len(items) == 1 and items[0] in ("all", "all-major", "native"):
        finding = Finding(
            "reinterpret",
            items[0],
            f"'{items[0]}' depends on the CMake and CUDA versions or on the build machine's GPUs; "
            "name the targets instead",
        )
        return _reading(CMAKE, variable, value, CMAKE_DOC, [finding])
    if len(items) == 1 and _cmake_false(items[0]):
        finding = Finding(
            "ignore",
            items[0],
            "a false value disables CMake's arch flags: nvcc then builds its own default target",
        )
        return _reading(CMAKE, variable, value, CMAKE_DOC, [finding])
    images: list[str] = []
    flags: list[str] = []
    findings: list[Finding] = []
    for item in items:
        m = _CMAKE_ARCH.fullmatch(item)
        if not m:
            findings.append(
                Finding(
                    "reject",
                    item,
                    "entries are NN, NN-real or NN-virtual (NN may end in a or f), separated "
                    "by ';'; CMake stops on anything else",
                )
            )
            continue
        arch, kind = m.group(1), m.group(2)
        codes = {
            None: [f"compute_{arch}", f"sm_{arch}"],
            "real": [f"sm_{arch}"],
            "virtual": [f"compute_{arch}"],
        }[kind]
        images.extend(codes)
        flags.append(f"--generate-code=arch=compute_{arch},code=[{','.join(codes)}]")
    error = f"CUDA_ARCHITECTURES contains {findings[0].entry!r}" if findings else None
    return _reading(
        CMAKE,
        variable,
        value,
        CMAKE_DOC,
        findings,
        images=sorted(set(images)),
        flags=flags,
        error=error,
    )


# nvcc flags ------------------------------------------------------------------------------------

_GENCODE = re.compile(r"arch=(compute_[0-9]+[af]?),code=(.+)")
_CODE = re.compile(r"(sm|compute)_[0-9]+[af]?")


def read_nvcc(value: str | None, variable: str) -> Reading:
    """What nvcc makes of a value holding ``-gencode``/``-arch`` flags: their images, and
    every token that is not such a flag."""
    try:
        tokens = shlex.split(value or "")
    except ValueError as exc:
        finding = Finding("reject", value or "", f"not a shell word list ({exc})")
        return _reading(NVCC, variable, value, NVCC_DOC, [finding], error=str(exc))
    images: list[str] = []
    findings: list[Finding] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        arg: str | None = None
        option = token.split("=", 1)[0]
        if option in ("-gencode", "--generate-code", "-arch", "--gpu-architecture"):
            if "=" in token:
                arg = token.split("=", 1)[1]
            elif i + 1 < len(tokens):
                i += 1
                arg = tokens[i]
        if arg is None:
            findings.append(
                Finding(
                    "reject", token, "only -gencode and -arch flags belong in the arch variable"
                )
            )
            i += 1
            continue
        if option in ("-arch", "--gpu-architecture"):
            m = _CODE.fullmatch(arg)
            if not m:
                findings.append(
                    Finding(
                        "reinterpret" if arg in ("native", "all", "all-major") else "reject",
                        token,
                        "-arch takes sm_NN or compute_NN here ('native', 'all' and 'all-major' "
                        "depend on the machine or the toolkit)",
                    )
                )
            elif m.group(1) == "sm":
                images += [arg, arg.replace("sm_", "compute_")]
            else:
                images.append(arg)
        else:
            g = _GENCODE.fullmatch(arg)
            codes = g.group(2).strip("[]\"'").split(",") if g else []
            if not g or not codes or not all(_CODE.fullmatch(c) for c in codes):
                findings.append(
                    Finding("reject", arg, "-gencode takes arch=compute_NN,code=sm_NN|compute_NN")
                )
            else:
                images.extend(codes)
        i += 1
    if not tokens:
        findings.append(
            Finding("ignore", "(empty)", "no flags: nvcc builds its own default target")
        )
    return _reading(
        NVCC, variable, value, NVCC_DOC, findings, images=sorted(set(images)), flags=tokens
    )


# projects ---------------------------------------------------------------------------------------


def read_project(
    value: str | None, p: ProjectGrammar, cuda: CudaVersion | None, variable: str
) -> Reading:
    """What project ``p``'s build script makes of its arch variable (its default when unset):
    the entries it knows, for ``cuda`` when given; every other entry adds nothing."""
    text = p.default if value is None else value
    items = text.split(p.separator)
    by_entry = {e.entry: e for e in p.entries}
    findings: list[Finding] = []
    for item in items:
        entry = by_entry.get(item)
        if entry is None:
            listed = p.separator.join(e.entry for e in p.entries)
            findings.append(
                Finding(
                    "drop",
                    item,
                    f"{p.name} acts only on the entries {listed}, SASS only; "
                    "anything else adds nothing",
                )
            )
        elif cuda is not None and cuda < entry.min_cuda:
            findings.append(
                Finding("drop", item, f"{p.name} adds {entry.target.sm} only with CUDA >= "
                        f"{entry.min_cuda}")
            )  # fmt: skip
    chosen = [e for e in p.entries if e.entry in items and (cuda is None or cuda >= e.min_cuda)]
    flags = tuple(
        f
        for e in chosen
        for f in ("-gencode", f"arch=compute_{e.target.number},code={e.target.sm}")
    )
    if not chosen:
        findings.append(
            Finding(
                "reject",
                text,
                f"no entry selected: {p.name} adds no -gencode flag, and cpp_extension then "
                "falls back to TORCH_CUDA_ARCH_LIST",
            )
        )
    images = sorted(e.target.sm for e in chosen)
    return _reading(p.name, variable, value, p.source, findings, images=images, flags=flags)
