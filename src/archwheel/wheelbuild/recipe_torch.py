"""A recipe built against another torch (``archwheel build --torch``, a matrix's torch axis),
and the torch version a list of build requirements pins."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from archwheel.errors import UsageError
from archwheel.wheelbuild.recipe_model import Recipe
from archwheel.wheelbuild.torch_pin import check_label_cuda, find_torch_pin


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
