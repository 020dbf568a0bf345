"""What each shared library of a configured build will link from outside its build tree, read
from the link steps of its build.ninja (CMake's ``LINK_LIBRARIES``) before anything compiles.

A wheel of the build needs these on the host unless the repair step bundles them or a declared
requirement provides them: PyTorch built from Debian's source with ``USE_SYSTEM_LIBS`` links
Debian's sleef, oneDNN, protobuf, XNNPACK ... where the official wheel links its own copies
statically, and only a configured build file says so hours before the repair step would. Words
that name the C library, libm, libdl, librt, libpthread, libgcc and libstdc++ (what the
manylinux policies allow) are left out, and so are static archives, linker options, and every
path inside the build tree; a library under the toolkit's folder is counted apart (the CUDA
wheels provide those).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from archwheel.binary.buildfile import LinkStep

# -l names the manylinux policies allow (glibc's libraries, libgcc, libstdc++)
_POLICY = frozenset({"c", "m", "dl", "rt", "pthread", "gcc", "gcc_s", "stdc++", "util", "resolv"})
TOOLKIT_FOLDERS = ("/usr/local/cuda/", "/opt/archwheel/cuda-pypi/")
# -l names of the toolkit: the driver (libcuda.so.1, on the host with the driver) and static
# archives only (nvcc's device runtime, cudart_static)
_TOOLKIT_NAMES = frozenset({"cuda"})
_STATIC_NAMES = frozenset({"cudadevrt", "culibos"})


@dataclass(frozen=True)
class LibraryLinks:
    """One shared library's link step: the system libraries and the toolkit's it links."""

    library: str  # the link step's output, relative to the build folder (lib/libtorch_cpu.so)
    system: tuple[str, ...]  # file names as linked (libsleef.so, libdnnl.so.3.7)
    toolkit: tuple[str, ...]  # the toolkit's (libcudart.so) and the driver's (libcuda.so)

    def to_json_dict(self) -> dict[str, object]:
        """The library in ``--format json``."""
        return {"library": self.library, "system": list(self.system), "toolkit": list(self.toolkit)}


def _linked(word: str, tree: str) -> tuple[str, str] | None:
    """("system" | "toolkit", file name) for one word of LINK_LIBRARIES; None when it is an
    option, a static archive, the policy's or the build tree's own."""
    if word.startswith("-l"):
        name = word[2:]
        if name.startswith(":"):
            return None if name.endswith(".a") else ("system", name[1:])
        if name in _POLICY or name in _STATIC_NAMES or name.endswith("_static"):
            return None
        return ("toolkit" if name in _TOOLKIT_NAMES else "system", f"lib{name}.so")
    if word.startswith("-") or not word:
        return None
    path = PurePosixPath(word)
    if ".so" not in path.name or path.name.endswith(".a"):
        return None
    if not path.is_absolute() or word.startswith(tree.rstrip("/") + "/"):
        return None  # built here: it goes into the wheel itself
    if word.startswith(TOOLKIT_FOLDERS) or path.name.split(".so")[0] == "libcuda":
        return ("toolkit", path.name)  # the driver's libcuda.so is the host's, wherever linked
    return ("system", path.name)


def link_needs(links: Iterable[LinkStep], tree: str) -> tuple[LibraryLinks, ...]:
    """Each link step whose library links something from outside ``tree`` (the source's
    folder in the container: paths under it are the build's own), by output."""
    found: dict[str, LibraryLinks] = {}
    for step in links:
        system: dict[str, None] = {}
        toolkit: dict[str, None] = {}
        for word in step.libraries:
            kind = _linked(word, tree)
            if kind is not None:
                (system if kind[0] == "system" else toolkit)[kind[1]] = None
        if system or toolkit:
            found[step.output] = LibraryLinks(
                step.output, tuple(sorted(system)), tuple(sorted(toolkit))
            )
    return tuple(found[name] for name in sorted(found))


def system_libraries(needs: Iterable[LibraryLinks]) -> tuple[str, ...]:
    """Every system library some library of the build links, sorted."""
    return tuple(sorted({name for entry in needs for name in entry.system}))


def provided_by(names: Iterable[str], provided: Iterable[str]) -> tuple[str, ...]:
    """The linked ``names`` (linker names: libnccl.so) whose library a declared requirement
    provides (its SONAME in ``provided``: libnccl.so.2)."""
    sonames = tuple(provided)
    return tuple(
        name for name in names if any(s == name or s.startswith(f"{name}.") for s in sonames)
    )
