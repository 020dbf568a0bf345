"""The base image a build's Python is built on, chosen before any container (exit 2 when none).

A recipe names one base image and lists the Pythons it builds for; the base must have each.

- ``archwheel/debian:SUITE`` (made locally by ``archwheel base-image``): the suite's own CPython
  is built there; any other Python of the recipe is built on the archwheel Debian suite that
  packages it (``facts/base_pythons.toml``; made the same way, by debootstrap, when missing). So a
  recipe on ``archwheel/debian:bookworm`` listing 3.11 and 3.13 builds 3.13 on
  ``archwheel/debian:trixie``, and the plan says so. A ``base_image_id`` pin names one image:
  with a pin, only the named suite's Python is built. A Python no suite packages (3.12, a
  free-threaded one) is refused, naming the Pythons the Debian bases offer.
- An image that keeps its CPythons in ``/opt/python`` (manylinux, PyTorch's builders): taken as it
  is; which CPythons it has only the image can say (``docker/provision.sh`` looks there first).
- Any other image: taken as it is; the builder image installs ``pythonX.Y`` with the image's
  package manager, or stops.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from archwheel.errors import RecipeError
from archwheel.facts.base_pythons import DEBIAN_REPOSITORY, BasePythons, load_base_pythons
from archwheel.facts.python_target import PythonTarget
from archwheel.wheelbuild.recipes.recipe_model import Recipe


@dataclass(frozen=True)
class BaseChoice:
    """The image a build runs on, and one line saying why it has the build's Python."""

    image: str
    why: str


def debian_suite(image: str) -> str | None:
    """``bookworm`` for ``archwheel/debian:bookworm``; None for any other image."""
    name, sep, tag = image.partition(":")
    return tag if sep and name == DEBIAN_REPOSITORY else None


def choose_base(recipe: Recipe, python: str, table: BasePythons | None = None) -> BaseChoice:
    """The base image of ``recipe``'s build for ``python`` (a version the recipe lists);
    ``RecipeError`` (exit 2) when no base archwheel can make or use offers it."""
    table = table or load_base_pythons()
    named = recipe.toolchain.base_image
    target = PythonTarget.parse(python)
    suite_name = debian_suite(named)
    if suite_name is None:
        if table.has_opt_python(named):
            return BaseChoice(
                named,
                f"Python {target} from /opt/python/{target.wheel_tag} (looked for when the "
                "builder image is made)",
            )
        return BaseChoice(
            named,
            f"Python {target} from the image, or its package manager (checked when the "
            "builder image is made)",
        )
    suite = table.suite(suite_name)
    if suite is None:  # a suite the table does not know: the builder image will tell
        return BaseChoice(
            named,
            f"Python {target}: Debian {suite_name} is not in archwheel's table; the builder image "
            f"installs python{target.version} or stops",
        )
    if suite.python == str(target):
        return BaseChoice(named, f"{suite.describe()}")
    offered = table.suite_for(python)
    where = f"{recipe.path}: [python] {target}"
    if offered is None:
        why = (
            "Debian's python3 is built with the GIL; a free-threaded CPython is in "
            f"/opt/python/{target.wheel_tag} of a manylinux image"
            if target.free_threaded
            else f"no Debian suite packages it; {target.version} is in /opt/python of a "
            "manylinux image"
        )
        raise RecipeError(
            f"{where}: no base archwheel makes offers Python {target} (archwheel/debian "
            f"offers {table.debian_offers()}): {why}",
            hint=f"build for {_listed(recipe, table) or 'a Python a base offers'}, or set "
            f"[toolchain] base_image to an image that has Python {target}",
        )
    if recipe.toolchain.base_image_id is not None:
        raise RecipeError(
            f"{where}: [toolchain] base_image_id pins {named}, whose Python is {suite.python}; "
            f"Python {target} is on {offered.image}",
            hint=f"build for Python {suite.python}, or drop base_image_id to let Python "
            f"{target} build on {offered.image}",
        )
    return BaseChoice(
        offered.image,
        f"{offered.describe()}: the recipe's {named} has python{suite.python} only",
    )


def _listed(recipe: Recipe, table: BasePythons) -> str:
    """The recipe's Pythons that some Debian base offers: ``3.11, 3.13``."""
    return ", ".join(v for v in recipe.python_versions if table.suite_for(v) is not None)


def with_base_for(recipe: Recipe, python: str) -> tuple[Recipe, BaseChoice]:
    """``recipe`` with ``[toolchain] base_image`` set to the base chosen for ``python``, so every
    later step (the torch wheel's platform, the builder image, provenance) uses that base."""
    choice = choose_base(recipe, python)
    if choice.image == recipe.toolchain.base_image:
        return recipe, choice
    toolchain = dataclasses.replace(recipe.toolchain, base_image=choice.image)
    return dataclasses.replace(recipe, toolchain=toolchain), choice
