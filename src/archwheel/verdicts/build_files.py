"""The build-file proof: does every CUDA compile step a build file holds carry exactly the
requested archs?

Given the CUDA steps of a configured build (``binary.buildfile``: its ``build.ninja`` or
``compile_commands.json``), each step's nvcc images are compared with the request: exact, or
exact plus an addition PyTorch's CMake makes itself (``facts/pytorch_additions.toml``: the rule,
its release range and source), or a deviation naming what was found against what was expected.
A deviation is found before any compile runs; the audit of the objects and the wheel proves the
result after.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from archwheel.binary.buildfile import BuildSteps, nvcc_images
from archwheel.facts.arch import ArchList
from archwheel.facts.pytorch_additions import Addition
from archwheel.verdicts.document import document_header

SCHEMA_VERSION = 1
KIND = "build-files"


@dataclasses.dataclass(frozen=True)
class StepDeviation:
    """A step whose images are not the request (with the additions its rules make)."""

    output: str
    source: str
    found: tuple[str, ...]
    expected: tuple[str, ...]
    problems: tuple[str, ...] = ()

    @property
    def missing(self) -> tuple[str, ...]:
        """Expected and not found."""
        return tuple(i for i in self.expected if i not in self.found)

    @property
    def extra(self) -> tuple[str, ...]:
        """Found and not expected."""
        return tuple(i for i in self.found if i not in self.expected)

    def to_json_dict(self) -> dict[str, Any]:
        """The deviation as the JSON document writes it."""
        return {
            "output": self.output,
            "source": self.source,
            "found": list(self.found),
            "expected": list(self.expected),
            "missing": list(self.missing),
            "extra": list(self.extra),
            "problems": list(self.problems),
        }


@dataclasses.dataclass(frozen=True)
class StepAddition:
    """An image a step carries beyond the request because a rule of PyTorch's CMake adds it."""

    source: str
    image: str
    rule: str  # the rule's id
    rule_source: str  # the file and lines it was read in
    text: str

    def to_json_dict(self) -> dict[str, Any]:
        """The addition as the JSON document writes it."""
        return {
            "source": self.source,
            "image": self.image,
            "rule": self.rule,
            "rule_source": self.rule_source,
            "text": self.text,
        }


