"""The loader's search, modelled: which installed object each ``DT_NEEDED`` names.

Every wheel is laid out as pip installs it (``install_path``: a member ``pkg/x.so`` lives at
``site-packages/pkg/x.so``, ``NAME.data/purelib|platlib/...`` likewise). A ``World`` holds those
objects and searches a name as ld.so does: an object already loaded under that soname or file
name, then ``DT_RPATH`` of the object and of the objects that loaded it (ignored when the object
has ``DT_RUNPATH``), then ``DT_RUNPATH``, ``$ORIGIN`` being the object's folder, then the system
(the manylinux policy's libraries). ``closure`` walks ``DT_NEEDED`` breadth first from some
roots, and ``defined_in`` looks a symbol up in a scope. Each step is counted against the
world's budget (``TooMuchWork`` when it runs out). The verdict built on it is ``load``.
"""

from __future__ import annotations

import posixpath
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from archwheel.binary.dynamic import DynamicInfo, UndefinedSymbol

SITE = "site-packages"


def install_path(member: str) -> str | None:
    """Where pip puts a wheel member, relative to the environment's root (None: not in site)."""
    parts = member.split("/")
    if len(parts) > 2 and parts[0].endswith(".data"):
        if parts[1] in ("purelib", "platlib"):
            return posixpath.join(SITE, *parts[2:])
        return None
    return posixpath.join(SITE, member)


@dataclass(frozen=True)
class Resolution:
    """Where one ``DT_NEEDED`` name of an object was found (``how``), or that it was not."""

    needed: str
    how: str  # "loaded" (by import torch), "wheel", "package", "system", "assumed", "missing"
    path: str | None = None  # installed path for "loaded"/"wheel"
    detail: str = ""


class TooMuchWork(Exception):
    """The model's steps ran out (``load.MAX_LOAD_STEPS`` for one wheel)."""


class World:
    """The installed objects (``libraries``, by install path), the host's system libraries,
    what is loaded so far, and the steps left (``steps``)."""

    def __init__(
        self,
        libraries: Iterable[DynamicInfo],
        system: Mapping[str, DynamicInfo],
        *,
        own: Iterable[DynamicInfo] = (),
        steps: int,
    ) -> None:
        self.steps_left = steps
        self.objects: dict[str, DynamicInfo] = {}
        for lib in libraries:
            where = install_path(lib.path)
            if where is not None and lib.is_dynamic:
                self.objects.setdefault(where, lib)
        # The judged wheel's own libraries by soname and file name: a name the search path does
        # not reach is satisfied once the package has loaded that library itself.
        # Only for the judged wheel's own objects: `import torch` runs before the package loads.
        self.own: dict[str, str] = {}
        for lib in own:
            where = install_path(lib.path)
            if where is not None and lib.is_dynamic:
                self.own.setdefault(posixpath.basename(where), where)
                if lib.soname:
                    self.own.setdefault(lib.soname, where)
        self.system = system
        self.loaded: dict[str, str] = {}  # soname or file name -> installed path
        self.assumed: dict[str, str] = {}  # name -> who needed it

    def spend(self, steps: int) -> None:
        """Count ``steps`` against the budget; raise ``TooMuchWork`` when it runs out, so a
        pathological wheel cannot make the search run for ever."""
        self.steps_left -= steps
        if self.steps_left < 0:
            raise TooMuchWork

    def mark_loaded(self, path: str) -> None:
        """Record the object at ``path`` as loaded, under its file name and soname, as ld.so would
        find it again."""
        info = self.objects[path]
        self.loaded.setdefault(posixpath.basename(path), path)
        if info.soname:
            self.loaded.setdefault(info.soname, path)

    def resolve(
        self, name: str, path: str, chain: Sequence[str], policy_libs: frozenset[str]
    ) -> Resolution:
        """Where ld.so finds the ``DT_NEEDED`` ``name`` of the object at ``path`` (loaded through
        ``chain``): already loaded, in the wheels by rpath or runpath, from the system, only once
        its own package has loaded it, assumed loaded by torch, or missing."""
        if name in self.loaded:
            return Resolution(name, "loaded", self.loaded[name])
        self.spend(1 + len(chain))
        info = self.objects[path]
        origin = posixpath.dirname(path)
        dirs: list[str] = []
        if not info.runpath:
            for p in (path, *reversed(chain)):
                o = self.objects.get(p)
                if o is not None and not o.runpath:
                    dirs.extend(_expand(d, posixpath.dirname(p)) for d in o.rpath)
        dirs.extend(_expand(d, origin) for d in info.runpath)
        self.spend(len(dirs))
        for d in dict.fromkeys(dirs):  # each folder once: a chain of one folder names it often
            if d.startswith("/"):
                continue  # an absolute build path: not on the user's machine
            candidate = posixpath.normpath(posixpath.join(d, name))
            if candidate in self.objects:
                return Resolution(name, "wheel", candidate)
        if name in policy_libs or name.startswith(("ld-linux", "libpython")):
            return Resolution(name, "system")
        if name in self.own and self.own[name] != path and path in self.own.values():
            return Resolution(
                name,
                "package",
                self.own[name],
                detail=f"not on {posixpath.basename(path)}'s search path: satisfied only once the "
                f"package has loaded {self.own[name]} itself (as torchaudio's _load_lib does); "
                "opened first, this library fails",
            )
        if name in self.assumed:
            return Resolution(name, "assumed", detail=f"needed by {self.assumed[name]}")
        return Resolution(name, "missing")


