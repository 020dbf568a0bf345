"""Isolated environments a smoke test runs in: a fresh venv, a container, or an existing Python.

Each environment is one small class with the same three operations: ``prepare`` (create it and
install the wheels with their requirements), ``command`` (the ``ChildCommand`` that runs the
payload inside it), and ``close`` (remove what it made). All processes are started by the
``Watchdog``, so an install that hangs is killed like a kernel that hangs.

Package indexes: the host's pip configuration (``pip config list``, ``PIP_*`` variables) is
what a venv's pip reads anyway. A container cannot see it, so ``ContainerEnvironment`` passes it
through with the build's ``pipconfig.PipSettings``: index URLs and ``find-links`` folders
(mounted read-only at the same paths), the CA bundle (``PIP_CERT``) and, for smoke only, the
constraint files, as containers-on-ci.md items 5 and 9 describe.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Protocol

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.binary.zipread import WheelReader
from archwheel.effects.engine import ContainerEngine, ContainerSpec, Mount
from archwheel.effects.owner import (
    owned_tempdir,
    remove_dead_folders,
    remove_owned,
    unmark_folder,
)
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.process import quote_command
from archwheel.effects.watchdog import ChildCommand, ChildOutcome, ChildStatus, Watchdog
from archwheel.errors import ArchwheelError, InputError, UsageError
from archwheel.smoke.base_venvs import (
    BASES,
    base_folder,
    base_key,
    is_complete,
    link_tree,
    publish_base,
    requirements_of,
    staging_folder,
)
from archwheel.verdicts.wheelname import HINT as WHEEL_NAME_HINT
from archwheel.verdicts.wheelname import name_version_disagreement

PAYLOAD_NAME = "smoke_payload.py"
DEFAULT_INSTALL_TIMEOUT = 1800.0
CONTAINER_WORKDIR = "/archwheel-smoke"
SMOKE_LABEL = "org.archwheel.smoke"  # on every smoke container, with the run id


def payload_source() -> bytes:
    """The payload file shipped as package data (smoke/data/smoke_payload.py)."""
    data = resources.files("archwheel.smoke") / "data" / PAYLOAD_NAME
    return data.read_bytes()


@dataclass(frozen=True)
class IndexOptions:
    """Where pip finds the wheels' requirements, beyond the host's own pip configuration."""

    index_url: str | None = None
    find_links: Path | None = None

    def pip_args(self) -> list[str]:
        """pip's ``--index-url`` and ``--find-links`` options for these settings (none when
        unset)."""
        args: list[str] = []
        if self.index_url:
            args += ["--index-url", self.index_url]
        if self.find_links:
            args += ["--find-links", str(self.find_links)]
        return args


@dataclass(frozen=True)
class SetupOutcome:
    """How preparing an environment went: one stage per step, the first failure stops it."""

    stages: tuple[tuple[str, ChildOutcome], ...]
    problem: str | None = None  # one line when it failed

    @property
    def ok(self) -> bool:
        """Every setup stage succeeded, so the probe and the steps can run."""
        return self.problem is None

    @property
    def no_device(self) -> bool:
        """The engine refused to attach a GPU: a verdict (no CUDA device), not a tool failure."""
        return bool(self.stages) and self.stages[-1][0] == "gpu-attach" and not self.ok


class SmokeEnvironment(Protocol):
    """Where smoke runs its payload: a fresh venv, an existing interpreter or a container per step.
    ``run_smoke`` prepares it, asks it for each step's command, and closes it."""

    backend: str

    @property
    def description(self) -> str:
        """One line naming the environment, for the report."""

    def prepare(self, watchdog: Watchdog) -> SetupOutcome:
        """Make the environment ready (create, install, check), each stage under ``watchdog``; a
        failed stage ends it."""

    def command(
        self,
        name: str,
        payload_args: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str],
        unset_env: Sequence[str],
    ) -> ChildCommand:
        """The command that runs the payload with ``payload_args`` for step ``name`` in this
        environment."""

    def snippet_path(self) -> str | None:
        """The path where the payload finds the user's snippet, None without one."""

    def close(self) -> None:
        """Remove what ``prepare`` made (unless asked to keep it); safe to call when it was not
        prepared."""


