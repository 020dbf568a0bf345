"""The build requirements a Debian source package declares: its ``Build-Depends``.

A recipe whose source is a Debian source package can have the packages its control file lists
installed into the builder image (``[toolchain] build_depends = "debian/control.cuda"``), so the
build finds the system libraries Debian builds against (Debian strips PyTorch's third_party
submodules: ``USE_SYSTEM_LIBS=ON`` needs them). The install runs where the builder image is
provisioned, with the network; the compile container stays without it.

Read here, from the unpacked source, as Debian policy 7.1 writes them: the first paragraph's
``Build-Depends``, ``Build-Depends-Arch`` and ``Build-Depends-Indep`` (field names in any case,
continuation lines, ``#`` comment lines); relations separated by commas, alternatives by ``|``
(the first that applies is taken, as Debian's build daemons do); an architecture list
(``[amd64 arm64]``, ``[!s390x]``) decides for the image's architecture; restriction lists
(``<!nocheck>``) are evaluated with no build profile active; ``:any`` and ``:native`` are dropped;
the version constraint is kept for the record (the base's own suite serves the package).

The names reach ``apt-get install`` in the builder image: each must be a Debian package name
(policy 5.6.1), else the control file is refused in one line. A recipe's ``build_depends_exclude``
removes packages archwheel must not install (Debian's CUDA toolkit when the toolkit comes from the
package index; an installer that downloads at install time).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from archwheel.effects.files import open_regular
from archwheel.errors import RecipeError
from archwheel.facts.debian_names import PACKAGE
from archwheel.wheelbuild.recipes.recipe_model import Recipe

FIELDS = ("build-depends", "build-depends-arch", "build-depends-indep")
MAX_CONTROL_BYTES = 1024 * 1024
_RELATION = re.compile(
    r"^(?P<name>[^\s:(\[<]+)(?::(?P<qual>[a-z0-9\-]+))?\s*"
    r"(?:\((?P<version>[^)]*)\))?\s*"
    r"(?:\[(?P<archs>[^\]]*)\])?\s*"
    r"(?P<profiles>(?:<[^>]*>\s*)*)$"
)
_PROFILE_GROUP = re.compile(r"<([^>]*)>")


@dataclass(frozen=True)
class BuildDepends:
    """What a control file asks to install, for one architecture, and what was left out."""

    control: str  # the file, relative to the source root
    packages: tuple[str, ...]  # to install, in the file's order, each once
    constraints: tuple[tuple[str, str], ...]  # (package, "(>= 3.6.0~)") as written
    excluded: tuple[str, ...]  # named by the recipe and found in the file
    not_for_arch: tuple[str, ...]  # relations whose architecture or profile list left them out

    def row(self) -> str:
        """The plan's line."""
        text = f"{len(self.packages)} packages from the source's {self.control}"
        if self.excluded:
            text += f" (left out by the recipe: {', '.join(self.excluded)})"
        return text


def read_build_depends(
    root: Path, control: str, *, exclude: tuple[str, ...] = (), arch: str = "amd64"
) -> BuildDepends:
    """The ``Build-Depends`` of ``root/control`` for ``arch``; RecipeError in one line when the
    file is missing, too large, or names what is not a Debian package."""
    path = root / control
    if not path.resolve().is_relative_to(root.resolve()):
        raise RecipeError(f"[toolchain] build_depends: {control} leads out of the source")
    try:
        with open_regular(path) as handle:
            data = handle.read(MAX_CONTROL_BYTES + 1)
    except OSError as exc:
        raise RecipeError(
            f"[toolchain] build_depends: the source has no readable {control} "
            f"({exc.strerror or exc})",
            hint="name the control file inside the unpacked source, e.g. debian/control",
        ) from None
    if len(data) > MAX_CONTROL_BYTES:
        raise RecipeError(f"[toolchain] build_depends: {control} is over {MAX_CONTROL_BYTES} bytes")
    text = data.decode("utf-8", errors="replace")
    return parse_build_depends(text, control, exclude=exclude, arch=arch)


