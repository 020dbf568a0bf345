"""A wheel for a CPython this host does not run, judged in a container of the base that has it.

A ``cp313`` wheel on a host whose Python is 3.11 cannot be imported here, and this machine's
libc and libstdc++ (the can-load model's stand-ins for the system libraries) are not those of
the system the wheel was built for. The Debian base whose CPython the wheel's tag names
(``facts/base_pythons.toml``: 3.13 is trixie's) answers both, in one container:

- the image is ``archwheel/debian-python:SUITE`` (``effects.python_bases``):
  ``archwheel/debian:SUITE`` (``archwheel base-image --suite SUITE``) with ``python3`` and
  ``python3-venv`` from the suite's archive, made once (the only step with a network);
- the container runs with ``--network none``, as this user, the wheels mounted read-only: a
  fresh venv, ``pip install --no-index --no-deps`` of the wheel and the ``--with`` wheels (torch
  and what else was given, from the local files), then ``python -I``: ``import torch`` and
  each extension module of the wheel, one by one, each result kept; and the suite's own copies
  of the system libraries the wheel's policy allows are copied out for the model.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from archwheel.effects.engine import ContainerEngine, ContainerSpec, Mount
from archwheel.effects.python_bases import IMAGE_REPOSITORY, ensure_image, host_python, suite_for
from archwheel.errors import ToolError, UsageError
from archwheel.facts.base_pythons import DebianSuite
from archwheel.verdicts.load import LoadReport

__all__ = [
    "IMAGE_REPOSITORY",
    "ImportCheck",
    "can_load_in_base",
    "extension_modules",
    "import_in_container",
]
SYSTEM_FOLDERS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                  "/usr/lib/aarch64-linux-gnu")  # fmt: skip
CHECK_SCRIPT = "archwheel-import-check.py"
MAX_ERROR = 2000  # characters of one import's error kept
TIMEOUT = 600.0  # seconds for the container (a venv, an install of local wheels, imports)
# Run in the container's venv with -I: import torch, then each module; one JSON line at the end.
_CHECK = """\
import importlib, json, sys
results = {"python": "%d.%d" % sys.version_info[:2], "torch": None, "modules": []}
try:
    importlib.import_module("torch")
except BaseException as exc:
    results["torch"] = "%s: %s" % (type(exc).__name__, exc)
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        results["modules"].append([name, None])
    except BaseException as exc:
        results["modules"].append([name, "%s: %s" % (type(exc).__name__, exc)])
