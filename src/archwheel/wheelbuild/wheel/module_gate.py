"""The gate's second half: did the build compile what the project holds, for what was asked?

The audit gate (``gate.audit_gate``) reads the wheel: every library with device code must hold
every requested arch. Two traps pass it, and this module catches them from the build's own
record of its nvcc compiles (``nvcc_record``: ``nvcc --time`` rows, those of the compiles the
cache answered included):

- **a module that fell back to CPU.** Projects build a CUDA module only when ``nvcc`` is on
  ``PATH`` or a switch of theirs (``FORCE_CUDA``, ``<PROJECT>_FORCE_BUILD``) is set, and quietly
  build the CPU one otherwise; the wheel then holds some device code, just not that module's.
  Every ``.cu`` file of the source must have been compiled by nvcc (or answered by the cache),
  but those the recipe's ``[gate] unbuilt_cuda`` lets go and those of modules the project's
  own selecting switch leaves out (``verdicts.module_selection``, read before the compile from
  the value the recipe sets): a deliberate selection is not a fall-back. The message names the
  files, the selecting switch, and an ``unbuilt_cuda`` proposal that covers no compiled source.
- **archs the request did not ask for.** A project that hard-codes its ``-gencode`` list (or
  reads its own variable) compiles what it likes; the wheel then carries archs nobody asked
  for, at the cost of compile time and size. For an extension recipe that fails the gate as
  "ignored the arch list" unless ``[gate] extra_archs = true``; the message names the sources
  nvcc compiled for them and the literal targets in the project's build files.

- **a compile step without a requested arch.** A library holds the union of its objects, so
  the audit passes a library in which one object was compiled for fewer archs (its kernels then
  fail with "no kernel image" on that GPU). The build.ninja files the build left (ninja under
  ``torch.utils.cpp_extension`` or CMake) are proved step by step (``verdicts.build_files``);
  a step missing a requested image fails the gate, naming the files.

A wheel that fails here goes to ``rejected/`` with its audit report, as one the audit fails.
"""

from __future__ import annotations

import dataclasses
import glob
from collections.abc import Sequence
from pathlib import PurePosixPath

from archwheel.binary.buildfile import BuildSteps
from archwheel.facts.arch import ArchList
from archwheel.facts.pytorch_additions import load_additions
from archwheel.verdicts.build_files import prove_steps
from archwheel.verdicts.module_selection import ModuleSelection, proposed_unbuilt
from archwheel.wheelbuild.compile.nvcc_record import (
    NvccRecord,
    cuda_sources,
    is_cmake_probe,
    never_compiled,
)
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.sources.cmake_project import CAUSE
from archwheel.wheelbuild.sources.cmake_project import NOTE as CMAKE_NOTE
from archwheel.wheelbuild.wheel.gate import GateVerdict

SHOWN = 6  # files, sources and findings named in one message


@dataclasses.dataclass(frozen=True)
class ModuleEvidence:
    """What the build left to judge its modules by."""

    files: Sequence[str]  # the source's files, relative to its root
    src_root: str  # where the source was compiled (/build/src)
    record: NvccRecord | None  # None: no nvcc ran (or none was recorded)
    cached: Sequence[str] = ()  # inputs a cache answered outside nvcc's record (none now)
    source_rows: Sequence[tuple[str, str]] = ()  # the plan's source check (build files)
    selection: ModuleSelection | None = None  # the switch that names the modules to build
    build_steps: Sequence[tuple[str, BuildSteps]] = ()  # the build.ninja files it left


