"""The keys of a recipe that builds from a Debian source package: the suite whose archive
serves it (``[source] suite``, else the ``archwheel/debian`` base's), the control file whose
Build-Depends the builder image gets (``[toolchain] build_depends``, ``build_depends_exclude``;
read by ``sources/debian_depends.py`` once the source is unpacked), the archive components
they come from (``[toolchain] apt_components``) and the empty packages installed in the place of
what the recipe provides otherwise (``[toolchain] stand_ins``)."""

from __future__ import annotations

import dataclasses
import re

from archwheel.facts.base_pythons import DEBIAN_REPOSITORY
from archwheel.facts.debian_names import PACKAGE as DEBIAN_PACKAGE
from archwheel.facts.documents import Table
from archwheel.wheelbuild.recipes.recipe_doc import ToolchainDoc
from archwheel.wheelbuild.recipes.recipe_model import SourceSpec, ToolchainSpec


def debian_suite(source: SourceSpec, toolchain: ToolchainSpec, table: Table) -> SourceSpec:
    """A Debian source's suite: the recipe's, else that of its ``archwheel/debian`` base."""
    if source.kind != "debian" or source.suite is not None:
        return source
    name, sep, tag = toolchain.base_image.partition(":")
    if not (sep and name == DEBIAN_REPOSITORY):
        raise table.fail(
            "suite",
            f"missing: the base image {toolchain.base_image} is not an archwheel/debian one",
            hint='name the Debian suite whose archive serves the package, e.g. "trixie"',
        )
    return dataclasses.replace(source, suite=tag)


_COMPONENT = re.compile(r"[a-z][a-z0-9-]{0,39}\Z")  # main, contrib, non-free, non-free-firmware


def debian_keys(
    doc: ToolchainDoc, toolchain: ToolchainSpec, source: SourceSpec, table: Table
) -> ToolchainSpec:
    """``build_depends``: a control file inside a Debian source package's unpacked tree;
    ``apt_components``: the archive components its packages come from."""
    for component in doc.apt_components:
        if not _COMPONENT.match(component):
            raise table.fail("apt_components", f"{component!r} is not an archive component")
    for name in doc.stand_ins:
        if not DEBIAN_PACKAGE.match(name):
            raise table.fail("stand_ins", f"{name!r} is not a Debian package name")
    toolchain = dataclasses.replace(
        toolchain, apt_components=doc.apt_components, stand_ins=doc.stand_ins
    )
    control = doc.build_depends
    if control is None:
        if doc.build_depends_exclude:
            raise table.fail("build_depends_exclude", "only valid with build_depends")
        return toolchain
    if not source.debian:
        raise table.fail("build_depends", "only valid with a [source] debian package")
    parts = control.split("/")
    if control.startswith("/") or ".." in parts or "" in parts:
        raise table.fail("build_depends", f"{control!r} is not a file inside the source")
    for name in doc.build_depends_exclude:
        if not DEBIAN_PACKAGE.match(name):
            raise table.fail("build_depends_exclude", f"{name!r} is not a Debian package name")
    return dataclasses.replace(
        toolchain, build_depends=control, build_depends_exclude=doc.build_depends_exclude
    )