def _check_wheels(wheels: Sequence[Path]) -> tuple[Path, ...]:
    """The wheels as pip will get them: each a regular file with a wheel's name whose zip holds
    a ``.dist-info/WHEEL``. A bad one is the user's input (exit 2 or 3), not pip's failure."""
    resolved: list[Path] = []
    for wheel in wheels:
        if not wheel.exists():
            raise UsageError(f"wheel not found: {wheel}", hint="give the path of a .whl file")
        if wheel.suffix != ".whl":
            raise UsageError(f"not a wheel: {wheel}", hint="smoke installs .whl files")
        try:
            parse_wheel_filename(wheel.name)
        except InvalidWheelFilename as exc:
            raise UsageError(
                f"{wheel}: not a wheel's file name ({exc})",
                hint="NAME-VERSION-PYTHON-ABI-PLATFORM.whl, as the build or pip made it",
            ) from None
        # only a regular file that is a readable zip (InputError otherwise)
        names = [m.name for m in WheelReader(wheel).members]
        if not any(n.count("/") == 1 and n.endswith(".dist-info/WHEEL") for n in names):
            raise InputError(f"{wheel}: not a wheel (no .dist-info/WHEEL in the archive)")
        meta = read_wheel_metadata(wheel)
        disagreement = name_version_disagreement(meta.filename, meta.name, meta.version)
        if disagreement is not None:  # pip would refuse it: the input, not pip's failure
            raise InputError(f"{wheel}: {disagreement}", hint=WHEEL_NAME_HINT)
        resolved.append(wheel.resolve())
    return tuple(resolved)


def check_interpreter(python: str) -> str:
    """``--interpreter``: an executable regular file (a command name is looked up on PATH)."""
    found = shutil.which(python) if os.sep not in python else python
    path = Path(found) if found else None
    try:
        ok = path is not None and stat.S_ISREG(path.stat().st_mode) and os.access(path, os.X_OK)
    except OSError:
        ok = False
    if not ok:
        raise UsageError(
            f"--interpreter {python}: not an executable Python interpreter",
            hint="the path of a python in the environment to test, e.g. /opt/venv/bin/python",
        )
    return str(path)


def _telling_line(lines: Sequence[str]) -> str:
    """The last line that reports an error (pip's ``ERROR:``, docker's ``Error response``),
    else the last line: tools end with advice ("Run 'docker run --help'") more than with causes.
    """
    kept = [ln.strip() for ln in lines if ln.strip()]
    for line in reversed(kept):
        if "error" in line.lower():
            return line
    return kept[-1] if kept else ""


def _failed(stages: list[tuple[str, ChildOutcome]], what: str) -> SetupOutcome:
    name, outcome = stages[-1]
    if outcome.status is ChildStatus.HANG:
        why = f"did not finish within {outcome.problem and outcome.problem.split('within ')[-1]}"
    elif outcome.problem and outcome.status is not ChildStatus.EXITED:
        why = outcome.problem
    else:
        why = f"exited with code {outcome.returncode}"
    lines = [*outcome.stdout_tail.splitlines(), *outcome.stderr_tail]
    last = _telling_line(lines)
    tail = f": {last}" if last else ""
    return SetupOutcome(tuple(stages), problem=f"{what} ({name}) {why}{tail}")


def _new_workdir(snippet: Path | None) -> Path:
    """A new temporary folder holding the payload, and the snippet as ``snippet.py`` if given."""
    root = owned_tempdir("archwheel-smoke-")
    (root / PAYLOAD_NAME).write_bytes(payload_source())
    if snippet is not None:
        shutil.copyfile(snippet, root / "snippet.py")
    return root


def _host_snippet_path(root: Path | None, snippet: Path | None) -> str | None:
    """Where the payload finds the snippet when it runs on this host."""
    if snippet is None or root is None:
        return None
    return str(root / "snippet.py")


def _remove_workdir(root: Path | None, *, keep: bool = False) -> None:
    if root is None:
        return
    if keep:
        unmark_folder(root)  # kept on purpose: not a leftover for the next run to remove
    else:
        remove_owned(root)


