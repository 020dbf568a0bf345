"""Will it load? The dynamic loader's rules applied to a wheel installed next to a torch.

The model (docs/verdicts.md, "can-load"):

1. Every wheel is laid out as pip installs it: a member ``pkg/x.so`` lives at
   ``site-packages/pkg/x.so`` (``NAME.data/purelib|platlib/...`` likewise).
2. ``import torch`` runs first: ``torch/_C*.so`` and ``torch/lib/libtorch_global_deps.so`` are
   loaded with everything they need. Those objects stay loaded; a later ``DT_NEEDED`` whose name
   equals the soname (or file name) of a loaded object is satisfied by it, as ld.so does.
   Libraries torch needs that no given wheel holds (``libcudart.so.13`` from the
   ``nvidia-*`` wheels torch requires) are *assumed* loaded by torch: their symbols are unknown.
3. Any other ``DT_NEEDED`` is searched as ld.so does: ``DT_RPATH`` of the object and of the
   objects that loaded it (ignored when the object has ``DT_RUNPATH``), then ``DT_RUNPATH``,
   ``$ORIGIN`` being the object's folder, then the system: a name on the manylinux policy's
   list of allowed libraries (auditwheel's, vendored in ``verdicts/data``) is a system library.
   Absolute build paths (``/__w/_temp/...``) exist on no user's machine and are skipped.
4. Python loads extension modules with ``RTLD_NOW``: every non-weak undefined symbol must be
   defined by an object in the library's scope (itself, its dependency tree breadth first, the
   globally loaded ``libtorch_global_deps`` tree, the interpreter for ``Py*``). A versioned
   reference (``name@GLIBCXX_3.4.30``) needs that version; the ``.gnu.version_r`` entries must
   each be defined by the file they name ("version `X' not found"). System libraries are judged
   by the host's own copy where one was given (its exports) and by the policy's symbol versions
   (what the wheel's platform tag promises).

The search of steps 1 to 3 (install paths, ld.so's search path, the breadth-first closure, symbol
lookup in a scope) is ``load_world``; this module models ``import torch``, checks each library's
versions and symbols, and writes the verdict with its causes and fixes (``LoadReport``).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache
from importlib import resources
from typing import Any

from archwheel.binary.dynamic import DynamicInfo
from archwheel.verdicts.document import document_header
from archwheel.verdicts.load_world import (
    TORCH_NAME,
    Resolution,
    TooMuchWork,
    World,
    closure,
    could_be_system,
    defined_in,
    find_by_name,
    install_path,
)

MAX_LISTED = 20  # missing symbols listed per library; the count says how many in all


class LoadVerdict(str, Enum):
    """Whether a library loads beside torch: it does, it does not, or it could not be decided."""

    LOADS = "loads"
    FAILS = "does-not-load"
    UNKNOWN = "unknown"  # something could not be read or checked


@dataclass(frozen=True)
class Policy:
    """A manylinux policy: the system libraries it allows and the symbol versions of each (``GLIBC``
    -> ``2.28`` ...)."""

    name: str
    libraries: frozenset[str]
    versions: Mapping[str, frozenset[str]]  # prefix ("GLIBC") -> allowed versions ("2.28")


@lru_cache(maxsize=1)
def _policies() -> dict[str, Policy]:
    text = resources.files("archwheel.verdicts").joinpath("data/manylinux_policy.json").read_text()
    data = json.loads(text)
    out: dict[str, Policy] = {}
    for p in data["policies"]:
        for arch, versions in p["symbol_versions"].items():
            policy = Policy(
                p["name"],
                frozenset(p["lib_whitelist"]),
                {k: frozenset(v) for k, v in versions.items()},
            )
            for name in (p["name"], *p["aliases"]):
                out[f"{name}_{arch}"] = policy
    return out


def policy_for(tags: Iterable[str]) -> Policy | None:
    """The strictest manylinux policy among a wheel's platform tags (None: not manylinux)."""
    found: list[tuple[str, Policy]] = []
    for tag in tags:
        platform = tag.rsplit("-", 1)[-1]
        for part in platform.split("."):
            policy = _policies().get(part)
            if policy is not None:
                found.append((part, policy))
    if not found:
        return None
    return min(found, key=lambda f: sum(len(v) for v in f[1].versions.values()))[1]


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"[0-9]+", text))


