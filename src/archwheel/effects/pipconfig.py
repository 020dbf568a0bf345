"""pip settings passed from the host into build containers: indexes, local wheel folders, CA.

Behind a TLS-inspecting proxy pip needs the proxy's CA bundle; teams with internal mirrors need
their ``index-url``/``extra-index-url``/``find-links``. A container sees none of the host's pip
configuration, so archwheel reads it (``pip config list`` plus ``PIP_*`` variables), lets the
command line override it, and hands it to pip inside the container as ``PIP_*`` variables:

* the CA bundle is mounted read-only at ``/etc/archwheel/ca-bundle.crt`` (``PIP_CERT`` and
  ``SSL_CERT_FILE`` point at it);
* local folders (``file://`` URLs and plain paths) are mounted read-only at the same path, so
  the URLs work unchanged inside;
* remote URLs pass through as they are (the prepare step runs with the host network).

The same settings drive the host-side ``pip download`` of the PyPI CUDA toolchain.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import unquote, urlparse

from archwheel.effects.engine import Mount
from archwheel.effects.process import run_program
from archwheel.errors import ToolError, UsageError

CONTAINER_CA_PATH = "/etc/archwheel/ca-bundle.crt"
CONTAINER_CONSTRAINTS_DIR = "/etc/archwheel/constraints"
_CONFIG_LINE = re.compile(r"^(?P<scope>[^.]*)\.(?P<key>[a-z-]+)='(?P<value>.*)'$")
# pip's precedence, lowest first: global < user < site < environment.
_SCOPE_RANK = {"global": 0, "user": 1, "site": 2, ":env:": 3}
_RESERVED_TARGETS = (
    "/build",
    "/src",
    "/sccache",
    "/ccache",
    "/opt/archwheel",
    "/usr",
    "/etc",
    "/proc",
)


@dataclass(frozen=True)
class PipSettings:
    """The pip indexes, local wheel folders, CA bundle and constraints a run uses: read from
    the host (``from_host``), overridden by the command line, passed to containers and pip."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    ca_bundle: Path | None = None
    # pip's `constraint` files. Builds do not pass them (docs/builds.md); smoke does, through
    # constraint_mounts() and constraint_env(), so its installs resolve as the host's pip would.
    constraints: tuple[Path, ...] = ()

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_config_lines(cls, lines: Sequence[str]) -> PipSettings:
        """Parse ``pip config list`` output (``global.index-url='...'``, ``:env:.cert='...'``)."""
        best: dict[str, tuple[int, str]] = {}
        for line in lines:
            m = _CONFIG_LINE.match(line.strip())
            if not m:
                continue
            scope = m.group("scope")
            rank = _SCOPE_RANK.get(scope, 1)
            key = m.group("key")
            if key not in best or rank >= best[key][0]:
                best[key] = (rank, m.group("value"))
        value = {k: v for k, (_, v) in best.items()}
        cert = value.get("cert")
        return cls(
            index_url=value.get("index-url") or None,
            extra_index_urls=tuple(value.get("extra-index-url", "").split()),
            find_links=tuple(value.get("find-links", "").split()),
            trusted_hosts=tuple(value.get("trusted-host", "").split()),
            ca_bundle=Path(cert) if cert else None,
            constraints=tuple(Path(c) for c in value.get("constraint", "").split()),
        )

    @classmethod
    def from_host(cls, python: str | None = None) -> PipSettings:
        """The invoking environment's pip configuration (empty where there is no pip to ask).

        A configuration pip itself refuses to load (a section header without its ``]``, an
        option given twice, bytes that are not text) is a ``UsageError`` naming the file: taken
        as empty, it would send every read to pip's default index, one the user never named.
        """
        try:
            proc = run_program(
                [python or sys.executable, "-m", "pip", "config", "list"],
                echo=None,
                check=False,
                timeout=60,
            )
        except ToolError:  # not found, not startable, or no answer in time
            return cls()
        if proc.returncode != 0:
            if "No module named pip" in proc.stderr:
                return cls()  # no pip there: no pip configuration to follow
            # pip writes some refusals to standard output ("An error occurred during
            # configuration: option timeout: invalid floating-point value"), naming no file
            refusal = configuration_refusal(proc.stderr.strip() or proc.stdout)
            named = os.environ.get("PIP_CONFIG_FILE")
            if named and named not in refusal:
                refusal += f" (PIP_CONFIG_FILE {named})"
            raise UsageError(
                refusal,
                hint="fix that file, or point PIP_CONFIG_FILE at one pip loads; "
                "`pip config list` says the same",
            )
        settings = cls.from_config_lines(proc.stdout.splitlines())
        if settings.ca_bundle is None:
            for var in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
                if os.environ.get(var):
                    return replace(settings, ca_bundle=Path(os.environ[var]))
        return settings

    def override(
        self,
        *,
        index_url: str | None = None,
        extra_index_urls: Sequence[str] = (),
        find_links: Sequence[str] = (),
        ca_bundle: Path | None = None,
    ) -> PipSettings:
        """Command-line values: an index URL or CA replaces, extra indexes and links add.

        An empty (or blank) URL or link is a ``UsageError``: an empty ``--index-url`` once
        fell back to the configured index without a word."""
        for value in (index_url, *extra_index_urls, *find_links):
            if value is not None and not value.strip():
                raise UsageError(
                    "an empty package index URL or link",
                    hint="give a URL (https://..., file:///...) or leave the option out",
                )
        return PipSettings(
            index_url=index_url or self.index_url,
            extra_index_urls=(*self.extra_index_urls, *extra_index_urls),
            find_links=(*self.find_links, *find_links),
            trusted_hosts=self.trusted_hosts,
            ca_bundle=ca_bundle or self.ca_bundle,
            constraints=self.constraints,
        )

    # -- validation and rendering -------------------------------------------------------------
    def validated(self) -> PipSettings:
        """Check local paths now, before any container starts."""
        if self.ca_bundle is not None and not self.ca_bundle.is_file():
            raise UsageError(
                f"CA bundle {self.ca_bundle} does not exist",
                hint="pass --ca-bundle PATH (a PEM file) or --ca-bundle none",
            )
        for location in self.locations():
            folder = local_folder(location)
            if folder is not None and not folder.exists():
                raise UsageError(
                    f"pip location {location} points at {folder}, which does not exist",
                    hint="fix the pip configuration or pass --no-host-pip-config",
                )
        return self

    def locations(self) -> tuple[str, ...]:
        """Every place pip looks for packages: the index, the extra indexes, find-links."""
        urls = (self.index_url,) if self.index_url else ()
        return (*urls, *self.extra_index_urls, *self.find_links)

    def mounts(self) -> tuple[Mount, ...]:
        """Read-only mounts: the CA bundle, and every local folder the locations point into."""
        mounts: list[Mount] = []
        if self.ca_bundle is not None:
            mounts.append(Mount(str(self.ca_bundle.resolve()), CONTAINER_CA_PATH, read_only=True))
        seen: set[str] = set()
        for location in self.locations():
            folder = local_folder(location)
            if folder is None:
                continue
            root = _mount_root(folder)
            if str(root) in seen:
                continue
            seen.add(str(root))
            if any(str(root) == t or str(root).startswith(t + "/") for t in _RESERVED_TARGETS):
                raise UsageError(
                    f"cannot pass the pip location {location} into the build container: "
                    f"{root} would shadow a path the build needs",
                    hint="serve it over http(s) or move it",
                )
            mounts.append(Mount(str(root), str(root), read_only=True))
        return tuple(mounts)

    def container_env(self) -> dict[str, str]:
        """The ``PIP_*`` variables (and CA variables) that give pip in a container these
        settings, with the CA at its mounted path."""
        env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
        if self.index_url:
            env["PIP_INDEX_URL"] = self.index_url
        if self.extra_index_urls:
            env["PIP_EXTRA_INDEX_URL"] = " ".join(self.extra_index_urls)
        if self.find_links:
            env["PIP_FIND_LINKS"] = " ".join(self.find_links)
        if self.trusted_hosts:
            env["PIP_TRUSTED_HOST"] = " ".join(self.trusted_hosts)
        if self.ca_bundle is not None:
            env["PIP_CERT"] = CONTAINER_CA_PATH
            env["SSL_CERT_FILE"] = CONTAINER_CA_PATH
            env["REQUESTS_CA_BUNDLE"] = CONTAINER_CA_PATH
        return env

    def constraint_mounts(self) -> tuple[Mount, ...]:
        """Each constraint file that exists, read-only under ``/etc/archwheel/constraints/``."""
        return tuple(
            Mount(str(path.resolve()), f"{CONTAINER_CONSTRAINTS_DIR}/{i}.txt", read_only=True)
            for i, path in enumerate(self.constraints)
            if path.is_file()
        )

    def constraint_env(self) -> dict[str, str]:
        """``PIP_CONSTRAINT`` naming the files ``constraint_mounts`` mounts (empty when none)."""
        targets = [mount.target for mount in self.constraint_mounts()]
        return {"PIP_CONSTRAINT": " ".join(targets)} if targets else {}

    def host_args(self) -> list[str]:
        """The same settings as ``pip download`` options on the host."""
        args: list[str] = []
        if self.index_url:
            args += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            args += ["--extra-index-url", url]
        for link in self.find_links:
            args += ["--find-links", link]
        for host in self.trusted_hosts:
            args += ["--trusted-host", host]
        if self.ca_bundle is not None:
            args += ["--cert", str(self.ca_bundle)]
        return args

    def describe(self) -> str:
        """One line naming the indexes, links and CA, for the build plan."""
        parts = []
        if self.index_url:
            parts.append(f"index {self.index_url}")
        if self.extra_index_urls:
            parts.append(f"extra {' '.join(self.extra_index_urls)}")
        if self.find_links:
            parts.append(f"links {' '.join(self.find_links)}")
        parts.append(f"CA {self.ca_bundle}" if self.ca_bundle else "system CA")
        return "; ".join(parts)