def _run_stage(
    watchdog: Watchdog, stages: list[tuple[str, ChildOutcome]], command: ChildCommand
) -> bool:
    """Run one setup stage under ``watchdog``, record it, and say whether it exited with 0."""
    stages.append((command.name, watchdog.run(command)))
    return _exited_ok(stages[-1][1])


# --------------------------------------------------------------------------------------------
# a fresh virtual environment


@dataclass
class VenvEnvironment:
    """A new venv in a temporary folder, the wheels installed into it with pip."""

    wheels: tuple[Path, ...]
    index: IndexOptions = field(default_factory=IndexOptions)
    snippet: Path | None = None
    python: str = sys.executable
    install_timeout: float = DEFAULT_INSTALL_TIMEOUT
    keep: bool = False
    backend: str = "venv"
    root: Path | None = None
    # Where the kept base venvs live (smoke/base_venvs.py); None: a fresh venv every run.
    base_cache: Path | None = None
    reused: bool = False  # the venv is a copy of a kept base

    def __post_init__(self) -> None:
        self.wheels = _check_wheels(self.wheels)

    @property
    def description(self) -> str:
        """The venv's path, and whether it is a copy of a kept base venv."""
        if not self.root:
            return "venv (not created)"
        kept = " (a copy of a kept base venv: its requirements were installed before)"
        return f"venv {self.root / 'venv'}{kept if self.reused else ''}"

    @property
    def venv_python(self) -> Path:
        """The interpreter of the prepared venv."""
        assert self.root is not None
        return self.root / "venv" / "bin" / "python"

    def prepare(self, watchdog: Watchdog) -> SetupOutcome:
        """Create the venv (or copy a kept base venv) in a new temporary folder and install the
        wheels with pip."""
        self.root = _new_workdir(self.snippet)
        stages: list[tuple[str, ChildOutcome]] = []
        venv = self.root / "venv"
        if self.base_cache is not None:
            failed = self._from_base(watchdog, stages, venv)
            if failed is not None:
                return failed
        elif not _run_stage(watchdog, stages, self._create(venv)):
            return _failed(stages, "creating the virtual environment failed")
        install = self._pip_install(self.venv_python, tuple(map(str, self.wheels)), "install")
        if not _run_stage(watchdog, stages, install):
            return _failed(stages, "installing the wheels failed")
        return SetupOutcome(tuple(stages))

    def _create(self, venv: Path) -> ChildCommand:
        return ChildCommand(
            "create-venv", (self.python, "-m", "venv", str(venv)), timeout=300,
            expects_result=False,
        )  # fmt: skip

    def _pip_install(self, python: Path, what: Sequence[str], name: str) -> ChildCommand:
        return ChildCommand(
            name,
            (str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
             *self.index.pip_args(), *what),
            timeout=self.install_timeout,
            unset_env=("PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV"),
            expects_result=False,
        )  # fmt: skip

    def _from_base(
        self, watchdog: Watchdog, stages: list[tuple[str, ChildOutcome]], venv: Path
    ) -> SetupOutcome | None:
        """The wheels' requirements from a kept base venv (made here the first time), copied
        into ``venv`` as hard links; a ``SetupOutcome`` only when that failed."""
        assert self.base_cache is not None
        requirements = requirements_of(self.wheels)
        base = base_folder(
            self.base_cache, base_key(self.python, requirements, self.index.pip_args())
        )
        if not is_complete(base):
            remove_dead_folders(self.base_cache / BASES)
            staged = staging_folder(self.base_cache)
            try:
                if not _run_stage(watchdog, stages, self._create(staged / "venv")):
                    return _failed(stages, "creating the base virtual environment failed")
                python = staged / "venv" / "bin" / "python"
                if requirements and not _run_stage(
                    watchdog, stages, self._pip_install(python, requirements, "install-base")
                ):
                    return _failed(stages, "installing the wheels' requirements failed")
                publish_base(staged, base)
            finally:
                if staged.exists():
                    remove_owned(staged)
        else:
            self.reused = True
        link_tree(base / "venv", venv)
        return None

    def command(
        self,
        name: str,
        payload_args: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str],
        unset_env: Sequence[str],
    ) -> ChildCommand:
        """Run the payload with the venv's Python in isolated mode, so the host's ``PYTHONPATH`` and
        user site do not leak in."""
        assert self.root is not None
        # -I: isolated mode. The host's PYTHONPATH and user site must not leak into the test.
        argv = (str(self.venv_python), "-I", str(self.root / PAYLOAD_NAME), *payload_args)
        return ChildCommand(
            name,
            argv,
            timeout=timeout,
            env=dict(env),
            unset_env=(*unset_env, "PYTHONPATH", "PYTHONHOME"),
            cwd=self.root,
        )

    def snippet_path(self) -> str | None:
        """The snippet's copy in the temporary folder, None without one."""
        return _host_snippet_path(self.root, self.snippet)

    def close(self) -> None:
        """Remove the temporary folder and its venv (kept, unmarked, with ``keep``)."""
        _remove_workdir(self.root, keep=self.keep)


