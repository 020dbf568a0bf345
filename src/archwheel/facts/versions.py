"""Small version types: CUDA versions, driver versions, PTX ISA versions, compute capabilities.

They parse the spellings users and tools write (``12.8``, ``cu128``, ``570.86.10``, ``sm_90``)
and order correctly, so that "needs >= 12.8" is a comparison, not a string match.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from archwheel.errors import UsageError

V = TypeVar("V")

_CUDA_RE = re.compile(r"^(?:cuda[-_ ]?)?([0-9]{1,2})\.([0-9]{1,2})(?:\.[0-9]+)*\Z", re.IGNORECASE)
_CU_TAG_RE = re.compile(r"^cu([0-9]{2,3})\Z", re.IGNORECASE)
_DRIVER_RE = re.compile(r"^([0-9]{2,4})(?:\.([0-9]{1,3}))?(?:\.([0-9]{1,3}))?\Z")


def parse_or_none(parse: Callable[[str], V], text: object) -> V | None:
    """``parse(text)``, or None where ``text`` is missing, not a string, or not a valid spelling
    (what a probe reports is read this way: "[N/A]" or nothing is no version)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse(text)
    except UsageError:
        return None


def _major_minor(pattern: str, text: str, error: str, hint: str) -> tuple[int, int]:
    """The two numbers of ``text`` that ``pattern`` (with two groups) matches in full."""
    m = re.match(pattern, text.strip())
    if not m:
        raise UsageError(error, hint=hint)
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True, order=True)
class _MajorMinor:
    """Two numbers written ``MAJOR.MINOR`` and ordered as numbers (each subclass is its own
    kind: a CUDA version never equals or compares with a compute capability)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True, order=True)
class CudaVersion(_MajorMinor):
    """A CUDA release (toolkit, runtime, or what a driver supports), major.minor."""

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        """Parse ``12.8``, ``12.8.1``, ``cuda12.8`` or the wheel tag form ``cu128``."""
        raw = text.strip()
        m = _CUDA_RE.match(raw)
        if m:
            return cls(int(m.group(1)), int(m.group(2)))
        m = _CU_TAG_RE.match(raw)
        if m:
            digits = m.group(1)
            return cls(int(digits[:-1]), int(digits[-1]))
        raise UsageError(
            f"invalid CUDA version {text!r}",
            hint="write it as MAJOR.MINOR, e.g. 12.8 or 13.0, or as a wheel tag such as cu128",
        )

    @property
    def tag(self) -> str:
        """The PyTorch wheel tag, ``cu128``."""
        return f"cu{self.major}{self.minor}"


@dataclass(frozen=True, order=True)
class DriverVersion:
    """An NVIDIA Linux driver version such as 570.86.10 (components compared numerically)."""

    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
        """``570``, ``570.86`` or ``570.86.10`` as nvidia-smi prints it; ``UsageError`` else."""
        raw = text.strip()
        m = _DRIVER_RE.match(raw)
        if not m:
            raise UsageError(
                f"invalid driver version {text!r}",
                hint="write it as nvidia-smi prints it, e.g. 570.86.10",
            )
        return cls(tuple(int(g) for g in m.groups() if g is not None))

    @property
    def branch(self) -> int:
        """The first component (570): what the facts key the CUDA a driver supports by."""
        return self.parts[0]

    def __str__(self) -> str:
        # NVIDIA writes the later components with two digits: 580.65.06, 570.26.
        return ".".join([str(self.parts[0]), *(f"{p:02d}" for p in self.parts[1:])])


@dataclass(frozen=True, order=True)
class PtxIsaVersion(_MajorMinor):
    """A PTX ISA version (``.version 9.0`` in PTX text; major/minor in the fatbin entry)."""

    @classmethod
    def parse(cls, text: str) -> PtxIsaVersion:
        """``8.7`` (one or two digits each); ``UsageError`` for anything else."""
        return cls(
            *_major_minor(
                r"^([0-9]{1,2})\.([0-9]{1,2})$",
                text,
                f"invalid PTX ISA version {text!r}",
                "expected e.g. 8.7",
            )
        )


@dataclass(frozen=True, order=True)
class ComputeCapability(_MajorMinor):
    """A GPU's compute capability, major.minor (9.0, 12.0)."""

    @classmethod
    def parse(cls, text: str) -> ComputeCapability:
        """Parse ``9.0`` or ``12.1``; raise ``UsageError`` otherwise (no catalog check)."""
        return cls(
            *_major_minor(
                r"^([0-9]{1,2})\.([0-9])$",
                text,
                f"invalid compute capability {text!r}",
                "write it as MAJOR.MINOR, e.g. 8.6",
            )
        )

    @classmethod
    def from_number(cls, number: int) -> ComputeCapability:
        """From the SM number used in ``sm_XY`` and in fatbin headers: 90 -> 9.0, 121 -> 12.1."""
        return cls(number // 10, number % 10)

    @property
    def number(self) -> int:
        """The SM number: 9.0 -> 90, 12.1 -> 121."""
        return self.major * 10 + self.minor