def check_modules(
    verdict: GateVerdict, recipe: Recipe, arch_list: ArchList, evidence: ModuleEvidence
) -> GateVerdict:
    """The audit gate's verdict, failed where the build compiled less or more than asked."""
    if not verdict.ok:
        if "no library in the wheel carries device code" in verdict.summary:
            said = [verdict.summary]
            if verdict.without_device_code:
                said.append(f"modules: {', '.join(verdict.without_device_code[:SHOWN])}")
            switches = _switches(evidence)
            if switches:
                said.append(switches)
            return dataclasses.replace(verdict, summary="; ".join(said))
        return verdict
    unbuilt = _unbuilt(recipe, evidence, verdict.without_device_code) or _short_steps(
        arch_list, evidence
    )
    if unbuilt:
        return dataclasses.replace(verdict, ok=False, summary=unbuilt)
    if verdict.extra and not recipe.gate.allows_extra(recipe.kind):
        return dataclasses.replace(
            verdict, ok=False, summary=_ignored(verdict, recipe, arch_list, evidence)
        )
    return verdict


def _unbuilt(recipe: Recipe, evidence: ModuleEvidence, plain: Sequence[str]) -> str | None:
    if evidence.record is None and not evidence.cached:
        return None  # nothing recorded: no nvcc ran; the audit gate judged the wheel alone
    names = [*(evidence.record.sources if evidence.record else ()), *evidence.cached]
    selection = evidence.selection
    deliberate = [glob.escape(s) for s in selection.left_out()] if selection else []
    sources = cuda_sources(evidence.files)
    exempt = (*recipe.gate.unbuilt_cuda, *deliberate)
    missing = never_compiled(sources, names, evidence.src_root, exempt)
    if not missing:
        return None
    shown = ", ".join(missing[:SHOWN]) + (
        f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    )
    text = (
        f"{len(missing)} CUDA sources of the project were never compiled by nvcc ({shown}): "
        f"the module built from {'them' if len(missing) > 1 else 'it'} fell back to CPU "
        f"(or was not built)"
    )
    if plain:
        listed = ", ".join(plain[:SHOWN]) + (
            f" and {len(plain) - SHOWN} more" if len(plain) > SHOWN else ""
        )
        text += f"; the wheel's modules without device code: {listed}"
    # what the build compiles: every other CUDA source, and what the selection asked for
    built = [s for s in sources if s not in missing] + list(selection.built() if selection else ())
    proposal = proposed_unbuilt(missing, built)
    listed = (
        "["
        + ", ".join(f'"{p}"' for p in proposal[:SHOWN])
        + (", ...]" if len(proposal) > SHOWN else "]")
    )
    if selection is not None:
        asked = [s for s in missing if s in selection.built()]
        if asked:
            text += (
                f"; {len(asked)} of them belong to modules {selection.switch} "
                f"({selection.where}) selects ({selection.value!r})"
            )
        return text + (
            f"; if they are not meant to be built, leave their modules out of "
            f"{selection.switch}, or list them in [gate] unbuilt_cuda = {listed}"
        )
    switches = _switches(evidence)
    if switches:
        text += f"; {switches}"
    return text + (
        f"; if they are not meant to be built, list them in [gate] unbuilt_cuda = {listed}"
    )


def _ignored(
    verdict: GateVerdict, recipe: Recipe, arch_list: ArchList, evidence: ModuleEvidence
) -> str:
    parts = [f"{library} carries {', '.join(extra)}" for library, extra in verdict.extra[:SHOWN]]
    extras = {name for _, names in verdict.extra for name in names}
    text = "; ".join(parts) + f" beyond the request {arch_list}: the build ignored the arch list"
    if evidence.record is not None:
        sources = sorted(
            s
            for s, archs in evidence.record.sources.items()
            if archs & extras and not is_cmake_probe(s)  # CMake's probes are not the project
        )
        if sources:
            text += f"; nvcc compiled {', '.join(sources[:SHOWN])} for them"
    # The recipe's variable is the cause where the project does not read it: a CMake project
    # and a format other than cmake (cmake_project.py), or a variable of the project's own.
    causes = [detail for kind, detail in evidence.source_rows if kind == CAUSE] + [
        detail
        for kind, detail in evidence.source_rows
        if kind == "source check" and "reads its own arch variable" in detail
    ]
    if causes:
        return text + (
            f"; the recipe's arch variable {recipe.arch.variable} is the cause: "
            + "; ".join(causes[:SHOWN])
            + "; change [arch] in the recipe, or allow them with [gate] extra_archs = true"
        )
    found = [
        detail for kind, detail in evidence.source_rows if kind in ("source check", CMAKE_NOTE)
    ]
    if found:
        text += "; the build files: " + "; ".join(found[:SHOWN])
    return text + (
        "; patch the project's list ([[source.patches]]) or use its own arch switch, or allow "
        "them with [gate] extra_archs = true"
    )