def _exited_ok(outcome: ChildOutcome) -> bool:
    return outcome.status is ChildStatus.EXITED and outcome.returncode == 0


# --------------------------------------------------------------------------------------------
# an existing interpreter (the deployment as it is): nothing is installed


@dataclass
class ExistingEnvironment:
    """Runs the payload with a Python that already holds torch; installs nothing."""

    python: str
    snippet: Path | None = None
    backend: str = "existing"
    root: Path | None = None

    @property
    def description(self) -> str:
        """The interpreter tested, as given."""
        return f"existing interpreter {self.python}"

    def prepare(self, watchdog: Watchdog) -> SetupOutcome:
        """Copy the payload to a temporary folder and check that the interpreter runs; nothing is
        installed."""
        self.root = _new_workdir(self.snippet)
        check = ChildCommand(
            "check-python", (self.python, "-c", "import sys"), timeout=120, expects_result=False
        )
        stages: list[tuple[str, ChildOutcome]] = []
        if not _run_stage(watchdog, stages, check):
            return _failed(stages, f"the interpreter {self.python} cannot run")
        return SetupOutcome(tuple(stages))

    def command(
        self,
        name: str,
        payload_args: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str],
        unset_env: Sequence[str],
    ) -> ChildCommand:
        """Run the payload with the existing interpreter, in the temporary folder."""
        assert self.root is not None
        argv = (self.python, str(self.root / PAYLOAD_NAME), *payload_args)
        return ChildCommand(
            name, argv, timeout=timeout, env=dict(env), unset_env=tuple(unset_env), cwd=self.root
        )

    def snippet_path(self) -> str | None:
        """The snippet's copy in the temporary folder, None without one."""
        return _host_snippet_path(self.root, self.snippet)

    def close(self) -> None:
        """Remove the temporary folder."""
        _remove_workdir(self.root)


# --------------------------------------------------------------------------------------------
# a container per step, from an image, with the GPUs attached (docker or podman)


def _not_started(name: str, problem: str, seconds: float = 0.0) -> ChildOutcome:
    return ChildOutcome(name=name, status=ChildStatus.NOT_STARTED, seconds=seconds, problem=problem)


