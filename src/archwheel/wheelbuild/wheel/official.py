"""``archwheel build --compare-official``: a recipe's effective build environment against the
official one of its PyTorch release and CUDA version (``facts/pytorch_official.toml``).

Every variable either side sets is one row: ``same``, ``differs`` (both set it, to other values),
``missing`` (the official build sets it, the recipe does not) or ``extra`` (only the recipe sets
it). A row that is not ``same`` is explained when archwheel differs on purpose (the table's
``[deliberate]`` entries: the compiler cache, the arch list you asked for ...); an unexplained
difference is what the report is for. The official value carries its source (file + commit, or
the official wheel). ``PYTORCH_EXTRA_INSTALL_REQUIREMENTS`` is compared with the requirements
the recipe's repair step adds. Nothing here touches the network or a container.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from archwheel.facts.pytorch_official import OfficialFacts, OfficialVariant, load_official
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.recipes.recipe_torch import pinned_torch
from archwheel.wheelbuild.wheel.repair import spec_for_recipe

EXTRA_REQUIREMENTS = "PYTORCH_EXTRA_INSTALL_REQUIREMENTS"


@dataclass(frozen=True)
class Difference:
    """One variable of the comparison: its status, both values and, when deliberate, why."""

    variable: str
    status: str  # same, differs, missing, extra
    recipe: str | None
    official: str | None
    source: str  # where the official value comes from ("" for extra)
    explanation: str  # why archwheel differs on purpose; "" when unexplained (or same)

    @property
    def unexplained(self) -> bool:
        """Whether the row differs from the official build with no deliberate reason."""
        return self.status != "same" and not self.explanation

    def to_json_dict(self) -> dict[str, object]:
        """The row in the comparison's JSON output."""
        return {
            "variable": self.variable,
            "status": self.status,
            "recipe": self.recipe,
            "official": self.official,
            "source": self.source,
            "explanation": self.explanation,
        }


@dataclass(frozen=True)
class OfficialComparison:
    """A recipe's build environment against the official one, made by ``compare_official``."""

    recipe: str
    release: str
    cuda: str
    variant: str | None  # "2.14.1/cu130"; None: no table at all
    in_official_matrix: bool
    rows: tuple[Difference, ...]
    # The compared variant's CUDA where it is not the recipe's (a PyTorch recipe of a release
    # with no official wheel for its CUDA: the release's own wheel, Debian's 2.6.0 with 13.0)
    other_cuda: str = ""
    env_recorded: bool = True  # False: the variant's build environment is not in the facts

    @property
    def unexplained(self) -> tuple[Difference, ...]:
        """The rows that differ with no deliberate reason: what the report is for."""
        return tuple(r for r in self.rows if r.unexplained)

    def headline(self) -> str:
        """One line: the variant compared against and how many rows differ, or why there is none."""
        if self.variant is None and not self.release:
            return (
                f"{self.recipe}: not a PyTorch recipe and no torch== pin in its build "
                "requirements: there is no official build to compare against"
            )
        if self.variant is None:
            return (
                f"{self.recipe}: no table for PyTorch {self.release} with CUDA {self.cuda} in "
                "facts/pytorch_official.toml: nothing to compare against"
            )
        kind = "official" if self.in_official_matrix else "NOT an official variant (see its note)"
        if self.other_cuda:
            kind += (
                f"; CUDA {self.other_cuda}, not the recipe's {self.cuda}: no official "
                f"{self.release} wheel was built with it"
            )
        if not self.env_recorded:
            kind += "; its build environment is not recorded: its requirements and RPATHs only"
        differing = sum(1 for r in self.rows if r.status != "same")
        return (
            f"{self.recipe} against {self.variant} ({kind}): {len(self.rows)} variables, "
            f"{differing} differ, {len(self.unexplained)} unexplained"
        )

    def lines(self) -> list[str]:
        """The terminal report: the headline, then each row with its values, source and reason."""
        out = [self.headline()]
        for r in self.rows:
            mark = "!" if r.unexplained else " "
            out.append(f"{mark} {r.status:8} {r.variable}")
            if r.status != "same":
                out.append(f"      recipe:   {r.recipe if r.recipe is not None else '(unset)'}")
                out.append(f"      official: {r.official if r.official is not None else '(unset)'}")
            if r.source:
                out.append(f"      source:   {r.source}")
            if r.explanation:
                out.append(f"      why:      {r.explanation}")
        return out

    def to_json_dict(self) -> dict[str, object]:
        """The comparison as its JSON output."""
        return {
            "recipe": self.recipe,
            "release": self.release,
            "cuda": self.cuda,
            "variant": self.variant,
            "in_official_matrix": self.in_official_matrix,
            "unexplained": len(self.unexplained),
            "rows": [r.to_json_dict() for r in self.rows],
        }