# Where pip's refusal of a configuration file names the file and the line (pip wraps the
# errors of Python's configparser, and reports undecodable bytes itself).
_REFUSED_FILE = (
    re.compile(r"file: '(?P<file>[^'\n]*)', line: (?P<line>[0-9]+)"),  # no section header
    re.compile(r"While reading from '(?P<file>[^'\n]*)' \[line +(?P<line>[0-9]+)\]"),  # twice
    re.compile(r"parsing errors: '(?P<file>[^'\n]*)'\s*\[line +(?P<line>[0-9]+)\]"),
    re.compile(r"characters in (?P<file>[^\n]*?)\.?$", re.MULTILINE),  # not text
)
_REFUSED_REASON = (
    "File contains no section headers",
    "already exists",
    "Source contains parsing errors",
    "invalid",
)
MAX_REFUSAL_SHOWN = 300  # characters of pip's own words in the one-line error


def configuration_refusal(stderr: str) -> str:
    """One line from what ``pip config list`` said when it refused to load its configuration:
    the file and line pip names, and pip's reason (``... already exists``, ``File contains no
    section headers``); pip's first words when it names no file."""
    text = stderr.strip()
    reason = next(
        (line.strip() for line in text.splitlines() if any(r in line for r in _REFUSED_REASON)),
        "",
    )
    if "While reading from" in reason:
        reason = reason.split("]:", 1)[-1].strip()  # "option 'x' in section 'y' already exists"
    if reason.startswith("Source contains parsing errors"):
        reason = "Source contains parsing errors"  # its file is named below
    if " characters in " in reason:  # "Configuration file contains invalid UTF-8 characters in F."
        reason = reason.removeprefix("Configuration file ").split(" characters in ")[0]
        reason += " characters"
    for pattern in _REFUSED_FILE:
        found = pattern.search(text)
        if found is not None:
            where = found.group("file")
            line = found.groupdict().get("line")
            if line:
                where += f", line {line}"
            why = reason.rstrip(".") or "could not be loaded"
            return f"pip refuses its configuration file {where}: {why}"[:MAX_REFUSAL_SHOWN]
    words = " ".join(text.split()) or "no message"
    return f"pip refuses its configuration ({words})"[:MAX_REFUSAL_SHOWN]


def local_folder(location: str) -> Path | None:
    """The local path a pip location refers to (``file://`` URL or plain path), else None."""
    if "://" not in location:
        return Path(location).resolve()
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path)).resolve()
    return None


def _mount_root(folder: Path) -> Path:
    """Mount the parent of a ``simple/`` index so its ``../../files/`` links resolve."""
    if folder.name == "simple" and folder.parent != folder:
        return folder.parent
    return folder


def environment_summary(env: Mapping[str, str]) -> dict[str, str]:
    """The pip variables of a container environment (for the plan and provenance)."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(("PIP_", "SSL_", "REQUESTS_"))}