@dataclass
class ContainerEnvironment:
    """A container per step from ``image`` with the GPUs attached; the venv lives in a bind mount.

    Everything engine-specific (the program and its global flags, the GPU request, removing a
    container, the version check) goes through ``engine`` (``effects.engine``), so docker
    and podman behave alike. Each step is a fresh foreground ``run`` named
    ``archwheel-smoke-<id>-<step>`` under the watchdog: a hung step is ended by name with
    ``ContainerEngine.stop_container`` (killing the client does not stop a container), and
    CUDA's environment is fresh for every attempt. The image must hold ``python3`` with ``venv``.
    """

    wheels: tuple[Path, ...]
    image: str
    engine: ContainerEngine
    index: IndexOptions = field(default_factory=IndexOptions)
    snippet: Path | None = None
    install_timeout: float = DEFAULT_INSTALL_TIMEOUT
    # None: the host's pip configuration (``PipSettings.from_host``), read when preparing.
    pip: PipSettings | None = None
    keep: bool = False
    # TEST ONLY, never set by the command line: run every container without asking the engine
    # for a GPU and skip the gpu-attach check, so CI machines without the NVIDIA runtime can
    # exercise the install path and the probe. The real path (GPUs requested) is the default.
    no_gpu_request_for_tests: bool = False
    backend: str = "docker"
    root: Path | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:10])

    def __post_init__(self) -> None:
        self.wheels = _check_wheels(self.wheels)
        # Paths a mount cannot carry (',' or '=') are refused now, as usage errors.
        for mount in self._input_mounts():
            mount.flag()

    @property
    def description(self) -> str:
        """The engine and image, and whether GPUs are requested."""
        gpus = "no GPU requested: test mode" if self.no_gpu_request_for_tests else "GPUs: all"
        return f"{self.engine.name} image {self.image} ({gpus})"

    # -- how each container is started --------------------------------------------------------
    def _input_mounts(self) -> list[Mount]:
        mounts = [
            Mount(str(wheel), self._wheel_target(i, wheel), read_only=True)
            for i, wheel in enumerate(self.wheels)
        ]
        if self.index.find_links is not None:
            folder = str(self.index.find_links.resolve())
            mounts.append(Mount(folder, folder, read_only=True))
        return mounts

    @staticmethod
    def _wheel_target(index: int, wheel: Path) -> str:
        return f"{CONTAINER_WORKDIR}-wheels/{index}/{wheel.name}"

    def _container_name(self, step: str) -> str:
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in step)
        return f"archwheel-smoke-{self.run_id}-{safe}"[:120]

    def _run_argv(
        self,
        step: str,
        command: Sequence[str],
        *,
        gpu: bool,
        network: str,
        env: Mapping[str, str],
        extra_mounts: Sequence[Mount] = (),
    ) -> list[str]:
        assert self.root is not None
        mounts: dict[str, Mount] = {}
        for mount in (
            Mount(str(self.root), CONTAINER_WORKDIR),
            *self._input_mounts(),
            *extra_mounts,
        ):
            mounts.setdefault(mount.target, mount)  # one mount per target
        spec = ContainerSpec(
            image=self.image,
            network=network,
            user=f"{os.getuid()}:{os.getgid()}",
            workdir=CONTAINER_WORKDIR,
            mounts=tuple(mounts.values()),
            env={"HOME": "/tmp", **env},
            labels={SMOKE_LABEL: self.run_id},
            gpus="all" if gpu and not self.no_gpu_request_for_tests else None,
        )
        argv = self.engine.run_command(spec, command, name=self._container_name(step))
        if self.engine.echo:
            self.engine.echo(quote_command([self.engine.settings.program, *argv[1:]]))
        return argv

    def _child(
        self, step: str, argv: Sequence[str], *, timeout: float, result_file: Path | None = None
    ) -> ChildCommand:
        name = self._container_name(step)
        return ChildCommand(
            step,
            tuple(argv),
            timeout=timeout,
            env=dict(self.engine.settings.env),  # for the engine's client (CONTAINERS_CONF)
            on_hang=lambda: self.engine.stop_container(name),
            expects_result=result_file is not None,
            result_file=result_file,
        )

    # -- prepare --------------------------------------------------------------------------------
    def prepare(self, watchdog: Watchdog) -> SetupOutcome:
        """Check the engine, check that it can attach a GPU (no device is a verdict, decided before
        anything is installed), then install the wheels into a venv in the bind mount."""
        self.root = _new_workdir(self.snippet)
        self.root.chmod(0o755)
        stages: list[tuple[str, ChildOutcome]] = []
        problem = self._check_engine(stages)
        if problem is None and not self.no_gpu_request_for_tests:
            problem = self._check_gpu_attach(watchdog, stages)
        return problem or self._install(watchdog, stages)

    def _check_engine(self, stages: list[tuple[str, ChildOutcome]]) -> SetupOutcome | None:
        """The engine is installed, answers, and is new enough (``ContainerEngine.version``)."""
        started = time.monotonic()
        try:
            version = self.engine.version()
        except ArchwheelError as exc:
            seconds = time.monotonic() - started
            stages.append(("engine", _not_started("engine", exc.one_line(), seconds)))
            return _failed(stages, f"the container engine {self.engine.name} cannot be used")
        stages.append(
            (
                "engine",
                ChildOutcome(
                    name="engine",
                    status=ChildStatus.EXITED,
                    seconds=time.monotonic() - started,
                    returncode=0,
                    stdout_tail=f"{self.engine.name} {version}",
                ),
            )
        )
        return None

    def _check_gpu_attach(
        self, watchdog: Watchdog, stages: list[tuple[str, ChildOutcome]]
    ) -> SetupOutcome | None:
        # Can the engine give a container a GPU at all? Cheap, and it decides "no CUDA device"
        # before gigabytes are installed. Any program will do: the GPU request fails first.
        argv = self._run_argv(
            "gpu-attach", ("python3", "-c", "pass"), gpu=True, network="none", env={}
        )
        if _run_stage(watchdog, stages, self._child("gpu-attach", argv, timeout=300)):
            return None
        outcome = stages[-1][1]
        if outcome.status is ChildStatus.EXITED and outcome.returncode == 127:
            # 127: the container was set up (GPU included) but python3 is not in the image:
            # the image is wrong, not the GPU. (126 is no such proof: podman reports an
            # unresolvable CDI GPU device with it.)
            stages[-1] = ("image-check", outcome)
            return _failed(stages, f"the image {self.image} cannot run python3")
        return _failed(stages, f"the container engine could not run {self.image} with a GPU")

    def _install(self, watchdog: Watchdog, stages: list[tuple[str, ChildOutcome]]) -> SetupOutcome:
        # The venv, in the bind mount; pip sees the host's indexes through the passthrough
        # (pipconfig.PipSettings: local folders and the CA bundle mounted read-only, PIP_*).
        try:
            pip = (self.pip if self.pip is not None else PipSettings.from_host()).override(
                index_url=self.index.index_url,
                find_links=[str(self.index.find_links.resolve())] if self.index.find_links else [],
            )
            pip = pip.validated()
            mounts = (*pip.mounts(), *pip.constraint_mounts())
            env = {**pip.container_env(), **pip.constraint_env()}
        except ArchwheelError as exc:
            stages.append(("install", _not_started("install", exc.one_line())))
            return _failed(stages, "installing the wheels in the container failed")
        wheel_paths = [self._wheel_target(i, w) for i, w in enumerate(self.wheels)]
        script = (
            f"python3 -m venv {CONTAINER_WORKDIR}/venv && "
            f"{CONTAINER_WORKDIR}/venv/bin/python -m pip install --no-input "
            f"--disable-pip-version-check {shlex.join(wheel_paths)}"
        )
        argv = self._run_argv(
            "install",
            ("sh", "-c", script),
            gpu=False,
            network="host",
            env=env,
            extra_mounts=mounts,
        )
        install = self._child("install", argv, timeout=self.install_timeout)
        if not _run_stage(watchdog, stages, install):
            return _failed(stages, "installing the wheels in the container failed")
        return SetupOutcome(tuple(stages))

    # -- the steps ------------------------------------------------------------------------------
    def command(
        self,
        name: str,
        payload_args: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str],
        unset_env: Sequence[str],
    ) -> ChildCommand:
        """A fresh container for step ``name`` with the GPUs attached and no network, running the
        payload from the venv in the bind mount."""
        # A container's environment is the image's plus ``env``: the host's variables (and so
        # ``unset_env``) never reach it. The result file lives in the bind mount: the payload
        # writes it at the container path, the watchdog reads it at the host path.
        assert self.root is not None
        args = [
            a.replace("{result}", f"{CONTAINER_WORKDIR}/result-{name}.json") for a in payload_args
        ]
        payload = (
            f"{CONTAINER_WORKDIR}/venv/bin/python",
            "-I",
            f"{CONTAINER_WORKDIR}/{PAYLOAD_NAME}",
        )
        argv = self._run_argv(name, (*payload, *args), gpu=True, network="none", env=env)
        return self._child(
            name, argv, timeout=timeout, result_file=self.root / f"result-{name}.json"
        )

    def snippet_path(self) -> str | None:
        """The snippet's path inside the container, None without one."""
        return f"{CONTAINER_WORKDIR}/snippet.py" if self.snippet is not None else None

    def close(self) -> None:
        """Remove the bind-mounted work folder (kept, unmarked, with ``keep``)."""
        _remove_workdir(self.root, keep=self.keep)
