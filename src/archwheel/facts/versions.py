"""Small version types: CUDA versions, driver versions, PTX ISA versions, compute capabilities.

They parse the spellings users and tools write (``12.8``, ``cu128``, ``570.86.10``, ``sm_90``)
and order correctly, so that "needs >= 12.8" is a comparison, not a string match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from archwheel.errors import UsageError

_CUDA_RE = re.compile(r"^(?:cuda[-_ ]?)?(\d{1,2})\.(\d{1,2})(?:\.\d+)*$", re.IGNORECASE)
_CU_TAG_RE = re.compile(r"^cu(\d{2,3})$", re.IGNORECASE)
_DRIVER_RE = re.compile(r"^(\d{2,4})(?:\.(\d{1,3}))?(?:\.(\d{1,3}))?$")


@dataclass(frozen=True, order=True)
class CudaVersion:
    """A CUDA release (toolkit, runtime, or what a driver supports), major.minor."""

    major: int
    minor: int

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

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True, order=True)
class DriverVersion:
    """An NVIDIA Linux driver version such as 570.86.10 (components compared numerically)."""

    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
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
        return self.parts[0]

    def __str__(self) -> str:
        # NVIDIA writes the later components with two digits: 580.65.06, 570.26.
        return ".".join([str(self.parts[0]), *(f"{p:02d}" for p in self.parts[1:])])


@dataclass(frozen=True, order=True)
class PtxIsaVersion:
    """A PTX ISA version (``.version 9.0`` in PTX text; major/minor in the fatbin entry)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> PtxIsaVersion:
        m = re.match(r"^(\d{1,2})\.(\d{1,2})$", text.strip())
        if not m:
            raise UsageError(f"invalid PTX ISA version {text!r}", hint="expected e.g. 8.7")
        return cls(int(m.group(1)), int(m.group(2)))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True, order=True)
class ComputeCapability:
    """A GPU's compute capability, major.minor (9.0, 12.0)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> ComputeCapability:
        """Parse ``9.0`` or ``12.1``; raise ``UsageError`` otherwise (no catalog check)."""
        m = re.match(r"^(\d{1,2})\.(\d)$", text.strip())
        if not m:
            raise UsageError(
                f"invalid compute capability {text!r}", hint="write it as MAJOR.MINOR, e.g. 8.6"
            )
        return cls(int(m.group(1)), int(m.group(2)))

    @classmethod
    def from_number(cls, number: int) -> ComputeCapability:
        """From the SM number used in ``sm_XY`` and in fatbin headers: 90 -> 9.0, 121 -> 12.1."""
        return cls(number // 10, number % 10)

    @property
    def number(self) -> int:
        """The SM number: 9.0 -> 90, 12.1 -> 121."""
        return self.major * 10 + self.minor

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"
