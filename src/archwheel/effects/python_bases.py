"""Which base runs a wheel for a CPython this host does not: the wheel's Python, the Debian
suite that packages it (``facts/base_pythons.toml``), and that suite's image with ``python3``
and ``python3-venv`` (``archwheel/debian-python:SUITE``, made once from ``archwheel/debian:SUITE``
with the suite's archive; the only step of a check that needs a network). can-load's import
check (``inspection.python_container``) and smoke's container environment both start there.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from archwheel.effects.engine import ContainerEngine
from archwheel.errors import ToolError, UsageError
from archwheel.facts.base_pythons import DebianSuite, load_base_pythons

IMAGE_REPOSITORY = "archwheel/debian-python"


def host_python() -> str:
    """This interpreter's ``X.Y``."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def wheel_python(tags: Iterable[str]) -> str | None:
    """The CPython ``X.Y`` a wheel's tags are built for (``cp313-cp313-...``: 3.13); None for
    a wheel that names none of its own (abi3, ``py3-none``)."""
    for tag in tags:
        python, _, rest = tag.partition("-")
        abi = rest.partition("-")[0]
        if python.startswith("cp3") and python[3:].isdigit() and abi in (python, python + "t"):
            return f"3.{python[3:]}" + ("t" if abi.endswith("t") else "")
    return None


def other_python(tags: Iterable[str]) -> str | None:
    """The wheel's CPython when it is not this host's (None: this host's is among its tags, or
    it names none)."""
    pythons = [p for tag in tags if (p := wheel_python([tag])) is not None]
    return pythons[0] if pythons and host_python() not in pythons else None


def other_python_of(wheel: Path) -> str | None:
    """The CPython of ``wheel``'s file name when it is not this host's (None: this host's, a
    name that is no wheel's, or a wheel that names none)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        tags = parse_wheel_filename(wheel.name)[3]
    except InvalidWheelFilename:
        return None
    return other_python(str(tag) for tag in tags)


def suite_for(python: str, wheel: Path) -> DebianSuite:
    """The Debian base whose CPython is ``python``; ``UsageError`` naming those there are."""
    table = load_base_pythons()
    suite = table.suite_for(python)
    if suite is None:
        raise UsageError(
            f"{wheel.name}: built for Python {python}, which neither this host "
            f"({host_python()}) nor a base archwheel makes offers ({table.debian_offers()})",
            hint="judge it on a machine with that Python (can-load --installed --interpreter PY)",
        )
    return suite


def ensure_image(engine: ContainerEngine, suite: DebianSuite) -> str:
    """``archwheel/debian-python:SUITE``, made from ``archwheel/debian:SUITE`` when missing
    (apt-get over the network, once); ``ToolError`` when the base itself is missing."""
    tag = f"{IMAGE_REPOSITORY}:{suite.suite}"
    if engine.image_id(tag) is not None:
        return tag
    if engine.image_id(suite.image) is None:
        raise ToolError(
            f"{suite.image} is not on this machine: the {suite.describe()} base is made by "
            "archwheel",
            hint=f"archwheel base-image --suite {suite.suite}",
        )
    with tempfile.TemporaryDirectory(prefix="archwheel-pybase-") as folder:
        dockerfile = Path(folder) / "Dockerfile"
        dockerfile.write_text(
            f"FROM {suite.image}\n"
            "RUN apt-get update && apt-get install -y --no-install-recommends python3 "
            "python3-venv && rm -rf /var/lib/apt/lists/*\n"
        )
        engine.build_image(Path(folder), tag, dockerfile=dockerfile)
    return tag