def effective_environment(recipe: Recipe, arch_value: str | None = None) -> dict[str, str]:
    """What the recipe puts into the compile environment that the official pipeline also
    controls: ``[build.env]`` and the arch variable (``--arch`` rendered, else the default)."""
    env = dict(recipe.build.env)
    env[recipe.arch.variable] = (
        arch_value if arch_value is not None else recipe.arch.render(recipe.arch.default)
    )
    return env


def _requirements_row(recipe: Recipe, variant: OfficialVariant) -> Difference:
    spec = spec_for_recipe(recipe)
    ours = " | ".join(spec.requirements) if spec is not None else None
    theirs = " | ".join(variant.requirements)
    source = variant.requirements_source.describe()
    if ours == theirs:
        return Difference(EXTRA_REQUIREMENTS, "same", ours, theirs, source, "")
    return Difference(
        EXTRA_REQUIREMENTS,
        "differs" if ours else "missing",
        ours,
        theirs,
        source,
        "",
    )


def compare_official(
    recipe: Recipe, arch_value: str | None = None, facts: OfficialFacts | None = None
) -> OfficialComparison:
    """Compare the recipe's effective build environment with its official PyTorch variant's.

    No table for the release and CUDA version gives a comparison with no rows (``variant`` None).
    """
    facts = facts or load_official()
    release = (
        recipe.version if recipe.kind == "pytorch" else pinned_torch(recipe.build.requirements)
    ) or ""
    cuda = str(recipe.toolchain.cuda)
    variant = facts.variant(release, cuda)
    pinned = recipe.repair is not None and recipe.repair.pins == "official"
    if variant is None and recipe.kind == "pytorch" and not pinned:
        # a release with no official wheel for the recipe's CUDA (its own [repair] values):
        # the release's official wheel of another CUDA, said so in the headline
        variant = facts.closest(release, cuda)
    if variant is None:
        return OfficialComparison(recipe.name, release, cuda, None, False, ())
    env = effective_environment(recipe, arch_value)
    recorded = bool(variant.env or variant.unset)
    rows: list[Difference] = []
    for name in sorted(set(env) | set(variant.env) | set(variant.unset)) if recorded else ():
        official = variant.env.get(name)
        ours = env.get(name)
        if name == EXTRA_REQUIREMENTS:
            rows.append(_requirements_row(recipe, variant))
            continue
        if name in variant.unset:  # the official build leaves it unset: so must the recipe
            status = "same" if ours is None else "differs"
            rows.append(
                Difference(
                    name,
                    status,
                    ours,
                    None,
                    variant.unset[name].describe(),
                    "" if status == "same" else facts.deliberate.get(name, ""),
                )
            )
            continue
        if official is None:
            status = "extra"
        elif ours is None:
            status = "missing"
        else:
            status = "same" if ours == official.value else "differs"
        explanation = "" if status == "same" else facts.deliberate.get(name, "")
        if name == recipe.arch.variable and status == "differs" and arch_value is None:
            # the recipe's own default: explained only by an entry for the default itself
            explanation = facts.deliberate.get(f"{name}:default", "")
        rows.append(
            Difference(
                name,
                status,
                ours,
                official.value if official else None,
                official.source.describe() if official else "",
                explanation,
            )
        )
    if recipe.kind == "pytorch":
        rows.extend(_repair_rows(recipe, variant))
    if not recorded and recipe.kind == "pytorch":
        rows.append(_requirements_row(recipe, variant))
    if variant.cuda != cuda:  # the CUDA wheels of another version: other names, other folders
        why = f"the recipe's CUDA {cuda} comes from other wheels than CUDA {variant.cuda}'s"
        rows = [
            dataclasses.replace(r, explanation=why)
            if r.unexplained and r.variable in (EXTRA_REQUIREMENTS, "[repair] rpath_folders")
            else r
            for r in rows
        ]
    return OfficialComparison(
        recipe.name, release, cuda, variant.key, variant.in_official_matrix, tuple(rows),
        other_cuda=variant.cuda if variant.cuda != cuda else "", env_recorded=recorded,
    )  # fmt: skip


def _repair_rows(recipe: Recipe, variant: OfficialVariant) -> list[Difference]:
    """The repair step against repair_wheel.py: RPATH folders, bundled libraries, tag."""
    spec = spec_for_recipe(recipe)
    source = variant.rpath_source.describe()
    official = {
        "[repair] rpath_folders": ":".join(variant.rpath_folders),
        "[repair] bundle": " ".join(variant.bundle),
        "[repair] platform": variant.platform,
    }
    ours = {
        "[repair] rpath_folders": ":".join(spec.rpath_folders) if spec else None,
        "[repair] bundle": " ".join(spec.bundle) if spec else None,
        "[repair] platform": spec.platform if spec else None,
    }
    rows = []
    for name, value in official.items():
        mine = ours[name]
        status = "same" if mine == value else ("missing" if mine is None else "differs")
        rows.append(Difference(name, status, mine, value, source, ""))
    return rows
