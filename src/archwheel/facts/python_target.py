"""The CPython a wheel is built for: ``3.11`` or a free-threaded ``3.14t`` (PEP 703).

A free-threaded build is a different ABI: its wheels are tagged ``cp314-cp314t`` (python tag
``cp314``, ABI tag ``cp314t``), its interpreter is ``python3.14t`` (manylinux images:
``/opt/python/cp314-cp314t/bin``), and pip selects wheels for it with ``--python-version 3.14
--abi cp314t``. CPython has free-threaded builds from 3.13 on; PyTorch's official matrix lists
``3.14t`` (``.github/scripts/generate_binary_build_matrix.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FIRST_FREE_THREADED = (3, 13)
_TEXT = re.compile(r"^3\.([0-9]{1,2})(t?)\Z")


@dataclass(frozen=True)
class PythonTarget:
    """A CPython 3.x a build targets, free-threaded or not; made by ``parse`` from ``--python``
    and read where wheels are tagged, downloaded and checked."""

    minor: int
    free_threaded: bool = False

    @classmethod
    def parse(cls, text: str) -> PythonTarget:
        """``3.11`` or ``3.14t``; ``ValueError`` with a one-line reason otherwise."""
        m = _TEXT.match(text)
        if not m:
            raise ValueError(f"{text!r} is not a Python version such as 3.11 or 3.14t")
        target = cls(int(m.group(1)), bool(m.group(2)))
        if target.free_threaded and (3, target.minor) < FIRST_FREE_THREADED:
            raise ValueError(
                f"{text!r}: free-threaded CPython exists from 3.13 on (3.13t, 3.14t, ...)"
            )
        return target

    @property
    def version(self) -> str:
        """The language version, without the ABI: ``3.14``."""
        return f"3.{self.minor}"

    def __str__(self) -> str:
        return self.version + ("t" if self.free_threaded else "")

    @property
    def python_tag(self) -> str:
        """The wheel's python tag: ``cp314`` (the same with or without free threading)."""
        return f"cp3{self.minor}"

    @property
    def abi_tag(self) -> str:
        """The wheel's ABI tag: ``cp314``, or ``cp314t`` when free-threaded."""
        return self.python_tag + ("t" if self.free_threaded else "")

    @property
    def wheel_tag(self) -> str:
        """The interpreter part of the wheel tag: ``cp314-cp314t``."""
        return f"{self.python_tag}-{self.abi_tag}"

    @property
    def interpreter(self) -> str:
        """The interpreter's program name: ``python3.14`` or ``python3.14t``."""
        return f"python{self}"

    def pip_args(self) -> tuple[str, ...]:
        """What selects this interpreter's wheels in ``pip download``."""
        return ("--python-version", self.version, "--implementation", "cp", "--abi", self.abi_tag)

    def describe(self) -> str:
        """``3.14t (free-threaded; wheel tag cp314-cp314t)``, for plans and messages."""
        kind = "free-threaded" if self.free_threaded else "with the GIL"
        return f"{self} ({kind}; wheel tag {self.wheel_tag})"

    def accepts(self, wheel_name: str) -> tuple[bool, str]:
        """Whether a built wheel's tag fits: a ``cpXY`` wheel must carry this ABI (``py3-none``
        and ``abi3`` wheels are not interpreter-specific)."""
        parts = wheel_name.removesuffix(".whl").split("-")
        if len(parts) < 5:
            return False, f"{wheel_name} is not a wheel file name"
        pythons, abis = parts[-3].split("."), parts[-2].split(".")
        if not any(p.startswith("cp") for p in pythons) or abis in (["none"], ["abi3"]):
            return True, ""
        if self.python_tag in pythons and self.abi_tag in abis:
            return True, ""
        return False, (
            f"{wheel_name} is tagged {parts[-3]}-{parts[-2]}, not {self.wheel_tag} "
            f"(Python {self.describe()})"
        )
