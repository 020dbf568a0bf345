"""Isolated environments a smoke test runs in: a fresh venv, a container, or an existing Python.

Each environment is one small class with the same three operations: ``prepare`` (create it and
install the wheels with their requirements), ``command`` (the ``ChildCommand`` that runs the
payload inside it), and ``close`` (remove what it made). All processes are started by the
``Watchdog``, so an install that hangs is killed like a kernel that hangs.

Package indexes: the host's pip configuration (``pip config list``, ``PIP_*`` variables) is
what a venv's pip reads anyway. A container cannot see it, so ``DockerEnvironment`` passes it
through: index URLs and ``find-links`` folders (mounted read-only at the same paths), the
constraint file and the CA bundle (``PIP_CERT``), as cuda-facts/containers-on-ci.md describe.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Protocol

from archwheel.errors import ToolError, UsageError
from archwheel.orchestration.watchdog import ChildCommand, ChildOutcome, ChildStatus, Watchdog

PAYLOAD_NAME = "smoke_payload.py"
DEFAULT_INSTALL_TIMEOUT = 1800.0
CONTAINER_WORKDIR = "/archwheel-smoke"


def payload_source() -> bytes:
    """The payload file shipped as package data (orchestration/data/smoke_payload.py)."""
    data = resources.files("archwheel.orchestration") / "data" / PAYLOAD_NAME
    return data.read_bytes()


@dataclass(frozen=True)
class IndexOptions:
    """Where pip finds the wheels' requirements, beyond the host's own pip configuration."""

    index_url: str | None = None
    find_links: Path | None = None

    def pip_args(self) -> list[str]:
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
        return self.problem is None

    @property
    def no_device(self) -> bool:
        """The engine refused to attach a GPU: a verdict (no CUDA device), not a tool failure."""
        return bool(self.stages) and self.stages[-1][0] == "gpu-attach" and not self.ok


class SmokeEnvironment(Protocol):
    backend: str

    @property
    def description(self) -> str: ...

    def prepare(self, watchdog: Watchdog) -> SetupOutcome: ...

    def command(
        self,
        name: str,
        payload_args: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str],
        unset_env: Sequence[str],
    ) -> ChildCommand: ...

    def snippet_path(self) -> str | None: ...

    def close(self) -> None: ...


def _check_wheels(wheels: Sequence[Path]) -> tuple[Path, ...]:
    resolved: list[Path] = []
    for wheel in wheels:
        if not wheel.is_file():
            raise UsageError(f"wheel not found: {wheel}", hint="give the path of a .whl file")
        if wheel.suffix != ".whl":
            raise UsageError(f"not a wheel: {wheel}", hint="smoke installs .whl files")
        resolved.append(wheel.resolve())
    return tuple(resolved)


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

    def __post_init__(self) -> None:
        self.wheels = _check_wheels(self.wheels)

    @property
    def description(self) -> str:
        return f"venv {self.root / 'venv'}" if self.root else "venv (not created)"

    @property
    def venv_python(self) -> Path:
        assert self.root is not None
        return self.root / "venv" / "bin" / "python"

    def prepare(self, watchdog: Watchdog) -> SetupOutcome:
        self.root = Path(tempfile.mkdtemp(prefix="archwheel-smoke-"))
        (self.root / PAYLOAD_NAME).write_bytes(payload_source())
        if self.snippet is not None:
            shutil.copyfile(self.snippet, self.root / "snippet.py")
        stages: list[tuple[str, ChildOutcome]] = []
        create = ChildCommand(
            "create-venv",
            (self.python, "-m", "venv", str(self.root / "venv")),
            timeout=300,
            expects_result=False,
        )
        stages.append(("create-venv", watchdog.run(create)))
        if not _exited_ok(stages[-1][1]):
            return _failed(stages, "creating the virtual environment failed")
        install = ChildCommand(
            "install",
            (
                str(self.venv_python),
                "-m",
                "pip",
                "install",
                "--no-input",
                "--disable-pip-version-check",
                *self.index.pip_args(),
                *map(str, self.wheels),
            ),
            timeout=self.install_timeout,
            unset_env=("PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV"),
            expects_result=False,
        )
        stages.append(("install", watchdog.run(install)))
        if not _exited_ok(stages[-1][1]):
            return _failed(stages, "installing the wheels failed")
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
        if self.snippet is None or self.root is None:
            return None
        return str(self.root / "snippet.py")

    def close(self) -> None:
        if self.root is not None and not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)


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
        return f"existing interpreter {self.python}"

    def prepare(self, watchdog: Watchdog) -> SetupOutcome:
        self.root = Path(tempfile.mkdtemp(prefix="archwheel-smoke-"))
        (self.root / PAYLOAD_NAME).write_bytes(payload_source())
        if self.snippet is not None:
            shutil.copyfile(self.snippet, self.root / "snippet.py")
        check = ChildCommand(
            "check-python", (self.python, "-c", "import sys"), timeout=120, expects_result=False
        )
        stages = [("check-python", watchdog.run(check))]
        if not _exited_ok(stages[-1][1]):
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
        assert self.root is not None
        argv = (self.python, str(self.root / PAYLOAD_NAME), *payload_args)
        return ChildCommand(
            name, argv, timeout=timeout, env=dict(env), unset_env=tuple(unset_env), cwd=self.root
        )

    def snippet_path(self) -> str | None:
        if self.snippet is None or self.root is None:
            return None
        return str(self.root / "snippet.py")

    def close(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# a container started with --gpus all


@dataclass(frozen=True)
class HostPipConfig:
    """The host's pip settings a container needs to reach the same packages."""

    index_urls: tuple[str, ...] = ()
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    cert: str | None = None

    @classmethod
    def from_pip_config(cls, items: Mapping[str, str]) -> HostPipConfig:
        """From ``pip config list`` entries (``global.find-links`` -> ``'/opt/wheels'``)."""
        found: dict[str, list[str]] = {}
        for key, value in items.items():
            option = key.rsplit(".", 1)[-1]
            found.setdefault(option, []).extend(value.split())
        certs = found.get("cert") or []
        cert = certs[-1] if certs else None
        return cls(
            index_urls=tuple(dict.fromkeys(found.get("index-url", []))),
            extra_index_urls=tuple(dict.fromkeys(found.get("extra-index-url", []))),
            find_links=tuple(dict.fromkeys(found.get("find-links", []))),
            constraints=tuple(dict.fromkeys(found.get("constraint", []))),
            cert=cert,
        )

    def host_paths(self) -> list[str]:
        """Local folders and files to mount read-only at the same path in the container."""
        paths: list[str] = []
        for url in (*self.index_urls, *self.extra_index_urls, *self.find_links):
            path = url.removeprefix("file://") if url.startswith("file://") else url
            if path.startswith("/") and Path(path).exists():
                paths.append(path)
        paths += [p for p in self.constraints if p.startswith("/") and Path(p).exists()]
        if self.cert and Path(self.cert).exists():
            paths.append(self.cert)
        return list(dict.fromkeys(paths))

    def env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        if self.index_urls:
            env["PIP_INDEX_URL"] = self.index_urls[-1]
        if self.extra_index_urls:
            env["PIP_EXTRA_INDEX_URL"] = " ".join(self.extra_index_urls)
        if self.find_links:
            env["PIP_FIND_LINKS"] = " ".join(self.find_links)
        if self.constraints:
            env["PIP_CONSTRAINT"] = " ".join(self.constraints)
        if self.cert:
            env["PIP_CERT"] = self.cert
            env["SSL_CERT_FILE"] = self.cert
        return env


