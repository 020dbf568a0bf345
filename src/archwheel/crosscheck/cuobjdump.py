"""NVIDIA's cuobjdump as an independent oracle: find it, install it on demand, run it.

What its listing means, and how its images are attributed to sections, is the pure
``archwheel.binary.cuobjdump``; this module holds the side effects around it.

cuobjdump is looked up on ``ARCHWHEEL_CUOBJDUMP`` (the ``cuobjdump`` setting), ``PATH``,
``CUDA_HOME``/``CUDA_PATH``, the ``nvidia-cuda-cuobjdump`` wheel in this interpreter's
``site-packages`` (``nvidia/cu13/bin``), ``/usr/local/cuda/bin``, and a venv in archwheel's
cache folder (the ``cache`` setting: ``$ARCHWHEEL_CACHE/archwheel/cuobjdump``) where it is
installed on demand from PyPI. The settings come from the caller (``effects.settings``).
``ARCHWHEEL_CUOBJDUMP``, when set, is the one used: a path that is not an executable file is
a usage error, not skipped.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from archwheel.binary.cuobjdump import (
    NO_DEVICE_CODE,
    CuobjdumpInventory,
    ListedImage,
    attribute_images,
    needs_default_listing,
    parse_listing,
    read_layout,
)
from archwheel.effects.process import (
    CommandResult,
    ProgramNotStarted,
    ProgramTimedOut,
    last_line,
    parse_timeout,
    run_program,
)
from archwheel.effects.settings import Settings
from archwheel.errors import ToolError, UsageError
from archwheel.text import literal

CUOBJDUMP_REQUIREMENT = "nvidia-cuda-cuobjdump>=13,<14"
"""The PyPI wheel installed on demand (13.x reads every target CUDA 13 compiles)."""

DEFAULT_TIMEOUT_S = 900.0
"""Per cuobjdump run. libtorch_cuda.so (500 MB) takes about 17 s on 2 cores; leave room."""

_MAX_OUTPUT_LINE = 4096


class Cuobjdump:
    """One cuobjdump executable. Every run is bounded in time; failures raise ``ToolError``."""

    def __init__(self, executable: Path, *, timeout_s: float | None = None) -> None:
        self.executable = executable
        self.timeout_s = timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S
        self._version: str | None = None

    def __repr__(self) -> str:
        return f"Cuobjdump({str(self.executable)!r})"

    def version(self) -> str:
        """``13.5.37``: the release line of ``cuobjdump --version``."""
        if self._version is None:
            proc = self._run(["--version"], what="--version")
            match = re.search(r"release [\d.]+, V([\d.]+)", proc.stdout)
            self._version = match.group(1) if match else proc.stdout.strip()[-40:]
        return self._version

    def list_images(self, path: Path, *, all_fatbins: bool) -> tuple[ListedImage, ...]:
        """``cuobjdump [-all] -lelf -lptx PATH``; a file without device code gives ``()``."""
        target = path.resolve()  # absolute: a file named "-x" must not read as an option
        args = [*(["-all"] if all_fatbins else []), "-lelf", "-lptx", str(target)]
        proc = self._run(args, what=str(path))
        if proc.returncode == 255 and NO_DEVICE_CODE in proc.stderr:
            return ()
        if proc.returncode != 0:
            output = proc.stderr + "\n" + proc.stdout
            raise ToolError(
                f"cuobjdump failed on {path} (exit {proc.returncode}): "
                f"{last_line(output, limit=_MAX_OUTPUT_LINE)}",
                hint=f"run `{self.executable} -all -lelf -lptx {path}` to see its full output",
            )
        return parse_listing(proc.stdout)

    def inventory(self, path: Path) -> CuobjdumpInventory:
        """Both listings of ``path``, attributed to sections (and to members of an archive)."""
        layout = read_layout(path)
        every = self.list_images(path, all_fatbins=True)
        default: tuple[ListedImage, ...] = ()
        if needs_default_listing(layout):
            default = self.list_images(path, all_fatbins=False)  # the only way to split them
        return attribute_images(path, layout, every, default)

    def _run(self, args: list[str], *, what: str) -> CommandResult:
        try:
            proc = run_program(
                [str(self.executable), *args],
                env={"LC_ALL": "C"},
                echo=None,
                check=False,
                timeout=self.timeout_s,
            )
        except ProgramTimedOut as exc:
            raise ToolError(
                f"cuobjdump did not finish on {what} within {self.timeout_s:g} s",
                hint="raise the limit with ARCHWHEEL_CUOBJDUMP_TIMEOUT (seconds)",
            ) from exc
        except ProgramNotStarted as exc:
            raise ToolError(
                f"cannot run cuobjdump at {self.executable}: {exc.reason}",
                hint="set ARCHWHEEL_CUOBJDUMP to a working cuobjdump, or remove the broken one",
            ) from exc
        if proc.returncode < 0:
            raise ToolError(
                f"cuobjdump was killed by signal {-proc.returncode} on {what}",
                hint="it decompresses every image in memory: large libraries need several GB",
            )
        return proc


def timeout_setting(text: str) -> float:
    """The ``ARCHWHEEL_CUOBJDUMP_TIMEOUT`` setting in seconds (empty: the default); a value
    that is not a time limit (``parse_timeout``) is a ``UsageError``, not silently the
    default."""
    text = text.strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        return parse_timeout(text)
    except ValueError as exc:
        raise UsageError(f"ARCHWHEEL_CUOBJDUMP_TIMEOUT: {exc}") from None


# -- finding and installing it --------------------------------------------------------------------


def install_root(cache: Path) -> Path:
    """Where the on-demand cuobjdump lives: ``cuobjdump/`` in archwheel's cache folder."""
    return cache / "cuobjdump"


