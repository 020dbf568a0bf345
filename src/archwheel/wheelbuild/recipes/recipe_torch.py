"""A recipe's ``[torch]`` table (the pin, the wheel's label, ``loads_with``), the recipe built
against another torch (``archwheel build --torch``, a matrix's torch axis), and the torch
version a list of build requirements pins."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from archwheel.errors import UsageError
from archwheel.facts.documents import Table
from archwheel.wheelbuild.recipes.recipe_doc import LABEL_PROBLEM, TorchDoc
from archwheel.wheelbuild.recipes.recipe_model import BuildSpec, Recipe, ToolchainSpec
from archwheel.wheelbuild.recipes.torch_pin import (
    DEFAULT_LABEL_TEMPLATE,
    TorchOptions,
    check_label_cuda,
    check_label_template,
    find_torch_pin,
)


def with_torch(recipe: Recipe, version: str) -> Recipe:
    """The recipe built against another torch (``archwheel build --torch``, a matrix's torch
    axis): its torch pin, the torch whose arch-list grammar applies and so the wheel's local
    label and ``Requires-Dist`` follow. A recipe that pins no torch is refused (exit 2)."""
    where = f"--torch {version}"
    pin = recipe.torch.pin
    if pin is None:
        raise UsageError(
            f"{where}: recipe {recipe.name} is not built against torch (it pins no torch==X.Y.Z)",
            hint="leave out --torch for it (a matrix gives such a recipe one cell per Python)",
        )
    text = version.strip()
    if not text or text[0] in "=<>!~":
        raise UsageError(f"{where}: give a torch version such as 2.14.1, not a specifier")
    try:
        Version(text)
    except InvalidVersion:
        raise UsageError(f"{where}: {text!r} is not a version such as 2.14.1") from None
    new = find_torch_pin([f"torch=={text}"], where)
    assert new is not None
    if new.version == pin.version:
        return recipe
    if recipe.toolchain.cuda is not None:  # else it is derived from the new torch's wheel
        check_label_cuda(new, recipe.toolchain.cuda, where)
    new = dataclasses.replace(new, replaces=pin.replaces or pin.requirement)
    requirements = tuple(
        new.requirement if pinned_torch([r]) is not None else r for r in recipe.build.requirements
    )
    return dataclasses.replace(
        recipe,
        build=dataclasses.replace(recipe.build, requirements=requirements),
        arch=dataclasses.replace(recipe.arch, torch=str(new.version)),
        torch=dataclasses.replace(recipe.torch, pin=new),
    )


def pinned_torch(requirements: Iterable[str]) -> str | None:
    """The torch version a build requirement pins (``torch==2.14.1+cu130``), or None."""
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if len(pins) == 1 and "*" not in pins[0]:
            return pins[0]
    return None


def parse_torch_table(
    doc: TorchDoc, table: Table, build: BuildSpec, toolchain: ToolchainSpec, origin: Path
) -> tuple[BuildSpec, TorchOptions]:
    """The torch pin (from ``[build] requirements`` or ``[torch] version``) and its options
    (``doc``, typed by ``recipe_doc``; ``table`` names its keys in errors)."""
    requirements = build.requirements
    version = doc.version
    if version is not None:
        pinned = find_torch_pin(requirements, f"{origin}: [build] requirements")
        if pinned is not None:
            raise table.fail(
                "version", f"torch is already pinned in [build] requirements ({pinned.requirement})"
            )
        requirements = (*requirements, f"torch=={version}")
        build = BuildSpec(
            command=build.command,
            requirements=requirements,
            env=build.env,
            network=build.network,
            jobs_variable=build.jobs_variable,
            memory_per_job_gib=build.memory_per_job_gib,
        )
    where = f"{origin}: " + ("[torch] version" if version is not None else "[build] requirements")
    pin = find_torch_pin(requirements, where)
    label_value = DEFAULT_LABEL_TEMPLATE if doc.local_version is None else doc.local_version
    if label_value is False:
        label: str | None = None
    elif isinstance(label_value, str) and label_value.strip():
        label = label_value.strip()
        check_label_template(label, f"{origin}: [torch] local_version")
    else:
        raise table.fail("local_version", LABEL_PROBLEM)
    requires_dist = doc.requires_dist is not False
    if pin is None:
        for key in ("local_version", "requires_dist", "loads_with"):
            if getattr(doc, key) is not None:
                raise table.fail(key, "only valid when the recipe pins torch (torch==X.Y.Z)")
        return build, TorchOptions()
    if toolchain.cuda is not None:
        check_label_cuda(pin, toolchain.cuda, str(origin))
    loads_with = _loads_with(doc, table, requires_dist)
    return build, TorchOptions(
        pin=pin, local_version=label, requires_dist=requires_dist, loads_with=loads_with
    )


MAX_LOADS_WITH = 16  # torch releases one recipe may claim (each is read once by can-load)


def _loads_with(doc: TorchDoc, table: Table, requires_dist: bool) -> tuple[str, ...]:
    """``[torch] loads_with``: the torch releases (exact public versions, ``2.13.0``) the wheel
    should serve; can-load checks each after the build and Requires-Dist states those that
    pass (docs/builds.md, "A range of torch releases")."""
    if doc.loads_with is None:
        return ()
    if not requires_dist:
        raise table.fail(
            "loads_with", "needs requires_dist = true: the releases that pass are stated there"
        )
    found: list[Version] = []
    for item in doc.loads_with:
        try:
            version = Version(item.strip())
        except InvalidVersion:
            raise table.fail(
                "loads_with", f"{item!r} is not a torch release such as 2.13.0 (no ranges)"
            ) from None
        if version.local is not None or version.is_prerelease or version.is_devrelease:
            raise table.fail(
                "loads_with",
                f"{item!r}: name public final releases (2.13.0): a local build such as +cpu "
                "or a pre-release cannot be stated in Requires-Dist",
            )
        found.append(version)
    if not found:
        raise table.fail("loads_with", "name at least one torch release, or leave the key out")
    if len(set(found)) > MAX_LOADS_WITH:
        raise table.fail("loads_with", f"at most {MAX_LOADS_WITH} torch releases")
    return tuple(str(v) for v in sorted(set(found)))