def version_allowed(version: str, policy: Policy) -> bool | None:
    """Whether a symbol version (``GLIBC_2.34``) is within the policy; None: not governed."""
    prefix, _, number = version.partition("_")
    allowed = policy.versions.get(prefix)
    if allowed is None or not number:
        return None
    if number in allowed:
        return True
    if not number[:1].isdigit():
        return None
    newest = max((v for v in allowed if v[:1].isdigit()), key=_version_key, default=None)
    return newest is not None and _version_key(number) <= _version_key(newest)


# -- the installed world ---------------------------------------------------------------------


@dataclass(frozen=True)
class WheelFiles:
    """One wheel's shared libraries and the metadata the verdict uses (read by
    ``inspection.wheel_files``, or kept in the cache as a torch wheel's view)."""

    filename: str
    name: str  # canonical distribution name
    version: str
    tags: tuple[str, ...]
    libraries: tuple[DynamicInfo, ...]
    requires: tuple[tuple[str, str, str], ...] = ()  # (name, specifier, marker)
    cuda_major: int | None = None


@dataclass(frozen=True)
class MissingSymbol:
    """A symbol a library needs that nothing loaded defines, or defines without the version it asks
    for."""

    name: str  # mangled
    version: str | None
    version_file: str | None
    reason: str  # "undefined" or "version"


# How each library of a wheel is opened, from what it exports and who needs it. A library with no
# ``PyInit_<name>`` that no library of the wheel needs is opened by the package itself:
# ``torch.ops.load_library(path)`` is ``ctypes.CDLL(path)`` (torch/_ops.py), and ctypes always
# adds ``RTLD_NOW`` to its mode (``RTLD_LOCAL`` by default), after ``import torch``: the same scope
# as an extension module's (its own tree, the ``libtorch_global_deps`` tree torch opened
# ``RTLD_GLOBAL``, the interpreter; torch's other libraries only through its ``DT_NEEDED``).
OPENED_AS = {
    "extension-module": "extension module (PyInit_): opened by import",
    "dependency": "needed by another library of the wheel: opened as its dependency",
    "dlopened": (
        "opened with torch.ops.load_library / ctypes (no PyInit_): judged as a dlopened library "
        "(RTLD_NOW, after import torch)"
    ),
}


def opened_as(lib: DynamicInfo, needed_by_wheel: set[str]) -> str:
    """How ``lib`` is opened: ``extension-module`` when it exports ``PyInit_<name>`` (name: its
    file name up to the first dot), ``dependency`` when another library of the wheel finds it on
    its search path (``needed_by_wheel``: those names), else ``dlopened``
    (``torch.ops.load_library``, ``ctypes.CDLL``; torchaudio's ``libtorchaudio.so`` too, which its
    module needs by a bare name that only the package's own loading satisfies)."""
    base = posixpath.basename(lib.path)
    if f"PyInit_{base.split('.', 1)[0]}" in lib.exports:
        return "extension-module"
    if base in needed_by_wheel or (lib.soname is not None and lib.soname in needed_by_wheel):
        return "dependency"
    return "dlopened"