def read_host_pip_config(python: str = sys.executable) -> HostPipConfig:
    """``pip config list`` plus the ``PIP_*`` variables of this process."""
    items: dict[str, str] = {}
    try:
        proc = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        for line in proc.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                items[key.strip()] = value.strip().strip("'\"")
    except (OSError, subprocess.SubprocessError):
        pass
    for name, value in os.environ.items():
        if name.startswith("PIP_"):
            items[f"env.{name[4:].lower().replace('_', '-')}"] = value
    return HostPipConfig.from_pip_config(items)


def docker_command(engine: str) -> str:
    """The container engine CLI, or a ToolError saying how to get one."""
    path = shutil.which(engine)
    if path is None:
        raise ToolError(
            f"couldn't find {engine} in PATH",
            hint="install a container engine, or use --backend venv",
        )
    return path


@dataclass
class DockerEnvironment:
    """A container per step from ``image`` with ``--gpus all``; the venv lives in a bind mount.

    Each step is a fresh ``docker run --rm`` named ``archwheel-smoke-<id>-<step>``, so a hung step
    is ended with ``docker kill`` (killing the client does not stop a container) and CUDA's
    environment is fresh for every attempt. The image must hold ``python3`` with ``venv``.
    """

    wheels: tuple[Path, ...]
    image: str
    index: IndexOptions = field(default_factory=IndexOptions)
    snippet: Path | None = None
    engine: str = "docker"
    # What `--gpus` asks for; "" runs without a GPU request and without the attach check (to
    # exercise the install path on engines without the NVIDIA runtime).
    gpus: str = "all"
    install_timeout: float = DEFAULT_INSTALL_TIMEOUT
    pip_config: HostPipConfig | None = None
    keep: bool = False
    backend: str = "docker"
    root: Path | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:10])

    def __post_init__(self) -> None:
        self.wheels = _check_wheels(self.wheels)
        self.engine_path = docker_command(self.engine)

    @property
    def description(self) -> str:
        return f"{self.engine} image {self.image} (--gpus {self.gpus})"

    def _run_argv(self, name: str, *, gpu: bool, network: str, env: Mapping[str, str]) -> list[str]:
        assert self.root is not None
        argv = [
            self.engine_path,
            "run",
            "--rm",
            "--name",
            self._container_name(name),
            "--network",
            network,
            "--user",
            f"{os.getuid()}:{os.getgid()}",
            "-e",
            "HOME=/tmp",
            "-v",
            f"{self.root}:{CONTAINER_WORKDIR}",
            "-w",
            CONTAINER_WORKDIR,
        ]
        if gpu and self.gpus:
            argv += ["--gpus", self.gpus]
        for i, wheel in enumerate(self.wheels):
            argv += ["-v", f"{wheel}:{CONTAINER_WORKDIR}-wheels/{i}/{wheel.name}:ro"]
        if self.index.find_links:
            argv += [
                "-v",
                f"{self.index.find_links.resolve()}:{self.index.find_links.resolve()}:ro",
            ]
        for key, value in env.items():
            argv += ["-e", f"{key}={value}"]
        return argv

    def _container_name(self, name: str) -> str:
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
        return f"archwheel-smoke-{self.run_id}-{safe}"[:120]

    def _kill(self, name: str) -> None:
        subprocess.run(
            [self.engine_path, "rm", "-f", self._container_name(name)],
            capture_output=True,
            timeout=60,
            check=False,
        )

    def prepare(self, watchdog: Watchdog) -> SetupOutcome:
        self.root = Path(tempfile.mkdtemp(prefix="archwheel-smoke-"))
        self.root.chmod(0o755)
        (self.root / PAYLOAD_NAME).write_bytes(payload_source())
        if self.snippet is not None:
            shutil.copyfile(self.snippet, self.root / "snippet.py")
        stages: list[tuple[str, ChildOutcome]] = []
        if self.gpus:
            problem = self._check_gpu_attach(watchdog, stages)
            if problem is not None:
                return problem
        return self._install(watchdog, stages)

    def _check_gpu_attach(
        self, watchdog: Watchdog, stages: list[tuple[str, ChildOutcome]]
    ) -> SetupOutcome | None:
        # 1. Can the engine give a container a GPU at all? Cheap, and it decides "no CUDA device"
        #    before gigabytes are installed. Any program will do: the GPU request fails first.
        probe_argv = [
            *self._run_argv("gpu-attach", gpu=True, network="none", env={}),
            self.image,
            "python3",
            "-c",
            "pass",
        ]
        stages.append(
            (
                "gpu-attach",
                watchdog.run(
                    ChildCommand(
                        "gpu-attach",
                        tuple(probe_argv),
                        timeout=300,
                        expects_result=False,
                        on_hang=lambda: self._kill("gpu-attach"),
                    )
                ),
            )
        )
        if not _exited_ok(stages[-1][1]):
            return _failed(stages, f"the container engine could not run {self.image} with a GPU")
        return None

    def _install(self, watchdog: Watchdog, stages: list[tuple[str, ChildOutcome]]) -> SetupOutcome:
        # 2. The venv, in the bind mount; pip sees the host's indexes through the passthrough.
        pip = self.pip_config if self.pip_config is not None else read_host_pip_config()
        pip_env = pip.env()
        wheel_paths = [
            f"{CONTAINER_WORKDIR}-wheels/{i}/{w.name}" for i, w in enumerate(self.wheels)
        ]
        script = (
            f"python3 -m venv {CONTAINER_WORKDIR}/venv && "
            f"{CONTAINER_WORKDIR}/venv/bin/python -m pip install --no-input "
            f"--disable-pip-version-check {' '.join(self.index.pip_args())} "
            f"{' '.join(wheel_paths)}"
        )
        install_argv = self._run_argv("install", gpu=False, network="host", env=pip_env)
        for path in pip.host_paths():
            install_argv += ["-v", f"{path}:{path}:ro"]
        install_argv += [self.image, "sh", "-c", script]
        stages.append(
            (
                "install",
                watchdog.run(
                    ChildCommand(
                        "install",
                        tuple(install_argv),
                        timeout=self.install_timeout,
                        expects_result=False,
                        on_hang=lambda: self._kill("install"),
                    )
                ),
            )
        )
        if not _exited_ok(stages[-1][1]):
            return _failed(stages, "installing the wheels in the container failed")
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
        # The result file lives in the bind mount; the watchdog's {result} placeholder names a
        # host path, so the payload writes to the mount and the runner reads it back.
        args = [
            a.replace("{result}", f"{CONTAINER_WORKDIR}/result-{name}.json") for a in payload_args
        ]
        argv = [
            *self._run_argv(name, gpu=True, network="none", env=env),
            self.image,
            f"{CONTAINER_WORKDIR}/venv/bin/python",
            "-I",
            f"{CONTAINER_WORKDIR}/{PAYLOAD_NAME}",
            *args,
        ]
        assert self.root is not None
        return ChildCommand(
            name,
            tuple(argv),
            timeout=timeout,
            on_hang=lambda: self._kill(name),
            result_file=self.root / f"result-{name}.json",
        )

    def snippet_path(self) -> str | None:
        return f"{CONTAINER_WORKDIR}/snippet.py" if self.snippet is not None else None

    def close(self) -> None:
        if self.root is not None and not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
