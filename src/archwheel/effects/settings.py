"""archwheel's settings: every ``ARCHWHEEL_*`` variable the host side reads, read once.

A ``Settings`` is frozen and made at the edge: the interfaces floor calls
``Settings.from_environ(os.environ)`` (and a command option given on the command line wins over
its variable: CLI > environment > defaults); every floor below takes the object, or the one
value it needs, as a parameter and never reads the environment for an ``ARCHWHEEL_*`` name
(``tests/unit/test_settings_read_once.py``). ``Settings()`` is the defaults alone, what a
library caller gets when it passes none.

The variables archwheel *sets* in a build container (``ARCHWHEEL_SRC``, ``ARCHWHEEL_DIST``, ...)
are not settings. One switch stays where it is read: ``ARCHWHEEL_PURE_PYTHON``
(``binary/speedups.py``), read when the scanner is imported, in the command's process and in
each of the scan's worker processes alike, which inherit the environment and no object.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from archwheel.effects import paths
from archwheel.errors import UsageError
from archwheel.text import literal, switch_value

VARIABLES: Mapping[str, str] = MappingProxyType(
    {
        "cache": "ARCHWHEEL_CACHE",
        "root": "ARCHWHEEL_ROOT",
        "recipes": "ARCHWHEEL_RECIPES",
        "keep_containers": "ARCHWHEEL_KEEP_CONTAINERS",
        "run_label": "ARCHWHEEL_RUN_LABEL",
        "podman_runtime": "ARCHWHEEL_PODMAN_RUNTIME",
        "cache_url": "ARCHWHEEL_CACHE_URL",
        "dist_scheduler": "ARCHWHEEL_DIST_SCHEDULER",
        "dist_token_file": "ARCHWHEEL_DIST_TOKEN_FILE",
        "dist_required": "ARCHWHEEL_DIST_REQUIRED",
        "debian_mirror": "ARCHWHEEL_DEBIAN_MIRROR",
        "cuobjdump": "ARCHWHEEL_CUOBJDUMP",
        "cuobjdump_timeout": "ARCHWHEEL_CUOBJDUMP_TIMEOUT",
        "debug": "ARCHWHEEL_DEBUG",
        "net_timeout": "ARCHWHEEL_NET_TIMEOUT",
        "net_run_timeout": "ARCHWHEEL_NET_RUN_TIMEOUT",
    }
)
"""Each field of ``Settings`` and the variable it is read from."""

SWITCHES: tuple[str, ...] = (
    VARIABLES["keep_containers"],
    VARIABLES["debug"],
    VARIABLES["dist_required"],
    "ARCHWHEEL_PURE_PYTHON",  # read by binary/speedups.py itself, at import
)
"""The boolean settings: each written ``1``/``true``/``yes`` or ``0``/``false``/``no``
(``text.switch_value``), the same way for every one; anything else is a ``UsageError``."""


def switch_setting(variable: str, environ: Mapping[str, str]) -> bool:
    """The boolean setting ``variable`` of ``environ`` (unset or empty: off); a value that is
    not a switch is a ``UsageError`` naming the variable, never read as on or off."""
    text = environ.get(variable, "")
    value = switch_value(text)
    if value is None:
        raise UsageError(
            f"{variable}='{literal(text, 40)}': not a switch",
            hint="write 1, true or yes to turn it on; 0, false, no or nothing to leave it off",
        )
    return value


def check_switches(environ: Mapping[str, str]) -> None:
    """Every boolean setting of ``environ`` is written as a switch (``switch_setting``): the
    command line checks them before any command runs, those it reads or not."""
    for variable in SWITCHES:
        switch_setting(variable, environ)


def _default_cache() -> Path:
    return paths.cache_dir(None)


@dataclass(frozen=True)
class Settings:
    """The host-side settings of one run, resolved (see ``VARIABLES`` for their variables)."""

    # archwheel's one cache folder: $ARCHWHEEL_CACHE/archwheel, else $XDG_CACHE_HOME/archwheel,
    # else ~/.cache/archwheel (effects.paths.cache_dir)
    cache: Path = field(default_factory=_default_cache)
    root: str | None = None  # the archwheel checkout; None: found from the package or cwd
    recipes: tuple[Path, ...] = ()  # recipe folders searched before the checkout's own
    keep_containers: bool = False  # keep containers after they end (for debugging); a switch
    run_label: str | None = None  # an extra label on every container (e.g. for tests)
    podman_runtime: str | None = None  # podman's --runtime; None: runc when on PATH, "": none
    cache_url: str | None = None  # the remote compiler cache (build --cache-url's default)
    # the compile farm (build --dist-scheduler/--dist-token-file/--dist-required's defaults):
    # the token file's path only, never the token (read where the plan is made)
    dist_scheduler: str | None = None
    dist_token_file: Path | None = None
    dist_required: bool = False  # a switch
    debian_mirror: str | None = None  # the base image's Debian mirror (--mirror's default)
    cuobjdump: Path | None = None  # the cuobjdump to use, before any other found
    cuobjdump_timeout: str = ""  # per cuobjdump run, as written (checked where it is used)
    debug: bool = False  # errors raise with their traceback instead of one line; a switch
    # network reads (effects.deadline.NetLimits.from_settings), as written: per request, to the
    # end of its headers; per run, every request together
    net_timeout: str = ""
    net_run_timeout: str = ""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """The settings ``environ`` gives (an unset or empty variable: the default); a boolean
        setting that is not a switch (``switch_setting``) is a ``UsageError``."""

        def text(name: str) -> str | None:
            return environ.get(VARIABLES[name]) or None

        def switch(name: str) -> bool:
            return switch_setting(VARIABLES[name], environ)

        explicit = text("cuobjdump")
        return cls(
            cache=paths.cache_dir(text("cache") or environ.get("XDG_CACHE_HOME") or None),
            root=text("root"),
            recipes=tuple(Path(p) for p in (text("recipes") or "").split(os.pathsep) if p),
            keep_containers=switch("keep_containers"),
            run_label=text("run_label"),
            # Set but empty means "no --runtime" here, not the default.
            podman_runtime=environ.get(VARIABLES["podman_runtime"]),
            cache_url=text("cache_url"),
            dist_scheduler=text("dist_scheduler"),
            dist_token_file=Path(token_file) if (token_file := text("dist_token_file")) else None,
            dist_required=switch("dist_required"),
            debian_mirror=text("debian_mirror"),
            cuobjdump=Path(explicit) if explicit else None,
            cuobjdump_timeout=environ.get(VARIABLES["cuobjdump_timeout"], "").strip(),
            debug=switch("debug"),
            net_timeout=environ.get(VARIABLES["net_timeout"], "").strip(),
            net_run_timeout=environ.get(VARIABLES["net_run_timeout"], "").strip(),
        )

    def recipe_dirs(self) -> list[Path]:
        """The recipe folders: ``recipes``, then the checkout's own (``paths.recipe_dirs``)."""
        return paths.recipe_dirs(self.recipes, self.root)

    def docker_dir(self) -> Path:
        """The checkout's builder image files (``paths.docker_dir``)."""
        return paths.docker_dir(self.root)