print("ARCHWHEEL-IMPORT-CHECK " + json.dumps(results))
"""

Event = Callable[[str], None]


@dataclass(frozen=True)
class ImportCheck:
    """What the container said: the image, its Python, ``import torch``'s error (None: it
    imported), each extension module with its error (None: it imported), and where the suite's
    system libraries were copied (for the model's stand-ins)."""

    image: str
    suite: DebianSuite
    torch_error: str | None
    modules: tuple[tuple[str, str | None], ...]
    libraries: Path

    @property
    def ok(self) -> bool:
        """Whether torch and every extension module imported."""
        return self.torch_error is None and all(error is None for _, error in self.modules)

    def as_dict(self) -> dict[str, object]:
        """The check as the JSON report carries it."""
        return {
            "image": self.image,
            "python": self.suite.python,
            "ok": self.ok,
            "torch_error": self.torch_error,
            "modules": [{"module": m, "error": e} for m, e in self.modules],
        }


def extension_modules(wheel: Path) -> tuple[str, ...]:
    """The dotted names of the wheel's extension modules (``pkg/_ext.cpython-313-....so``)."""
    names: list[str] = []
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            path = PurePosixPath(member)
            parts = path.parts
            if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("platlib", "purelib"):
                parts = parts[2:]  # NAME.data/platlib/pkg/...
            if not path.name.endswith(".so") or parts[0].endswith(".dist-info"):
                continue
            stem = path.name.split(".", 1)[0]
            if path.name.count(".") < 2 or not stem.isidentifier():  # libfoo.so: a library
                continue
            dotted = [*parts[:-1], stem]
            if all(p.isidentifier() for p in dotted):
                names.append(".".join(dotted))
    return tuple(sorted(set(names)))


def _script(wheels: Sequence[str], modules: Sequence[str], libraries: Iterable[str]) -> str:
    """The container's shell: system libraries out, a venv, the local install, the imports."""
    copy = " ".join(f"'{name}'" for name in sorted(libraries))
    folders = " ".join(SYSTEM_FOLDERS)
    install = " ".join(f"'/wheels/{name}'" for name in wheels)
    return (
        "set -e\n"
        f"for n in {copy}; do for d in {folders}; do "
        '[ -f "$d/$n" ] && { cp -L "$d/$n" /out/ ; break; }; done; done\n'
        "python3 -m venv /tmp/venv\n"
        "/tmp/venv/bin/pip install -q --no-index --no-deps --no-cache-dir "
        f"--disable-pip-version-check {install}\n"
        f"cd /tmp && /tmp/venv/bin/python -I /wheels/{CHECK_SCRIPT} {' '.join(modules)}\n"
    )


def import_in_container(
    engine: ContainerEngine,
    wheel: Path,
    with_wheels: Sequence[Path],
    python: str,
    *,
    libraries: Iterable[str],
    out: Path,
    on_event: Event | None = None,
) -> ImportCheck:
    """``wheel`` installed with ``with_wheels`` in a container of the base whose CPython is
    ``python``, then imported (see the module doc); the suite's copies of ``libraries`` land in
    ``out``. ``ToolError`` when the container cannot install them (its output named)."""
    say = on_event or (lambda _line: None)
    suite = suite_for(python, wheel)
    image = ensure_image(engine, suite)
    say(
        f"Python {python}: not this host's ({host_python()}); the import and the system "
        f"libraries are read in {image} ({suite.describe()}), with no network"
    )
    modules = extension_modules(wheel)
    with tempfile.TemporaryDirectory(prefix="archwheel-import-") as folder:
        staged = Path(folder)
        names = []
        for path in (wheel, *with_wheels):
            if path.name in names:
                raise UsageError(f"{path.name} is given twice")
            shutil.copyfile(path, staged / path.name)
            names.append(path.name)
        (staged / CHECK_SCRIPT).write_text(_CHECK)
        out.mkdir(parents=True, exist_ok=True)
        spec = ContainerSpec(
            image=image,
            user=f"{os.getuid()}:{os.getgid()}",
            env={"HOME": "/tmp"},
            mounts=(
                Mount(str(staged), "/wheels", read_only=True),
                Mount(str(out.resolve()), "/out"),
            ),
        )
        name = f"archwheel-import-{os.getpid()}"
        result = engine.run(
            "run", "--rm", *engine.spec_args(spec, name), image,
            "sh", "-c", _script(names, modules, libraries),
            check=False, quiet=True, timeout=TIMEOUT, what="the import check",
        )  # fmt: skip
    marker = "ARCHWHEEL-IMPORT-CHECK "
    lines = [line for line in result.stdout.splitlines() if line.startswith(marker)]
    if result.returncode != 0 or not lines:
        tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-3:]
        raise ToolError(
            f"the import check in {image} failed (exit {result.returncode}): "
            + " | ".join(tail)[:MAX_ERROR],
            hint="a wheel pip cannot install there (its tags, a missing --with wheel) is named "
            "above",
        )
    found = json.loads(lines[-1][len(marker) :])
    return ImportCheck(
        image=image,
        suite=suite,
        torch_error=_cut(found.get("torch")),
        modules=tuple((str(m), _cut(e)) for m, e in found.get("modules", [])),
        libraries=out,
    )


def _cut(error: object) -> str | None:
    return None if error is None else str(error)[:MAX_ERROR]


def can_load_in_base(
    engine: ContainerEngine,
    wheel: Path,
    with_wheels: Sequence[Path],
    python: str,
    *,
    host_libraries: bool = True,
    on_event: Event | None = None,
) -> tuple[LoadReport, ImportCheck]:
    """can-load of a wheel for another Python: the import check in the base that has
    ``python``, and the model with that base's system libraries as the stand-ins."""
    from archwheel.inspection.loading import LOADERS, can_load
    from archwheel.inspection.wheel_files import read_wheel_files
    from archwheel.verdicts.load import policy_for

    policy = policy_for(read_wheel_files(wheel).tags)
    libraries = (policy.libraries | LOADERS) if policy is not None else LOADERS
    with tempfile.TemporaryDirectory(prefix="archwheel-system-") as folder:
        check = import_in_container(
            engine, wheel, with_wheels, python, libraries=libraries, out=Path(folder),
            on_event=on_event,
        )  # fmt: skip
        report = can_load(
            wheel, with_wheels, host_libraries=host_libraries, system_folders=(folder,)
        )
    return report, check
