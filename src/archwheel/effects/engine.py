"""The container engine (docker or podman) behind one small class.

``EngineSettings`` (defined in ``engine_settings``, named here too) is a frozen description of
the engine: which program, which global flags and environment it needs. Docker and podman
differ only in that object.

``ContainerEngine`` runs engine commands (images, volumes, version); ``Container`` is a context
manager for one long-lived container in which steps run with ``exec``. ``run_command`` gives the
argv of a one-shot ``run`` for a caller that supervises the process itself (smoke's watchdog),
and ``stop_container`` ends such a container by name when that process hangs. Each container gets a
unique ``archwheel-<random>`` name and the ``archwheel`` label, and is removed in ``__exit__``
whatever happened (an exception, Ctrl-C, SIGTERM turned into ``SystemExit`` by
``sigterm_as_exit``), unless ``ARCHWHEEL_KEEP_CONTAINERS=1`` asks to keep it for debugging.

Every command is echoed as ``+ docker ...`` in shell quoting before it runs.

Hand-written for a measured reason: the docker CLI, not the Docker SDK, because podman is served
by the same argv (the SDK speaks the Docker API only), every step can be echoed and re-run by
hand, and the SDK would add requests and its API version handshake to each build's start.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, MappingProxyType, TracebackType
from typing import IO

from archwheel.effects.engine_settings import ENGINES as ENGINES  # noqa: PLC0414
from archwheel.effects.engine_settings import EngineName as EngineName  # noqa: PLC0414
from archwheel.effects.engine_settings import EngineSettings as EngineSettings  # noqa: PLC0414
from archwheel.effects.engine_settings import parse_version
from archwheel.effects.held import HOLD_SCRIPT, release, start_held
from archwheel.effects.owner import OWNER_LABEL, Owner, current_owner, liveness
from archwheel.effects.process import (
    CommandResult,
    Echo,
    LineSink,
    Popen,
    echo_to_stderr,
    find_program,
    last_line,
    quote_command,
    run_program,
    stream_lines,
)
from archwheel.errors import BuildError, ToolError, UsageError
from archwheel.exit_codes import EXIT_TERMINATED

CONTAINER_PREFIX = "archwheel-"
LABEL = "archwheel"
KEEP_ENV = "ARCHWHEEL_KEEP_CONTAINERS"  # named in messages; read into settings.Settings
MIN_VERSIONS: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {"docker": (20, 10), "podman": (3, 0)}
)

# -- the engine ---------------------------------------------------------------------------------


# What the engine may be handed as an image and as a named volume. Both go into the engine's
# argv: an image "--privileged" or "-v/:/host" would be read as a flag (the flags end at the
# image), a volume "/etc" as a bind mount of the host's folder.
_IMAGE_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}")
_VOLUME_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{1,127}")


def check_volume_name(name: str) -> str:
    """``name`` when Docker and podman take it as a named volume's; else ``UsageError``."""
    if not _VOLUME_NAME.fullmatch(name):
        raise UsageError(
            f"{name[:80]!r} is not a volume name (letters, digits, '_', '.', '-'; 2 to 128 "
            "characters, starting with a letter or digit)"
        )
    return name


def check_image_reference(image: str) -> str:
    """``image`` when it is an image reference (name[:tag][@digest]); else ``UsageError``."""
    if not _IMAGE_REFERENCE.fullmatch(image):
        raise UsageError(f"{image[:80]!r} is not an image reference (NAME[:TAG][@DIGEST])")
    return image


@dataclass(frozen=True)
class Mount:
    """A bind mount (``source`` is a host path) or a named volume (``volume=True``)."""

    source: str
    target: str
    read_only: bool = False
    volume: bool = False

    def flag(self) -> list[str]:
        """The ``--mount`` arguments of ``run``; ``UsageError`` for a path the syntax cannot
        carry (a ``,`` or ``=``) or a volume name the engine would refuse."""
        for value in (self.source, self.target):
            if "," in value or "=" in value:
                raise UsageError(
                    f"cannot mount {value!r}: paths with ',' or '=' are not supported",
                    hint="move or link it to a path without them",
                )
        if self.volume:
            check_volume_name(self.source)
        kind = "volume" if self.volume else "bind"
        text = f"type={kind},source={self.source},target={self.target}"
        if self.read_only:
            text += ",readonly"
        return ["--mount", text]