def parse_build_depends(
    text: str, control: str, *, exclude: tuple[str, ...] = (), arch: str = "amd64"
) -> BuildDepends:
    """``read_build_depends`` on the control file's text."""
    fields = _source_paragraph(text)
    relations: list[str] = []
    for name in FIELDS:
        value = fields.get(name, "")
        relations += [item.strip() for item in value.split(",") if item.strip()]
    if not relations:
        raise RecipeError(f"[toolchain] build_depends: {control} declares no Build-Depends")
    packages: list[str] = []
    constraints: list[tuple[str, str]] = []
    excluded: list[str] = []
    skipped: list[str] = []
    for relation in relations:
        chosen = _first_applicable(relation, control, arch)
        if chosen is None:
            skipped.append(relation)
            continue
        package, version = chosen
        if package in exclude:
            if package not in excluded:
                excluded.append(package)
            continue
        if package not in packages:
            packages.append(package)
            if version:
                constraints.append((package, f"({version})"))
    missing = [name for name in exclude if name not in excluded]
    if missing:
        raise RecipeError(
            f"[toolchain] build_depends_exclude names {', '.join(missing)}, which {control} "
            "does not ask for",
            hint="list only packages of its Build-Depends (a misspelt name would leave one in)",
        )
    return BuildDepends(
        control, tuple(packages), tuple(constraints), tuple(excluded), tuple(skipped)
    )


def _source_paragraph(text: str) -> dict[str, str]:
    """The first paragraph's fields, lower-case names, continuation lines joined."""
    fields: dict[str, str] = {}
    current: str | None = None
    started = False
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if started:
                break
            continue
        started = True
        if line[0] in " \t":
            if current is not None:
                fields[current] += " " + line.strip()
            continue
        name, sep, value = line.partition(":")
        if not sep:
            continue
        current = name.strip().lower()
        fields[current] = value.strip()
    return fields


def _first_applicable(relation: str, control: str, arch: str) -> tuple[str, str] | None:
    """The first alternative of ``relation`` that applies to ``arch`` with no profile active:
    (package, version constraint), or None when none does."""
    for alternative in relation.split("|"):
        match = _RELATION.match(alternative.strip())
        if match is None:
            raise RecipeError(
                f"[toolchain] build_depends: {control} has a relation archwheel cannot read: "
                f"{alternative.strip()[:80]!r}"
            )
        name = match["name"]
        if not PACKAGE.match(name):
            raise RecipeError(
                f"[toolchain] build_depends: {control} names {name[:80]!r}, which is not a "
                "Debian package name"
            )
        if match["archs"] is not None and not _arch_applies(match["archs"], arch):
            continue
        if not _profiles_apply(match["profiles"] or ""):
            continue
        return name, " ".join((match["version"] or "").split())
    return None


def _arch_applies(archs: str, arch: str) -> bool:
    """policy 7.1: all positive (one must match) or all negated (none may match)."""
    words = archs.split()
    matches = {arch, "any", "linux-any", f"any-{arch}", f"linux-{arch}"}
    if all(word.startswith("!") for word in words):
        return not any(word[1:] in matches for word in words)
    return any(word in matches for word in words)


def _profiles_apply(profiles: str) -> bool:
    """No build profile active: a ``<...>`` group holds when each term is negated; the
    relation applies when any group holds (or there is none)."""
    groups = _PROFILE_GROUP.findall(profiles)
    if not groups:
        return True
    return any(all(term.startswith("!") for term in group.split()) for group in groups)


def with_build_depends(recipe: Recipe, source: Path) -> tuple[Recipe, BuildDepends | None]:
    """The recipe with its source's Build-Depends added to ``[toolchain] system_packages``
    (installed where the builder image is provisioned), and what was read; the recipe as it is
    when it names no control file."""
    toolchain = recipe.toolchain
    if toolchain.build_depends is None:
        return recipe, None
    depends = read_build_depends(
        source, toolchain.build_depends, exclude=toolchain.build_depends_exclude
    )
    own = toolchain.system_packages
    packages = (*own, *(name for name in depends.packages if name not in own))
    changed = dataclasses.replace(toolchain, system_packages=packages)
    return dataclasses.replace(recipe, toolchain=changed), depends