def _expand(entry: str, origin: str) -> str:
    text = entry.replace("${ORIGIN}", "$ORIGIN")
    return text.replace("$ORIGIN", origin) if "$ORIGIN" in text else text


def closure(
    world: World, roots: Sequence[str], policy_libs: frozenset[str], *, load: bool
) -> tuple[list[str], dict[str, list[Resolution]]]:
    """Breadth-first over DT_NEEDED from ``roots``: the load order and each object's resolutions."""
    order: list[str] = []
    found: dict[str, list[Resolution]] = {}
    queue: deque[tuple[str, tuple[str, ...]]] = deque((r, ()) for r in roots)
    seen = set(roots)
    while queue:
        path, chain = queue.popleft()
        world.spend(1)
        order.append(path)
        if load:
            world.mark_loaded(path)
        rows: list[Resolution] = []
        for name in world.objects[path].needed:
            r = world.resolve(name, path, chain, policy_libs)
            rows.append(r)
            if r.path and r.path not in seen:
                seen.add(r.path)
                queue.append((r.path, (*chain, path)))
        found[path] = rows
    return order, found


# -- symbols ----------------------------------------------------------------------------------

_STD_NAME = re.compile(
    r"^_Z(?:T[VTIS]|GV|Th|Tv|GR)?N?[KVr]*(?:St|S[aisod]|9__gnu_cxx|10__cxxabiv1|N10__cxxabiv1)"
    r"|^_Z(?:nw|na|dl|da)[a-zA-Z]|^_ZT[IS]P?K?[a-z]$|^_ZGTt"
)


# c10::, at::, torch::, caffe2:: names: only torch's own libraries define them, never a CUDA
# library or a system one.
TORCH_NAME = re.compile(r"^_Z(?:T[VTIS])?N?[KVr]*(?:3c10|2at|5torch|6caffe2)")


def could_be_system(name: str) -> bool:
    """A symbol a system library (libc, libstdc++, libgcc_s, libm) could define: C names and
    the C++ standard library's (``std::``, ``__gnu_cxx::``, ``__cxxabiv1::``, ``operator new``)."""
    return not name.startswith("_Z") or bool(_STD_NAME.match(name))


def find_by_name(
    world: World, name: str, found: Mapping[str, Sequence[Resolution]]
) -> DynamicInfo | None:
    """The object a closure's resolutions (``found``) resolved ``name`` to, if any."""
    for rows in found.values():
        for r in rows:
            if r.needed == name and r.path:
                return world.objects[r.path]
    return None


def defined_in(sym: UndefinedSymbol, scope: Iterable[DynamicInfo]) -> bool:
    """Whether an object of ``scope`` defines ``sym`` (in the version it asks for, if any)."""
    for obj in scope:
        versions = obj.exports.get(sym.name)
        if versions is None:
            continue
        if sym.version is None or sym.version in versions or not obj.version_definitions:
            return True
        if None in versions and not obj.version_definitions:
            return True
    return False
