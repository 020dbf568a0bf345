"""Which smoke environment and steps a run gets, from its options (``archwheel smoke``'s flags,
or a library caller's): the checks that refuse a combination that cannot work, before anything
is installed, and the environment object that does the work (``environments``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from archwheel.effects.engine import ContainerEngine, EngineSettings
from archwheel.effects.process import Echo
from archwheel.effects.python_bases import ensure_image, host_python, other_python_of, suite_for
from archwheel.effects.settings import Settings
from archwheel.errors import UsageError
from archwheel.smoke.environments import (
    ContainerEnvironment,
    ExistingEnvironment,
    IndexOptions,
    SmokeEnvironment,
    VenvEnvironment,
    check_interpreter,
)
from archwheel.verdicts.smoke import KERNEL_STEPS


@dataclass(frozen=True)
class EnvironmentOptions:
    """Where the wheels are installed and the kernels run: ``backend`` venv (a fresh venv
    from ``interpreter``, default this one), docker (containers of ``image`` under ``engine``)
    or existing (``interpreter`` as it is, nothing installed)."""

    wheels: tuple[Path, ...]
    backend: str
    install_timeout: float
    index_url: str | None = None
    find_links: Path | None = None
    snippet: Path | None = None
    interpreter: str | None = None
    image: str | None = None
    engine: str = "docker"
    keep: bool = False
    fresh_venv: bool = False  # venv: no kept base venv (smoke/base_venvs.py)
    settings: Settings = field(default_factory=Settings)  # the engine's (and its cache folder)


def positive_seconds(value: float, flag: str) -> float:
    """``value`` when it is above 0; else a ``UsageError`` naming ``flag``."""
    if not value > 0:
        raise UsageError(f"{flag} must be a positive number of seconds, not {value:g}")
    return value


def kernel_steps(text: str | None) -> tuple[str, ...]:
    """The kernel steps of a comma list (all of ``KERNEL_STEPS`` when empty)."""
    if not text:
        return KERNEL_STEPS
    steps = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in steps if s not in KERNEL_STEPS]
    if unknown or not steps:
        raise UsageError(
            f"unknown smoke step {', '.join(unknown) or '(none)'}",
            hint=f"choose from {','.join(KERNEL_STEPS)}",
        )
    return steps


def _other_python(options: EnvironmentOptions) -> tuple[str, Path] | None:
    """The first wheel's Python where it is not this host's and no --interpreter was given."""
    if options.interpreter:
        return None
    for wheel in options.wheels:
        python = other_python_of(wheel)
        if python is not None:
            return python, wheel
    return None


def make_environment(options: EnvironmentOptions, echo: Echo | None) -> SmokeEnvironment:
    """The environment ``options`` ask for; ``UsageError`` for one that cannot work (no
    wheels to install, wheels for an existing interpreter, docker without an image, a snippet
    or a find-links folder that does not exist). The venv backend given a wheel for a CPython
    this host does not run (and no --interpreter) runs in containers of the Debian base that
    has it (``effects.python_bases``: ``archwheel/debian-python:trixie`` for cp313), said in
    one line."""
    if options.snippet is not None and not options.snippet.is_file():
        raise UsageError(f"smoke snippet not found: {options.snippet}")
    if options.find_links is not None and not options.find_links.is_dir():
        raise UsageError(f"--find-links folder not found: {options.find_links}")
    index = IndexOptions(index_url=options.index_url, find_links=options.find_links)
    install_timeout = positive_seconds(options.install_timeout, "--install-timeout")
    if options.backend == "existing":
        if options.wheels:
            raise UsageError(
                "--backend existing installs nothing; "
                "it tests the interpreter given by --interpreter",
                hint="drop the wheels, or use --backend venv",
            )
        if not options.interpreter:
            raise UsageError(
                "--backend existing needs --interpreter PATH (an interpreter with torch)"
            )
        return ExistingEnvironment(
            python=check_interpreter(options.interpreter), snippet=options.snippet
        )
    if not options.wheels:
        raise UsageError(
            "no wheels given",
            hint="archwheel smoke WHEEL... (or --backend existing --interpreter PY)",
        )
    backend, image = options.backend, options.image
    other = _other_python(options) if backend == "venv" else None
    if other is not None:  # a wheel for a Python this host does not run: its Debian base
        python, wheel = other
        settings = EngineSettings.create(options.engine, options.settings)
        image = ensure_image(ContainerEngine(settings, echo=echo), suite_for(python, wheel))
        backend = "docker"
        if echo is not None:
            echo(
                f"{wheel.name} is for Python {python}, not this host's ({host_python()}): "
                f"smoke runs in containers of {image} (--backend docker)"
            )
    if backend == "docker":
        if not image:
            raise UsageError(
                "--backend docker needs --image IMAGE (an image with python3 and venv)",
                hint="the builder image has them (`archwheel build` makes it)",
            )
        settings = EngineSettings.create(options.engine, options.settings)
        return ContainerEnvironment(
            wheels=options.wheels,
            image=image,
            engine=ContainerEngine(settings, echo=echo),
            index=index,
            snippet=options.snippet,
            install_timeout=install_timeout,
            keep=options.keep,
        )
    return VenvEnvironment(
        wheels=options.wheels,
        index=index,
        snippet=options.snippet,
        python=check_interpreter(options.interpreter) if options.interpreter else sys.executable,
        install_timeout=install_timeout,
        keep=options.keep,
        base_cache=None if options.fresh_venv else options.settings.cache,
    )