def _wheel_binary(site_packages: Path) -> Path:
    return site_packages / "nvidia" / "cu13" / "bin" / "cuobjdump"


def find_cuobjdump(
    settings: Settings,
    environ: Mapping[str, str] | None = None,
    search_path: Sequence[str] | None = None,
) -> Path | None:
    """The first usable cuobjdump, or None: ``settings.cuobjdump`` (which must be one:
    ``explicit_cuobjdump``), else ``PATH``,
    ``CUDA_HOME``/``CUDA_PATH`` (of ``environ``, default this process's), ``search_path``
    (default ``sys.path``), ``/usr/local/cuda``; the cache venv (``settings.cache``) last."""
    env = os.environ if environ is None else environ
    if settings.cuobjdump is not None:
        return explicit_cuobjdump(settings.cuobjdump)
    candidates: list[Path] = []
    on_path = shutil.which("cuobjdump", path=env.get("PATH", os.defpath))
    if on_path:
        candidates.append(Path(on_path))
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(variable):
            candidates.append(Path(env[variable]) / "bin" / "cuobjdump")
    for entry in sys.path if search_path is None else search_path:
        if entry:
            candidates.append(_wheel_binary(Path(entry)))
    candidates.append(Path("/usr/local/cuda/bin/cuobjdump"))
    candidates.extend(CuobjdumpInstaller(install_root(settings.cache)).installed_binaries())
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def explicit_cuobjdump(path: Path) -> Path:
    """``ARCHWHEEL_CUOBJDUMP``, the cuobjdump the user named: an executable regular file, else a
    ``UsageError`` saying what it is (a folder, ``/dev/null``, missing), never skipped for
    another one found elsewhere, nor for an install from the package index."""
    shown = literal(path, 200)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        why = "no such file"
    except OSError as exc:
        why = f"cannot be read: {exc.strerror or exc}"
    else:
        if stat.S_ISDIR(mode):
            why = "a folder, not the cuobjdump program"
        elif not stat.S_ISREG(mode):
            why = "not a regular file"
        elif not os.access(path, os.X_OK):
            why = "not executable"
        else:
            return path
    raise UsageError(
        f"ARCHWHEEL_CUOBJDUMP={shown}: {why}",
        hint="point it at NVIDIA's cuobjdump, or unset it to have archwheel find or install one",
    )


class CuobjdumpInstaller:
    """Installs the ``nvidia-cuda-cuobjdump`` wheel into a venv of its own, once."""

    def __init__(
        self,
        root: Path,
        *,
        python: str = sys.executable,
        requirement: str = CUOBJDUMP_REQUIREMENT,
        timeout_s: float = 600.0,
    ) -> None:
        self.root = root
        self.venv = root / "venv"
        self.python = python
        self.requirement = requirement
        self.timeout_s = timeout_s

    @property
    def _marker(self) -> Path:
        return self.root / "installed.txt"

    def installed_binaries(self) -> list[Path]:
        """The cuobjdump binaries of a completed install (none until its marker is written), so a
        finished venv is reused instead of installed again."""
        if not self._marker.is_file():
            return []
        return sorted(_wheel_binary(p) for p in self.venv.glob("lib*/python*/site-packages"))

    def install(self) -> Path:
        """Install (under a lock, so parallel runs share one venv) and return the binary."""
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = [p for p in self.installed_binaries() if p.is_file()]
            if found:
                return found[0]
            if self.venv.exists():
                shutil.rmtree(self.venv)  # a half-made venv from an interrupted install
            self._step([self.python, "-m", "venv", str(self.venv)], "create a venv")
            self._step(
                [str(self.venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                 "--disable-pip-version-check", "--no-input", self.requirement],
                f"pip install {self.requirement}",
            )  # fmt: skip
            self._marker.write_text(self.requirement + "\n")
            found = [p for p in self.installed_binaries() if p.is_file()]
            if not found:
                raise ToolError(
                    f"{self.requirement} installed into {self.venv} but no cuobjdump in it",
                    hint="the wheel's layout changed; install CUDA's cuobjdump on PATH instead",
                )
            return found[0]

    def _step(self, command: list[str], what: str) -> None:
        try:
            proc = run_program(command, echo=None, check=False, timeout=self.timeout_s)
        except ToolError as exc:  # not found, not startable, or no answer in time
            raise ToolError(
                f"could not {what} for cuobjdump in {self.root}: {exc.message}",
                hint="install nvidia-cuda-cuobjdump yourself or put CUDA's bin on PATH",
            ) from exc
        if proc.returncode != 0:
            raise ToolError(
                f"could not {what} for cuobjdump (exit {proc.returncode}): "
                f"{last_line(proc.stderr or proc.stdout, limit=_MAX_OUTPUT_LINE)}",
                hint="check the package index (pip config), or put CUDA's cuobjdump on PATH",
            )


def ensure_cuobjdump(
    settings: Settings,
    *,
    install: bool = True,
    environ: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> Cuobjdump:
    """Find cuobjdump, installing the PyPI wheel into the cache when allowed and missing; each
    run bounded by ``timeout_s`` (None: the ``cuobjdump_timeout`` setting, else the default)."""
    found = find_cuobjdump(settings, environ)
    if found is None:
        if not install:
            raise ToolError(
                "cuobjdump not found (PATH, CUDA_HOME, site-packages, the archwheel cache)",
                hint=f"pip install '{CUOBJDUMP_REQUIREMENT}', or set ARCHWHEEL_CUOBJDUMP",
            )
        found = CuobjdumpInstaller(install_root(settings.cache)).install()
    if timeout_s is None:
        timeout_s = timeout_setting(settings.cuobjdump_timeout)
    return Cuobjdump(found, timeout_s=timeout_s)