@dataclasses.dataclass(frozen=True)
class BuildFilesProof:
    """Every CUDA step of one build file judged against one request."""

    path: str
    requested: str  # the arch list, canonical
    expected: tuple[str, ...]  # the images each step must carry
    cuda_steps: int
    exact: int  # steps carrying the request and nothing else
    with_additions: int  # steps carrying the request plus their rules' additions
    deviations: tuple[StepDeviation, ...]
    additions: tuple[StepAddition, ...]
    languages: Mapping[str, int]  # CMake's compile rules by language
    builds: int
    torch: str | None  # the PyTorch release the rules were chosen for
    nvcc: str | None
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Proved: at least one CUDA step, none deviating."""
        return self.cuda_steps > 0 and not self.deviations

    def to_json_dict(self) -> dict[str, Any]:
        """The proof as ``archwheel build-files --format json`` prints it."""
        return {
            **document_header(SCHEMA_VERSION, KIND),
            "path": self.path,
            "requested": self.requested,
            "expected": list(self.expected),
            "ok": self.ok,
            "cuda_steps": self.cuda_steps,
            "exact": self.exact,
            "with_additions": self.with_additions,
            "deviating": len(self.deviations),
            "deviations": [d.to_json_dict() for d in self.deviations],
            "additions": [a.to_json_dict() for a in self.additions],
            "languages": dict(sorted(self.languages.items())),
            "builds": self.builds,
            "torch": self.torch,
            "nvcc": self.nvcc,
            "problems": list(self.problems),
        }


def requested_images(arch_list: ArchList) -> tuple[str, ...]:
    """The images a request asks each step for: ``sm_80`` per SASS target, ``compute_90`` per
    PTX target."""
    images = [s.target.sm for s in arch_list if s.sass]
    images += [s.target.compute for s in arch_list if s.ptx]
    return tuple(sorted(images, key=_order))


def _order(image: str) -> tuple[int, str, int]:
    """sm_90 before sm_90a before sm_100; SASS before PTX before LTO-IR of one target."""
    kind, _, number = image.partition("_")
    digits = "".join(c for c in number if c.isdigit())
    return int(digits or 0), number, {"sm": 0, "compute": 1}.get(kind, 2)


def _version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def prove_steps(
    steps: BuildSteps,
    arch_list: ArchList,
    rules: Iterable[Addition],
    *,
    path: str,
    torch: str | None = None,
    nvcc: str | None = None,
) -> BuildFilesProof:
    """Judge every CUDA step of ``steps`` against ``arch_list`` and PyTorch's addition rules
    (those of ``torch``'s release, where it is known; ``nvcc``'s version where known)."""
    requested = requested_images(arch_list)
    wanted = frozenset(requested)
    active = _active(arch_list, rules, torch, nvcc)
    exact = with_additions = 0
    deviations: list[StepDeviation] = []
    additions: list[StepAddition] = []
    for step in steps.cuda:
        images = nvcc_images(step.argv)
        mine, expected = _expected(step.source, wanted, active)
        if images.images == expected and not images.problems:
            if mine:
                with_additions += 1
                additions.extend(
                    StepAddition(step.source, image, r.id, r.source, r.text)
                    for r in mine
                    for image in sorted(r.adds - wanted, key=_order)
                )
            else:
                exact += 1
            continue
        deviations.append(
            StepDeviation(
                step.output,
                step.source,
                tuple(sorted(images.images, key=_order)),
                tuple(sorted(expected, key=_order)),
                images.problems,
            )
        )
    return BuildFilesProof(
        path=path,
        requested=str(arch_list),
        expected=requested,
        cuda_steps=len(steps.cuda),
        exact=exact,
        with_additions=with_additions,
        deviations=tuple(deviations),
        additions=tuple(additions),
        languages=steps.languages,
        builds=steps.builds,
        torch=torch,
        nvcc=nvcc,
        problems=steps.problems,
    )


def _active(
    arch_list: ArchList, rules: Iterable[Addition], torch: str | None, nvcc: str | None
) -> list[Addition]:
    """The addition rules that apply to this request, release and nvcc."""
    flags = " ".join(arch_list.to_gencode())
    torch_version, nvcc_version = _version(torch), _version(nvcc)
    return [r for r in rules if r.applies(flags, nvcc_version, torch_version)]


def _expected(
    source: str, wanted: frozenset[str], active: Iterable[Addition]
) -> tuple[list[Addition], frozenset[str]]:
    """The addition rules that match a step's source, and the images the step must carry: the
    request's and those rules' additions."""
    mine = [r for r in active if r.matches(source)]
    return mine, wanted.union(*(r.adds for r in mine))


@dataclasses.dataclass(frozen=True)
class ObjectCheck:
    """One object a partial build compiled: the images it holds against its step's."""

    output: str  # as the build file names it
    source: str
    found: tuple[str, ...]
    expected: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """It holds exactly what its step promised."""
        return set(self.found) == set(self.expected)

    def to_json_dict(self) -> dict[str, Any]:
        """The check as the JSON document writes it."""
        return {
            "output": self.output,
            "source": self.source,
            "found": list(self.found),
            "expected": list(self.expected),
            "ok": self.ok,
        }


def check_objects(
    steps: BuildSteps,
    arch_list: ArchList,
    rules: Iterable[Addition],
    found: Mapping[str, Iterable[str]],
    *,
    torch: str | None = None,
    nvcc: str | None = None,
) -> tuple[ObjectCheck, ...]:
    """Each CUDA step whose object was built (``found``: output -> the images the object
    holds, read by the audit), against the request plus its source's additions."""
    active = _active(arch_list, rules, torch, nvcc)
    wanted = frozenset(requested_images(arch_list))
    checks = []
    for step in steps.cuda:
        if step.output not in found:
            continue
        _, expected = _expected(step.source, wanted, active)
        images = tuple(sorted(set(found[step.output]), key=_order))
        checks.append(
            ObjectCheck(step.output, step.source, images, tuple(sorted(expected, key=_order)))
        )
    return tuple(checks)


def explained_extras(
    extras: Iterable[str], arch_list: ArchList, rules: Iterable[Addition]
) -> tuple[str, ...]:
    """For images a build carries beyond ``arch_list``: the PyTorch rules that add them for this
    request (``sm_90a: RowwiseScaledMM.cu (pytorch-rowwise-scaled-mm-sm90a, cmake/...)``), so a
    gate or a report cites the rule instead of calling the image unexplained."""
    flags = " ".join(arch_list.to_gencode())
    wanted = set(extras)
    said: list[str] = []
    for rule in rules:
        if not rule.applies(flags, None, None):
            continue
        for image in sorted(rule.adds & wanted, key=_order):
            said.append(f"{image}: {rule.file.rsplit('/', 1)[-1]} ({rule.id}, {rule.source})")
    return tuple(said)