def _switches(evidence: ModuleEvidence) -> str | None:
    """The switches the project reads and the recipe does not set (the plan's row)."""
    for kind, detail in evidence.source_rows:
        if kind != "project switches":
            continue
        unset = next((p for p in detail.split("; ") if p.startswith("not set: ")), None)
        if unset is None:
            return None
        named = unset.removeprefix("not set: ").split(": set in [build] env")[0]
        return f"the project reads switches the recipe does not set: {named}"
    return None


def _short_steps(arch_list: ArchList, evidence: ModuleEvidence) -> str | None:
    """The compile steps of the build's build.ninja files that lack a requested image."""
    said: list[str] = []
    for path, steps in evidence.build_steps:
        proof = prove_steps(steps, arch_list, load_additions(), path=path)
        short = [d for d in proof.deviations if d.missing]
        if not short:
            continue
        missing = sorted({m for d in short for m in d.missing})
        names = ", ".join(PurePosixPath(d.source or d.output).name for d in short[:SHOWN])
        more = f" and {len(short) - SHOWN} more" if len(short) > SHOWN else ""
        said.append(
            f"{path}: {len(short)} of {proof.cuda_steps} CUDA compile steps lack "
            f"{' '.join(missing)} ({names}{more})"
        )
    if not said:
        return None
    return (
        "; ".join(said[:SHOWN]) + f": their kernels have no image for every GPU of {arch_list} "
        "although the library as a whole holds the archs (the project sets its own flags for "
        "those files)"
    )


@dataclasses.dataclass(frozen=True)
class UnbuiltForecast:
    """The module gate's first check, made after configure from the build files: the CUDA
    sources of the project that no CUDA step of them compiles, which the gate at the end of
    the build would fail on, and an ``unbuilt_cuda`` that would let them go."""

    missing: tuple[str, ...]
    proposal: tuple[str, ...]

    def line(self) -> str:
        """One line of the configure report."""
        if not self.missing:
            return (
                "GATE: every CUDA source of the project has a compile step in the build files "
                "(or [gate] unbuilt_cuda lets it go)"
            )
        shown = ", ".join(self.missing[:SHOWN]) + (
            f" and {len(self.missing) - SHOWN} more" if len(self.missing) > SHOWN else ""
        )
        listed = ", ".join(f'"{p}"' for p in self.proposal)
        return (
            f"GATE: {len(self.missing)} CUDA sources of the project have no compile step in the "
            f"build files ({shown}): the module gate at the end of the build fails on them "
            f"unless [gate] unbuilt_cuda lets them go: unbuilt_cuda = [{listed}]"
        )


def forecast_unbuilt(
    recipe: Recipe,
    files: Sequence[str],
    build_steps: Sequence[tuple[str, BuildSteps]],
    src_root: str,
    selection: ModuleSelection | None = None,
) -> UnbuiltForecast:
    """Which CUDA sources of ``files`` no CUDA step of ``build_steps`` compiles, but those the
    recipe's ``[gate] unbuilt_cuda`` and the project's own module selection let go."""
    names = [step.source for _, steps in build_steps for step in steps.cuda]
    deliberate = [glob.escape(s) for s in selection.left_out()] if selection else []
    sources = cuda_sources(files)
    missing = never_compiled(sources, names, src_root, (*recipe.gate.unbuilt_cuda, *deliberate))
    built = [s for s in sources if s not in missing]
    return UnbuiltForecast(missing, proposed_unbuilt(missing, built) if missing else ())