@dataclass(frozen=True)
class LibraryLoad:
    """The verdict for one library of the wheel."""

    path: str  # member path inside the wheel
    verdict: LoadVerdict
    resolutions: tuple[Resolution, ...] = ()
    missing_libraries: tuple[str, ...] = ()
    missing_symbols: tuple[MissingSymbol, ...] = ()
    missing_symbol_count: int = 0
    missing_versions: tuple[tuple[str, str], ...] = ()  # (file, version)
    too_new: tuple[tuple[str, str], ...] = ()  # (version, policy) beyond the platform tag
    unverified: int = 0  # symbols that may come from a library not given (assumed)
    symbols_checked: int = 0  # non-weak undefined symbols looked up
    causes: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    opened_as: str = ""  # one of OPENED_AS ("" when not judged)

    @property
    def opened_how(self) -> str:
        """How the library is opened, in words (empty when not judged)."""
        return OPENED_AS.get(self.opened_as, "")

    @property
    def symbols_resolved(self) -> int:
        """The symbols checked that something loaded defines (neither missing nor assumed)."""
        return self.symbols_checked - self.missing_symbol_count - self.unverified

    def to_json(self) -> dict[str, Any]:
        """This library's part of the can-load document."""
        return {
            "path": self.path,
            "verdict": self.verdict.value,
            "opened_as": self.opened_as or None,
            "needed": [
                {"name": r.needed, "how": r.how, "path": r.path, "detail": r.detail}
                for r in self.resolutions
            ],
            "missing_libraries": list(self.missing_libraries),
            "missing_symbols": [
                {"name": s.name, "version": s.version, "file": s.version_file}
                for s in self.missing_symbols
            ],
            "missing_symbol_count": self.missing_symbol_count,
            "missing_versions": [{"file": f, "version": v} for f, v in self.missing_versions],
            "beyond_platform_tag": [{"version": v, "policy": p} for v, p in self.too_new],
            "unverified_symbols": self.unverified,
            "symbols_checked": self.symbols_checked,
            "symbols_resolved": self.symbols_resolved,
            "causes": list(self.causes),
            "fixes": list(self.fixes),
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class LoadReport:
    """``can-load``: whether each library of a wheel loads beside the torch given (and other
    wheels), with what its metadata says and what could not be checked."""

    wheel: WheelFiles
    torch: WheelFiles
    others: tuple[WheelFiles, ...]
    libraries: tuple[LibraryLoad, ...]
    facts: tuple[str, ...] = ()  # metadata facts (Requires-Dist vs the torch given ...)
    metadata_conflicts: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()  # libraries assumed loaded by torch
    problems: tuple[str, ...] = ()

    @property
    def verdict(self) -> LoadVerdict:
        """FAILS when any library does not load, else UNKNOWN when anything could not be checked,
        else LOADS."""
        verdicts = {lib.verdict for lib in self.libraries}
        if LoadVerdict.FAILS in verdicts:
            return LoadVerdict.FAILS
        if LoadVerdict.UNKNOWN in verdicts or self.problems:
            return LoadVerdict.UNKNOWN
        return LoadVerdict.LOADS

    def to_json(self) -> dict[str, Any]:
        """The can-load JSON document."""
        return {
            **document_header(1),
            "wheel": self.wheel.filename,
            "torch": self.torch.filename,
            "with": [w.filename for w in self.others],
            "verdict": self.verdict.value,
            "facts": list(self.facts),
            "metadata_conflicts": list(self.metadata_conflicts),
            "assumed_loaded_by_torch": list(self.assumed),
            "libraries": [lib.to_json() for lib in self.libraries],
            "problems": list(self.problems),
        }


# The loader's model of one wheel does at most this many steps (an object visited, a search
# path entry or a scope object looked at): its cost grows with the dependency graph (each library
# closes over its DT_NEEDED, each name searched along the RPATHs of the chain that loaded it), and
# for tiny libraries that need one another in a chain it is cubic (measured: 250 took 13 s, 500
# took 105 s; 1000 would take about 14 minutes).
# torch 2.14.1 judged against itself takes 94669 steps (2% of it; 0.04 s), torchvision 8843.
MAX_LOAD_STEPS = 5_000_000


def _torch_roots(torch: WheelFiles) -> list[str]:
    roots = []
    for lib in torch.libraries:
        base = lib.path.rsplit("/", 1)[-1]
        if lib.path.count("/") == 1 and base.startswith("_C.") and lib.path.startswith("torch/"):
            roots.append(lib.path)
        if lib.path == "torch/lib/libtorch_global_deps.so":
            roots.append(lib.path)
    return [p for r in roots if (p := install_path(r)) is not None]


def judge_load(
    wheel: WheelFiles,
    torch: WheelFiles,
    others: Sequence[WheelFiles] = (),
    system: Mapping[str, DynamicInfo] | None = None,
) -> LoadReport:
    """The loader's verdict for every shared library of ``wheel`` after ``import torch``."""
    system = system or {}
    policy = policy_for(wheel.tags)
    policy_libs = (
        policy.libraries if policy else frozenset(_policies()["manylinux_2_17_x86_64"].libraries)
    )
    world = World(
        [lib for w in (wheel, torch, *others) for lib in w.libraries],
        system,
        own=wheel.libraries,
        steps=MAX_LOAD_STEPS,
    )
    # 1. import torch
    roots = _torch_roots(torch)
    problems: list[str] = []
    if not roots:
        problems.append(f"{torch.filename}: no torch/_C*.so: cannot model `import torch`")
    try:
        torch_order, torch_found = closure(world, roots, policy_libs, load=True)
        for path, rows in torch_found.items():
            for r in rows:
                if r.how == "missing":
                    world.assumed.setdefault(r.needed, posixpath.basename(path))
        global_roots = [r for r in roots if r.endswith("libtorch_global_deps.so")]
        global_scope, _ = closure(world, global_roots, policy_libs, load=False)
    except TooMuchWork:
        return _not_judged(wheel, torch, others, problems)
    assumed = sorted(world.assumed)
    # 2. each library of the wheel
    results: list[LibraryLoad] = []
    torch_exports = _all_exports(world, torch_order)
    torch_sonames = set(world.loaded)
    out_of_steps = False
    judged: dict[int, DynamicInfo] = {}  # result index -> its library, to say how it is opened
    for lib in wheel.libraries:
        where = install_path(lib.path)
        if not lib.is_dynamic or where is None:
            if lib.problems:
                results.append(LibraryLoad(lib.path, LoadVerdict.UNKNOWN, problems=lib.problems))
            continue
        if not out_of_steps:
            try:
                judged[len(results)] = lib
                results.append(
                    _judge_library(
                        world, lib, where, policy=policy, policy_libs=policy_libs,
                        global_scope=global_scope, wheel=wheel, torch=torch,
                        torch_exports=torch_exports, torch_sonames=torch_sonames,
                    )
                )  # fmt: skip
                continue
            except TooMuchWork:
                out_of_steps = True
        results.append(LibraryLoad(lib.path, LoadVerdict.UNKNOWN, problems=(_out_of_steps(),)))
    # a library other libraries of the wheel reach on the search path is opened as their
    # dependency; one reached only once the package has loaded it itself ("package") is not
    on_path = {r.needed for result in results for r in result.resolutions if r.how == "wheel"}
    for i, lib in judged.items():
        results[i] = replace(results[i], opened_as=opened_as(lib, on_path))
    facts, conflicts = _metadata_facts(wheel, torch)
    if not any(lib.is_dynamic for lib in wheel.libraries):
        problems.append(f"{wheel.filename}: no shared library inside: nothing to load")
    return LoadReport(
        wheel, torch, tuple(others), tuple(results), tuple(facts), tuple(conflicts),
        tuple(assumed), tuple(problems),
    )  # fmt: skip


def _out_of_steps() -> str:
    return (
        f"not judged: modelling the loader for this wheel took more than {MAX_LOAD_STEPS} steps "
        "(a dependency graph or symbol tables far beyond a real wheel's)"
    )


def _not_judged(
    wheel: WheelFiles, torch: WheelFiles, others: Sequence[WheelFiles], problems: list[str]
) -> LoadReport:
    """The report when the model ran out of steps in `import torch`, before the wheel's own
    libraries were reached."""
    message = f"`import torch` not modelled: it took more than {MAX_LOAD_STEPS} steps"
    results = tuple(
        LibraryLoad(lib.path, LoadVerdict.UNKNOWN, problems=(message,))
        for lib in wheel.libraries
        if lib.is_dynamic or lib.problems
    )
    return LoadReport(wheel, torch, tuple(others), results, (), (), (), (*problems, message))


def _all_exports(world: World, order: Iterable[str]) -> set[str]:
    names: set[str] = set()
    for p in order:
        names.update(world.objects[p].exports)
    return names


def _judge_library(
    world: World,
    lib: DynamicInfo,
    where: str,
    *,
    policy: Policy | None,
    policy_libs: frozenset[str],
    global_scope: Sequence[str],
    wheel: WheelFiles,
    torch: WheelFiles,
    torch_exports: set[str],
    torch_sonames: set[str],
) -> LibraryLoad:
    order, found = closure(world, [where], policy_libs, load=False)
    resolutions = tuple(found[where])
    missing_libs = tuple(
        dict.fromkeys(r.needed for rows in found.values() for r in rows if r.how == "missing")
    )
    scope = [world.objects[p] for p in dict.fromkeys([*order, *global_scope])]
    system_names = {r.needed for rows in found.values() for r in rows if r.how == "system"}
    assumed_names = {r.needed for rows in found.values() for r in rows if r.how == "assumed"}
    system_infos = [world.system[n] for n in sorted(system_names) if n in world.system]
    # version requirements (.gnu.version_r): checked by ld.so before any symbol
    missing_versions: list[tuple[str, str]] = []
    too_new: list[tuple[str, str]] = []
    for file, versions in lib.version_needs:
        target = find_by_name(world, file, found)
        for v in versions:
            if (
                policy is not None
                and file in policy.libraries
                and version_allowed(v, policy) is False
            ):
                too_new.append((v, policy.name))
            if (
                target is not None
                and target.version_definitions
                and (v not in target.version_definitions)
            ):
                missing_versions.append((file, v))
    # symbols
    missing: list[MissingSymbol] = []
    unverified = 0
    checked = 0
    unchecked_system_names = {n for n in system_names if n not in world.system}
    for sym in lib.undefined:
        if sym.weak or sym.name.startswith(("Py", "_Py")):
            continue
        checked += 1
        world.spend(len(scope))
        if defined_in(sym, scope):
            continue
        if sym.version_file in assumed_names:
            continue
        if sym.version_file in missing_libs:
            unverified += 1  # belongs to a library that is missing: the loader stops there
            continue
        if could_be_system(sym.name) and system_names:
            world.spend(len(system_infos))
            if defined_in(sym, system_infos):
                continue
            if sym.version_file in unchecked_system_names or (
                sym.version_file is None and unchecked_system_names
            ):
                continue  # a system library this host lacks: assumed (versions checked above)
        if (
            (assumed_names or missing_libs)
            and sym.version is None
            and not TORCH_NAME.match(sym.name)
        ):
            unverified += 1
            continue
        missing.append(MissingSymbol(sym.name, sym.version, sym.version_file, "undefined"))
    causes, fixes = _causes(
        missing_libs, missing=missing, missing_versions=missing_versions, too_new=too_new,
        wheel=wheel, torch=torch, torch_exports=torch_exports, torch_sonames=torch_sonames,
    )  # fmt: skip
    if missing_libs or missing or missing_versions or too_new:
        verdict = LoadVerdict.FAILS
    elif lib.problems or unverified:
        verdict = LoadVerdict.UNKNOWN
    else:
        verdict = LoadVerdict.LOADS
    problems = list(lib.problems)
    if unverified and not missing_libs:
        problems.append(
            f"{unverified} symbols may come from libraries torch loads but no --with wheel holds "
            f"({', '.join(sorted(assumed_names))}): give those wheels with --with to check them"
        )
    return LibraryLoad(
        lib.path, verdict, resolutions, missing_libs, tuple(missing[:MAX_LISTED]), len(missing),
        tuple(missing_versions), tuple(dict.fromkeys(too_new)), unverified, checked, causes,
        fixes, tuple(problems),
    )  # fmt: skip


def _causes(
    missing_libs: Sequence[str],
    *,
    missing: Sequence[MissingSymbol],
    missing_versions: Sequence[tuple[str, str]],
    too_new: Sequence[tuple[str, str]],
    wheel: WheelFiles,
    torch: WheelFiles,
    torch_exports: set[str],
    torch_sonames: set[str],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    causes: list[str] = []
    fixes: list[str] = []
    torch_cuda = "libtorch_cuda.so" in torch_sonames or "libc10_cuda.so" in torch_sonames
    for name in missing_libs:
        m = re.fullmatch(r"libcudart\.so\.([0-9]+)", name)
        if m:
            have = torch.cuda_major
            if have is not None and int(m.group(1)) != have:
                causes.append(
                    f"CUDA major mismatch: built for CUDA {m.group(1)} ({name}), torch "
                    f"{torch.version} uses CUDA {have}"
                )
                fixes.append(
                    f"install a torch built for CUDA {m.group(1)}, or rebuild against "
                    f"torch {torch.version}"
                )
            elif not torch_cuda:
                causes.append(f"a CUDA extension next to a CPU-only torch ({torch.version})")
                fixes.append("install a CUDA build of torch")
        elif (
            name in ("libc10_cuda.so", "libtorch_cuda.so")
            and not torch_cuda
            and not any("CPU-only" in c for c in causes)
        ):
            causes.append(f"a CUDA extension next to a CPU-only torch ({torch.version})")
            fixes.append("install a CUDA build of torch")
    if missing_libs and not causes:
        causes.append(f"needed libraries found nowhere: {', '.join(missing_libs)}")
        fixes.append("give the wheels that provide them with --with, or bundle them")
    torchy = [s for s in missing if TORCH_NAME.match(s.name)]
    abi = [s for s in missing if "cxx11" in s.name and _abi_twin(s.name, torch_exports)]
    if abi:
        causes.append("C++ ABI mismatch (_GLIBCXX_USE_CXX11_ABI differs from torch's)")
        fixes.append(
            "rebuild with the C++ ABI torch was built with (torch._C._GLIBCXX_USE_CXX11_ABI)"
        )
    elif torchy:
        causes.append(
            f"built against another torch version: {len(torchy)} torch C++ symbols are not "
            f"exported by torch {torch.version}"
        )
        fixes.append(
            f"install the torch it was built with, or rebuild it against torch {torch.version}"
        )
    if too_new:
        listed = ", ".join(sorted({v for v, _ in too_new}))
        causes.append(f"needs {listed}, newer than the platform tag {too_new[0][1]} allows")
        fixes.append("build on the manylinux image of that tag (older glibc/libstdc++)")
    if missing_versions:
        listed = ", ".join(f"{v} from {f}" for f, v in missing_versions[:3])
        causes.append(f"version not found: {listed}")
        fixes.append("install the release of that library the wheel was built against")
    if missing and not torchy and not abi:
        causes.append(f"{len(missing)} symbols are defined by no library in its scope")
    return tuple(causes), tuple(fixes)


def _abi_twin(name: str, exports: set[str]) -> bool:
    """Whether torch exports the same symbol under the other C++ string ABI."""
    plain = name.replace("St7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE", "Ss").replace(
        "NSt7__cxx11", "NSt"
    )
    return plain != name and plain in exports


def _metadata_facts(wheel: WheelFiles, torch: WheelFiles) -> tuple[list[str], list[str]]:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    facts: list[str] = []
    conflicts: list[str] = []
    pins = [(n, s, m) for n, s, m in wheel.requires if n == "torch" and "extra" not in m]
    if not pins:
        facts.append(f"{wheel.filename}: its metadata does not require torch")
    for _name, spec, _marker in pins:
        try:
            ok = Version(torch.version).public in SpecifierSet(spec or ">=0") or Version(
                torch.version
            ) in SpecifierSet(spec or ">=0", prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            facts.append(f"metadata requires torch{spec} (not comparable with {torch.version})")
            continue
        line = f"metadata requires torch{spec}; the torch given is {torch.version}: " + (
            "satisfied" if ok else "NOT satisfied (pip would refuse or replace this torch)"
        )
        facts.append(line)
        if not ok:
            conflicts.append(line)
    return facts, conflicts


def is_torch(wheel: WheelFiles) -> bool:
    """Whether ``wheel`` is a torch wheel (by its canonical name), the one every other wheel is
    judged beside."""
    return wheel.name == "torch"


def mangled_names(report: LoadReport) -> list[str]:
    """Every mangled symbol name the report shows (to demangle in one go)."""
    return sorted(
        {s.name for lib in report.libraries for s in lib.missing_symbols if s.name.startswith("_Z")}
    )