@dataclass(frozen=True)
class ContainerSpec:
    """How to start one container: image, network, user, mounts, environment."""

    image: str
    network: str = "none"  # "none" or "host"
    user: str | None = None  # "uid:gid"
    workdir: str | None = None
    mounts: tuple[Mount, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    gpus: str | None = None  # attach GPUs ("all"): EngineSettings.gpu_args


class ContainerEngine:
    """Engine-level commands: version, images, volumes. Containers come from ``container()``."""

    def __init__(self, settings: EngineSettings, *, echo: Echo | None = echo_to_stderr) -> None:
        self.settings = settings
        self.echo = echo
        self._version: str | None = None
        self.owner = current_owner()
        self._swept = False

    @property
    def name(self) -> str:
        """``docker`` or ``podman``, as messages and engine-specific choices use it."""
        return self.settings.name

    def run(
        self,
        *args: str,
        check: bool = True,
        quiet: bool = False,
        input_bytes: bytes | None = None,
        stdin: IO[bytes] | None = None,
        timeout: float | None = None,
        what: str = "",
    ) -> CommandResult:
        """Run one engine command (``docker ARGS``) to completion, echoed unless ``quiet``;
        a non-zero exit is a ``ToolError`` when ``check``."""
        self.program_path()
        return run_program(
            self.settings.command(*args),
            env=self.settings.env,
            echo=None if quiet else self.echo,
            check=check,
            input_bytes=input_bytes,
            stdin=stdin,
            timeout=timeout,
            what=what or f"{self.name} {args[0]}",
        )

    def program_path(self) -> str:
        """The engine program's full path; a ``ToolError`` saying how to install it if absent."""
        hint = (
            "install docker.io and start dockerd (see .ci/setup-engine.sh), or pass --engine podman"
            if self.name == "docker"
            else "install podman (apt-get install podman), or pass --engine docker"
        )
        return find_program(self.settings.program, hint=hint)

    def version(self) -> str:
        """The engine (server) version; ToolError if the engine is missing or does not answer."""
        if self._version is not None:
            return self._version
        fmt = "{{.Server.Version}}" if self.name == "docker" else "{{.Version}}"
        result = self.run("version", "--format", fmt, check=False, quiet=True, timeout=60)
        text = result.stdout.strip()
        if result.returncode != 0 or not text or text.startswith("<no value>"):
            hint = (
                "start the daemon (`dockerd --bridge=none &`, see .ci/setup-engine.sh)"
                if self.name == "docker"
                else "check `podman info`"
            )
            raise ToolError(
                f"{self.name} is installed but does not answer: "
                f"{last_line(result.stderr or result.stdout)}",
                hint=hint,
            )
        found = parse_version(text)
        needed = MIN_VERSIONS[self.name]
        if found < needed:
            raise ToolError(
                f"{self.name} {text} is too old; archwheel needs "
                f"{'.'.join(map(str, needed))} or newer"
            )
        self._version = text
        return text

    # -- images -------------------------------------------------------------------------------
    def image_id(self, reference: str) -> str | None:
        """The image ID (``sha256:...``) of a local image, or None when it is absent."""
        result = self.run(
            "image", "inspect", "--format", "{{.Id}}", reference, check=False, quiet=True
        )
        if result.returncode != 0:
            return None
        text = result.stdout.strip()
        return text if text.startswith("sha256:") else f"sha256:{text}"

    def image_labels(self, reference: str) -> dict[str, str]:
        """The labels of a local image (``image inspect``); ``ToolError`` when it is absent."""
        result = self.run(
            "image", "inspect", "--format", "{{json .Config.Labels}}", reference, quiet=True
        )
        data = json.loads(result.stdout.strip() or "null")
        return {str(k): str(v) for k, v in (data or {}).items()}

    def repo_digests(self, reference: str) -> list[str]:
        """Registry digests of a pulled image (``name@sha256:...``); empty for local images."""
        result = self.run(
            "image", "inspect", "--format", "{{json .RepoDigests}}", reference,
            check=False, quiet=True,
        )  # fmt: skip
        if result.returncode != 0:
            return []
        data = json.loads(result.stdout.strip() or "null") or []
        return sorted(str(d) for d in data)

    def pull(self, reference: str) -> None:
        """Pull an image from its registry; ``ToolError`` when the pull fails."""
        self.run("pull", reference, what=f"{self.name} pull {reference}")

    def import_rootfs(self, tarball: Path, tag: str, changes: Sequence[str] = ()) -> str:
        """``docker import`` a root file system tarball as ``tag``; returns the image ID."""
        args = ["import"]
        for change in changes:
            args += ["--change", change]
        with tarball.open("rb") as handle:
            self.run(*args, "-", tag, stdin=handle, what=f"{self.name} import")
        image = self.image_id(tag)
        if image is None:
            raise ToolError(f"{self.name} import did not produce image {tag}")
        return image

    def build_image(
        self,
        context: Path,
        tag: str,
        *,
        dockerfile: Path | None = None,
        build_args: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        network: str = "host",
        sink: LineSink | None = None,
    ) -> str:
        """Build an image from a context folder (network host, for package mirrors).

        ``--force-rm``: docker's legacy builder otherwise leaves the container of a failed
        step behind (seen with Docker 20.10: a stopped container per failed build).
        """
        args = ["build", "--force-rm", "--network", network, "--tag", tag]
        if dockerfile is not None:
            args += ["--file", str(dockerfile)]
        for key, value in sorted((build_args or {}).items()):
            args += ["--build-arg", f"{key}={value}"]
        for key, value in sorted((labels or {}).items()):
            args += ["--label", f"{key}={value}"]
        args.append(str(context))
        code, tail = self.stream(args, sink=sink)
        if code != 0:
            raise BuildError(
                f"building image {tag} failed (exit {code}): {tail}",
                hint="the full output is in the build log",
            )
        image = self.image_id(tag)
        if image is None:
            raise BuildError(f"{self.name} build did not produce image {tag}")
        return image

    def remove_image(self, reference: str) -> None:
        """Remove a local image, forced; an absent image is no error."""
        self.run("image", "rm", "--force", reference, check=False, quiet=True)

    # -- volumes ------------------------------------------------------------------------------
    def volume_exists(self, name: str) -> bool:
        """Whether the named volume exists."""
        return self.run("volume", "inspect", name, check=False, quiet=True).returncode == 0

    def ensure_volume(self, name: str) -> None:
        """Create the named volume, labelled as archwheel's, unless it exists."""
        if not self.volume_exists(name):
            self.run("volume", "create", "--label", LABEL, name, what="creating volume")

    def remove_volume(self, name: str) -> None:
        """Remove the named volume, forced; an absent volume is no error."""
        self.run("volume", "rm", "--force", name, check=False, quiet=True)

    # -- containers ---------------------------------------------------------------------------
    def container(self, spec: ContainerSpec) -> Container:
        """A ``Container`` for ``spec``, not yet started: use it as a ``with`` block."""
        return Container(self, spec)

    def spec_args(self, spec: ContainerSpec, name: str) -> list[str]:
        """``run`` flags for ``spec``: name, labels, network, user, workdir, mounts, env, GPUs.
        The image, which follows them, is checked here (``check_image_reference``)."""
        check_image_reference(spec.image)
        args = ["--name", name, "--label", LABEL, "--label", f"{OWNER_LABEL}={self.owner.token()}"]
        for key, value in sorted(spec.labels.items()):
            args += ["--label", f"{key}={value}"]
        if self.settings.run_label:
            args += ["--label", self.settings.run_label]
        args += ["--network", spec.network]
        if spec.user:
            args += ["--user", spec.user]
        if spec.workdir:
            args += ["--workdir", spec.workdir]
        for mount in spec.mounts:
            args += mount.flag()
        for key, value in sorted(spec.env.items()):
            args += ["--env", f"{key}={value}"]
        if spec.gpus:
            args += self.settings.gpu_args(spec.gpus)
        return args

    def run_command(self, spec: ContainerSpec, command: Sequence[str], *, name: str) -> list[str]:
        """The full argv (program path first) of a foreground ``run`` of ``command``.

        For a caller that starts and supervises the process itself (smoke's watchdog). The
        container is removed when it ends (``--rm``), unless ARCHWHEEL_KEEP_CONTAINERS keeps it.
        Killing this process does not stop the container: end it with ``stop_container(name)``.
        """
        args = ["run"]
        if not self.settings.keep_containers:
            args.append("--rm")
        args += [*self.spec_args(spec, name), spec.image, *command]
        full = self.settings.command(*args)
        full[0] = self.program_path()
        return full

    def stop_container(self, name: str) -> None:
        """End a container now: removed, or only killed when ARCHWHEEL_KEEP_CONTAINERS is set."""
        if not self.settings.keep_containers:
            self.remove_container(name)
            return
        with contextlib.suppress(ToolError):
            self.run("kill", name, check=False, quiet=True, timeout=120)
        if self.echo:
            self.echo(
                f"archwheel: keeping container {name} ({KEEP_ENV} is set); "
                f"remove it with `{self.settings.program} rm -f {name}`"
            )

    def remove_container(self, name: str) -> None:
        """Remove a container whatever its state; a missing one is fine."""
        for attempt in range(2):
            try:
                # podman waits 10 s for SIGTERM first, which `sleep` as PID 1 ignores.
                grace = ("--time", "0") if self.name == "podman" else ()
                self.run("rm", "--force", *grace, name, check=False, quiet=True, timeout=120)
                return
            except KeyboardInterrupt:
                # A second Ctrl-C during cleanup must not leave the container behind.
                if attempt:
                    raise
            except ToolError:
                return

    # -- what killed runs left ---------------------------------------------------------------
    def labelled_containers(self) -> list[LabelledContainer]:
        """Every container with the ``archwheel`` label, with its owner and that owner's state
        (``effects.owner``): a container whose maker died is ``dead``."""
        listed = self.run(
            "ps", "--all", "--filter", f"label={LABEL}", "--format", "{{.Names}}",
            quiet=True, timeout=120, what=f"{self.name} ps",
        )  # fmt: skip
        names = [n.strip() for n in listed.stdout.splitlines() if n.strip()]
        if not names:
            return []
        template = '{{.Name}}\t{{index .Config.Labels "' + OWNER_LABEL + '"}}'
        shown = self.run(
            "inspect", "--format", template, *names,
            check=False, quiet=True, timeout=120, what=f"{self.name} inspect",
        )  # fmt: skip
        found: list[LabelledContainer] = []
        for line in shown.stdout.splitlines():
            name, _, token = line.partition("\t")
            name = name.strip().lstrip("/")
            if not name:
                continue
            owner = Owner.parse(token)
            state = "unknown" if owner is None else liveness(owner, here=self.owner)
            found.append(LabelledContainer(name, owner, state))
        return found

    def remove_dead_containers(self) -> list[LabelledContainer]:
        """Remove the containers whose maker died (never a live run's, another host's, or one
        without an owner label); each one removed is said on stderr. Returns them."""
        removed: list[LabelledContainer] = []
        for found in self.labelled_containers():
            if found.state != "dead":
                continue
            self.remove_container(found.name)
            removed.append(found)
            (self.echo or echo_to_stderr)(
                f"archwheel: removed container {found.name}, left by a run that ended without "
                f"removing it ({found.owner.describe() if found.owner else 'no owner'})"
            )
        return removed

    def sweep_once(self) -> None:
        """``remove_dead_containers`` before this engine's first container; an engine that
        cannot list its containers is not an error here (the start that follows says why)."""
        if self._swept:
            return
        self._swept = True
        with contextlib.suppress(ToolError):
            self.remove_dead_containers()

    def stream(
        self,
        args: Sequence[str],
        *,
        sink: LineSink | None = None,
        env: Mapping[str, str] | None = None,
        quiet: bool = False,
    ) -> tuple[int, str]:
        """Run an engine command, passing each output line to ``sink``; (exit code, last line)."""
        command = self.settings.command(*args)
        command[0] = self.program_path()
        return stream_lines(
            command,
            sink=sink,
            env={**self.settings.env, **(env or {})},
            echo=None if quiet else self.echo,
            shown=[self.settings.program, *command[1:]],
        )


@dataclass(frozen=True)
class LabelledContainer:
    """A container archwheel made, its maker, and whether the maker still runs."""

    name: str
    owner: Owner | None
    state: str  # "alive", "dead" or "unknown" (effects.owner.Liveness)


class Container:
    """One running container in which commands run with ``exec``; removed on exit.

    It lives only as long as this process: its PID 1 waits on a pipe this process holds
    (``effects.held``), so a run killed with SIGKILL leaves no container compiling on. With
    ARCHWHEEL_KEEP_CONTAINERS the container is detached instead, and stays when the run ends.
    """

    def __init__(self, engine: ContainerEngine, spec: ContainerSpec) -> None:
        self.engine = engine
        self.spec = spec
        self.name = CONTAINER_PREFIX + secrets.token_hex(6)
        self.started = False
        self._holder: Popen[bytes] | None = None

    def __enter__(self) -> Container:
        spec = self.spec
        self.engine.sweep_once()
        try:
            self.started = True
            if self.engine.settings.keep_containers:
                args = ["run", "--detach", *self.engine.spec_args(spec, self.name)]
                # `sleep` as PID 1 keeps the container up between steps; `rm --force` kills it.
                args += ["--entrypoint", "sleep", spec.image, "infinity"]
                self.engine.run(*args, what=f"starting a container from {spec.image}")
            else:
                self._start_held()
        except BaseException:
            self._remove()
            raise
        return self

    def _start_held(self) -> None:
        """Start the container attached to a pipe (``effects.held``); wait until it runs."""
        spec = self.spec
        args = ["run", "--interactive", "--rm", *self.engine.spec_args(spec, self.name)]
        args += ["--entrypoint", "sh", spec.image, "-c", HOLD_SCRIPT]
        command = self.engine.settings.command(*args)
        if self.engine.echo:
            self.engine.echo(quote_command(command))
        command[0] = self.engine.program_path()
        env = {**os.environ, **self.engine.settings.env}
        self._holder = start_held(command, env, f"starting a container from {spec.image}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._remove()

    def _remove(self) -> None:
        if not self.started:
            return
        if self.engine.settings.keep_containers:
            if self.engine.echo:
                self.engine.echo(
                    f"archwheel: keeping container {self.name} ({KEEP_ENV} is set); "
                    f"remove it with `{self.engine.settings.program} rm -f {self.name}`"
                )
            return
        self.engine.remove_container(self.name)
        self.started = False
        holder, self._holder = self._holder, None
        if holder is not None:
            release(holder)

    def call(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        sink: LineSink | None = None,
        check: bool = True,
        quiet: bool = False,
        what: str = "",
    ) -> tuple[int, str]:
        """Run a command inside; stream its output to ``sink``; BuildError on failure."""
        args = ["exec"]
        if user:
            args += ["--user", user]
        if workdir:
            args += ["--workdir", workdir]
        for key, value in sorted((env or {}).items()):
            args += ["--env", f"{key}={value}"]
        args += [self.name, *command]
        code, last = self.engine.stream(args, sink=sink, quiet=quiet)
        if check and code != 0:
            raise BuildError(self.explain_failure(code, last, what or shlex.join(command[:3])))
        return code, last

    def output(self, command: Sequence[str], *, user: str | None = None) -> str:
        """Run a short command inside and return its standard output."""
        args = ["exec"]
        if user:
            args += ["--user", user]
        result = self.engine.run(*args, self.name, *command, quiet=True, check=False)
        if result.returncode != 0:
            raise BuildError(
                self.explain_failure(result.returncode, last_line(result.stderr), command[0])
            )
        return result.stdout

    def is_running(self) -> bool:
        """Whether the container runs now (see ``state`` for why it may not)."""
        return self.state() == "running"

    def state(self) -> str:
        """``running``, ``stopped`` (it exists and does not run), ``gone`` (no such container:
        ``--rm`` removed it) or ``engine-down`` (the engine does not answer)."""
        result = self.engine.run(
            "inspect", "--format", "{{.State.Running}}", self.name, check=False, quiet=True
        )
        if result.returncode == 0:
            return "running" if result.stdout.strip() == "true" else "stopped"
        if "no such" in result.stderr.lower():
            return "gone"
        return "engine-down"

    def explain_failure(self, code: int, last: str, what: str) -> str:
        """One line for a failed step. Exit 137 is SIGKILL: from inside the container (the
        kernel's OOM killer ends the biggest process, a compiler, and the container's PID 1
        lives on) or from outside (``docker kill``/``stop``, the engine stopping: the whole
        container ends). The engine may still report a killed container as running for a
        moment, so a 137 is looked at again for up to 3 seconds before it is called OOM."""
        state = self.state()
        if code == 137 and state == "running":
            deadline = time.monotonic() + 3.0
            while state == "running" and time.monotonic() < deadline:
                time.sleep(0.25)
                state = self.state()
        if state == "engine-down":
            return (
                f"the container engine stopped answering while {what} ran in container "
                f"{self.name} (exit {code}): the engine was stopped or crashed"
            )
        if state in ("gone", "stopped"):
            return (
                f"container {self.name} was stopped from outside while {what} ran (exit "
                f"{code}): `{self.engine.settings.program} kill`/`stop`, or the engine "
                "restarting"
            )
        if code == 137:
            return (
                f"{what} was killed in container {self.name} (exit 137, SIGKILL) while the "
                f"container ran on: {OOM_LIKELY}"
            )
        return f"{what} failed in container {self.name} (exit {code}): {last}"


OOM_LIKELY = "the kernel's OOM killer, most likely"


# -- signals ------------------------------------------------------------------------------------


@contextlib.contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit(143)`` so ``finally`` blocks remove containers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(EXIT_TERMINATED)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
