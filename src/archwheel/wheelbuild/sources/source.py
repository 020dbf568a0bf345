"""Resolve a recipe's source to a local folder, a commit and a ``SOURCE_DATE_EPOCH``.

* ``path``: the folder as it is. If it sits in a git work tree, the commit of the last change
  under it, whether it has uncommitted changes, and the file list (tracked plus untracked, not
  ignored: build leftovers never reach the container). A content hash over that list is
  recorded either way.
* ``git``: the tag or branch is resolved to a commit (``git ls-remote``), fetched at that
  commit only (``--depth 1``) into the cache with its submodules, and reused afterwards.
* ``sdist``: downloaded (or read) once into the cache, checked against its sha256, and unpacked
  with every member checked (no absolute paths, no ``..``, no links leaving the tree).
* ``debian``: a Debian source package, fetched with apt in a container of the suite's Debian
  base, verified on the host against its ``.dsc`` and unpacked by ``dpkg-source -x``
  (``debian_source.py``); the caller hands the fetcher in, since it needs the engine.

This runs on the host, before any container starts, with the host's own git/CA settings.
"""

from __future__ import annotations

import calendar
import dataclasses
import hashlib
import os
import re
import shutil
import ssl
import stat
import tarfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from archwheel.binary.zipread import open_zip
from archwheel.effects.deadline import NetBudget
from archwheel.effects.files import (
    ZIP_MEMBER_ERRORS,
    OversizedMember,
    atomic_writer,
    extract_member,
    open_regular,
    sha256_file,
)
from archwheel.effects.http import Client
from archwheel.effects.net import TooLarge, paced_blocks
from archwheel.effects.process import Echo, echo_to_stderr, last_line, run_program
from archwheel.errors import BuildError, InputError, ToolError, UsageError
from archwheel.wheelbuild.recipes.recipe_model import SourceSpec
from archwheel.wheelbuild.sources.debian_source import DebianFetch
from archwheel.wheelbuild.sources.source_patches import patched_tree

ZIP_EPOCH_MIN = 315532800  # 1980-01-01: the earliest timestamp a zip entry can carry
MAX_SDIST_BYTES = 4 << 30
MAX_SDIST_MEMBERS = 500_000
MAX_UNPACKED_BYTES = 8 << 30  # the members' sizes added up: a sparse 10 GB member is refused
_COMMIT = re.compile(r"^[0-9a-f]{40}\Z")
_COMPLETE = ".archwheel-complete"  # the marker of a finished cache folder
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".nox", ".venv", ".mypy_cache"})


@dataclass(frozen=True)
class ResolvedSource:
    """A source ready to mount: where it is, what it is, and its reproducible timestamp."""

    spec: SourceSpec
    root: Path  # the folder mounted read-only at /src
    commit: str | None  # git commit (path inside a repo, or git source)
    dirty: bool  # uncommitted changes under the path
    content_sha256: str  # over the sorted file list, modes and contents
    files: tuple[str, ...]  # relative paths copied into the build (sorted)
    source_date_epoch: int
    epoch_origin: str  # where the epoch came from, for provenance
    sdist_sha256: str | None = None
    submodule_commits: tuple[str, ...] = ()  # "<commit> <path>" of each (recursive), git only
    unresolved: str = ""  # a plan made without the source (no network): why; "" when resolved
    unpatched_sha256: str | None = None  # the content before [[source.patches]], when patched
    debian: Mapping[str, object] | None = None  # a Debian source package's record

    @classmethod
    def not_resolved(cls, spec: SourceSpec, why: str, recipe_epoch: int | None) -> ResolvedSource:
        """A plan's stand-in for a source this host cannot reach now (``build --plan`` without
        network): nothing is mounted from it and no build runs on it."""
        epoch = recipe_epoch if recipe_epoch is not None else ZIP_EPOCH_MIN
        origin = "the recipe" if recipe_epoch is not None else "resolved when the build runs"
        return cls(spec, Path("/nonexistent"), None, False, "", (), epoch, origin, unresolved=why)

    def to_json_dict(self) -> dict[str, object]:
        """The resolved source as the provenance's ``source`` entry."""
        return {
            "mirrors": dict(self.spec.mirrors),
            "submodule_commits": list(self.submodule_commits),
            "kind": self.spec.kind,
            "location": (
                f"debian:{self.spec.debian}={self.spec.project_version}"
                if self.spec.kind == "debian"
                else str(self.spec.path or self.spec.git_url or self.spec.sdist)
            ),
            "ref": self.spec.ref,
            "commit": self.commit,
            "dirty": self.dirty,
            "submodules": self.spec.submodules,
            "content_sha256": self.content_sha256,
            "files": len(self.files),
            "sdist_sha256": self.sdist_sha256,
            "patches": [
                {"file": p.path.name, "sha256": p.sha256, "reason": p.reason}
                for p in self.spec.patches
            ],
            "unpatched_sha256": self.unpatched_sha256,
            "debian": dict(self.debian) if self.debian is not None else None,
        }


class Git:
    """The host's git, echoing each command."""

    def __init__(
        self, echo: Echo | None = echo_to_stderr, mirrors: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.echo = echo
        # git -c url.<mirror>.insteadOf=<public>: every URL git meets (the repository, each
        # submodule, recursively) is rewritten; file:// mirrors need the file protocol allowed
        # for submodules (git >= 2.38.1 refuses it by default).
        self.config: list[str] = []
        for public, mirror in mirrors:
            self.config += ["-c", f"url.{mirror}.insteadOf={public}"]
        if any(m.startswith(("file://", "/")) for _p, m in mirrors):
            self.config += ["-c", "protocol.file.allow=always"]

    def run(self, args: Sequence[str], cwd: Path | None = None, *, quiet: bool = False) -> str:
        """Run ``git`` with the mirror settings and no prompt: its stdout, or ToolError."""
        proc = run_program(
            ["git", *self.config, *args],
            cwd=cwd,
            check=False,
            env={"GIT_TERMINAL_PROMPT": "0"},
            echo=None if quiet else self.echo,
        )
        if proc.returncode != 0:
            raise ToolError(
                f"git {args[0]} failed (exit {proc.returncode}): "
                f"{last_line(proc.stderr or proc.stdout, limit=300)}",
                hint="the source repository must be reachable from this host; a mirror URL "
                "in the recipe's [source] git works too",
            )
        return proc.stdout

    def try_run(self, args: Sequence[str], cwd: Path) -> str | None:
        """``run`` quietly, None instead of ToolError: for what a plain folder cannot answer."""
        try:
            return self.run(args, cwd, quiet=True)
        except ToolError:
            return None


def resolve_source(
    spec: SourceSpec,
    cache: Path,
    *,
    recipe_epoch: int | None = None,
    echo: Echo | None = echo_to_stderr,
    debian: DebianFetch | None = None,
) -> ResolvedSource:
    """The recipe's source as the build mounts it: a folder in place, a git ref or sdist fetched
    into ``cache``, a Debian source package fetched by ``debian``; hashed, its patches applied
    to a copy, as plan and provenance record it.
    """
    git = Git(echo, spec.mirrors)
    if spec.kind == "path":
        assert spec.path is not None
        resolved = _resolve_path(spec, spec.path, git, recipe_epoch)
    elif spec.kind == "debian":
        if debian is None:
            raise ToolError("a Debian source package needs a container engine to fetch it")
        fetched = debian(spec, cache)
        files = [f for f in _walk(fetched.root) if f != _COMPLETE]
        epoch = _epoch(recipe_epoch, fetched.epoch, "top entry of debian/changelog")
        resolved = dataclasses.replace(
            _resolved(spec, fetched.root, files, epoch), debian=fetched.record
        )
    elif spec.kind == "git":
        resolved = _resolve_git(spec, cache / "sources" / "git", git, recipe_epoch)
    else:
        resolved = _resolve_sdist(spec, cache / "sources" / "sdist", recipe_epoch, echo)
    if not spec.patches:
        return resolved
    # [[source.patches]]: the build sees a patched copy (wheelbuild/sources/source_patches.py).
    tree, files = patched_tree(
        resolved.root, resolved.files, resolved.content_sha256, spec.patches, cache=cache, echo=echo
    )
    return dataclasses.replace(
        resolved,
        root=tree,
        files=tuple(files),
        content_sha256=content_hash(tree, files),
        unpatched_sha256=resolved.content_sha256,
    )


def _resolved(
    spec: SourceSpec,
    root: Path,
    files: Sequence[str],
    epoch: tuple[int, str],
    *,
    commit: str | None = None,
    dirty: bool = False,
    sdist_sha256: str | None = None,
) -> ResolvedSource:
    """The resolved source over ``files`` of ``root``, hashed; ``epoch``: (value, origin)."""
    return ResolvedSource(
        spec=spec,
        root=root,
        commit=commit,
        dirty=dirty,
        content_sha256=content_hash(root, files),
        files=tuple(files),
        source_date_epoch=epoch[0],
        epoch_origin=epoch[1],
        sdist_sha256=sdist_sha256,
    )


def _fill_once(folder: Path, fill: Callable[[], str]) -> str:
    """A cache folder that ``fill`` makes once; returns what ``fill`` returned then.

    The folder counts as made only when its marker is written, after ``fill`` succeeded: a
    folder without one (an interrupted run) is removed and made again.
    """
    marker = folder / _COMPLETE
    if not marker.is_file():
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        try:
            text = fill()
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        marker.write_text(text + "\n")
    return marker.read_text().strip()


def _epoch(recipe_epoch: int | None, found: int | None, origin: str) -> tuple[int, str]:
    if recipe_epoch is not None:
        return recipe_epoch, "recipe"
    if found is not None:
        return max(ZIP_EPOCH_MIN, found), origin
    return ZIP_EPOCH_MIN, "default (1980-01-01)"


def _resolve_path(
    spec: SourceSpec, folder: Path, git: Git, recipe_epoch: int | None
) -> ResolvedSource:
    top = git.try_run(["rev-parse", "--show-toplevel"], folder) if shutil.which("git") else None
    commit: str | None = None
    dirty = False
    found_epoch: int | None = None
    if top:
        listed = git.try_run(
            ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."], folder
        )
        files = sorted(
            {f for f in (listed or "").split("\0") if f and _is_file_or_link(folder / f)}
        )
        commit = (git.try_run(["rev-parse", "HEAD"], folder) or "").strip() or None
        status = git.try_run(["status", "--porcelain", "--", "."], folder)
        dirty = bool(status and status.strip())
        stamp = git.try_run(["log", "-1", "--format=%ct", "--", "."], folder)
        if stamp and stamp.strip().isdigit():
            found_epoch = int(stamp.strip())
    else:
        files = _walk(folder)
    if not files:
        raise UsageError(f"source folder {folder} holds no files")
    epoch, origin = _epoch(recipe_epoch, found_epoch, "last git commit touching the source")
    if dirty and recipe_epoch is None:
        origin += " (the tree has uncommitted changes)"
    return _resolved(spec, folder, files, (epoch, origin), commit=commit, dirty=dirty)


def _walk(folder: Path) -> list[str]:
    """Every file of a folder that is not a git work tree, and every link, to a file or a
    folder, as a git listing has them: a link is copied into the build as a link and hashed as
    one (``content_hash``), never followed (Debian's pytorch links ``debian/pocketfft`` to its
    versioned folder)."""
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        links = [d for d in dirnames if (here / d).is_symlink()]
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and d not in links)
        for name in (*filenames, *links):
            path = here / name
            if path.is_symlink() or path.is_file():
                files.append(path.relative_to(folder).as_posix())
    return sorted(files)


def _is_file_or_link(path: Path) -> bool:
    return path.is_symlink() or path.is_file()


def content_hash(folder: Path, files: Sequence[str]) -> str:
    """sha256 over (path, executable bit, sha256 of content) of each file, in order."""
    outer = hashlib.sha256()
    for rel in files:
        path = folder / rel
        if path.is_symlink():
            # Copied into the build as a link (tar does not follow it): hash the link itself,
            # never what it points at, which may lie outside the source.
            outer.update(f"{rel}\0l\0{path.readlink()}\n".encode())
            continue
        executable = "x" if path.stat().st_mode & stat.S_IXUSR else "-"
        outer.update(f"{rel}\0{executable}\0{sha256_file(path)}\n".encode())
    return outer.hexdigest()


def _resolve_git(
    spec: SourceSpec, cache: Path, git: Git, recipe_epoch: int | None
) -> ResolvedSource:
    assert spec.git_url is not None
    assert spec.ref is not None
    url, ref = spec.git_url, spec.ref
    commit: str | None = ref if _COMMIT.match(ref) else None
    if commit is None:
        listing = git.run(["ls-remote", url, ref, f"{ref}^{{}}"])
        commit = _pick_commit(listing, ref)
    if commit is None:
        raise UsageError(f"git ref {ref!r} not found in {url}", hint="check the tag or branch")
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    checkout = cache / f"{key}-{commit[:12]}{'-sub' if spec.submodules else ''}"
    wanted = commit

    def fetch() -> str:
        git.run(["init", "--quiet", str(checkout)])
        git.run(["-C", str(checkout), "fetch", "--quiet", "--depth", "1", url, wanted])
        git.run(["-C", str(checkout), "checkout", "--quiet", "--detach", "FETCH_HEAD"])
        if spec.submodules:
            _update_submodules(git, checkout, url)
        return wanted

    _fill_once(checkout, fetch)
    head = git.run(["-C", str(checkout), "rev-parse", "HEAD"], quiet=True).strip()
    if head != commit:
        raise BuildError(f"checkout {checkout} is at {head}, expected {commit}; delete it")
    stamp = git.run(["-C", str(checkout), "log", "-1", "--format=%ct"], quiet=True).strip()
    files = [f for f in _walk(checkout) if f != _COMPLETE]
    epoch, origin = _epoch(recipe_epoch, int(stamp) if stamp.isdigit() else None, "commit time")
    resolved = _resolved(spec, checkout, files, (epoch, origin), commit=commit)
    if not spec.submodules:
        return resolved
    status = git.run(["-C", str(checkout), "submodule", "status", "--recursive"], quiet=True)
    pins = tuple(" ".join(line.lstrip(" +-U").split()[:2]) for line in status.splitlines())
    return dataclasses.replace(resolved, submodule_commits=pins)


def _update_submodules(git: Git, checkout: Path, url: str) -> None:
    """Every submodule at the commit the superproject pins (through the mirrors); a mirror that
    lacks one is a one-line ToolError naming the submodule and the commit."""
    try:
        git.run(
            ["-C", str(checkout), "submodule", "update", "--init", "--recursive",
             "--depth", "1", "--jobs", "4"]
        )  # fmt: skip
    except ToolError as exc:
        # The gitlinks (mode 160000) of the superproject: each submodule's pinned commit.
        staged = git.try_run(["-C", str(checkout), "ls-files", "--stage"], checkout) or ""
        missing = [
            (parts[1], line.split("\t", 1)[1])
            for line in staged.splitlines()
            if (parts := line.split()) and parts[0] == "160000" and "\t" in line
        ]
        missing = [
            (sha, path)
            for sha, path in missing
            if (
                git.try_run(["-C", str(checkout / path), "rev-parse", "HEAD"], checkout) or ""
            ).strip()
            != sha
        ]
        named = ", ".join(f"{path} @ {sha}" for sha, path in missing) or "a submodule"
        via = ", ".join(f"{p} -> {m}" for p, m in git_mirrors(git)) or "no mirror"
        raise ToolError(
            f"git source {url}: could not fetch {named} (mirrors: {via}): {exc.message}",
            hint="the mirror must hold every submodule commit the superproject pins; "
            "update the mirror, or check [source] mirror",
        ) from None


def git_mirrors(git: Git) -> list[tuple[str, str]]:
    """The ``(public prefix, mirror)`` pairs ``git`` rewrites URLs with, for error messages."""
    pairs = []
    for item in git.config:
        if item.startswith("url.") and ".insteadOf=" in item:
            mirror, _, public = item[4:].partition(".insteadOf=")
            pairs.append((public, mirror))
    return pairs


def _pick_commit(listing: str, ref: str) -> str | None:
    """From ``git ls-remote`` output: the peeled commit of an annotated tag, else the ref's."""
    plain: str | None = None
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) != 2 or not _COMMIT.match(parts[0]):
            continue
        sha, name = parts
        if name.endswith("^{}"):
            return sha
        if name in (ref, f"refs/tags/{ref}", f"refs/heads/{ref}") or plain is None:
            plain = sha
    return plain


def _resolve_sdist(
    spec: SourceSpec, cache: Path, recipe_epoch: int | None, echo: Echo | None
) -> ResolvedSource:
    assert spec.sdist is not None
    assert spec.sha256 is not None
    cache.mkdir(parents=True, exist_ok=True)
    name = PurePosixPath(spec.sdist.split("?")[0]).name or "sdist"
    archive = cache / f"{spec.sha256}-{name}"
    if not archive.is_file():
        _fetch(spec.sdist, archive, echo)
    digest = sha256_file(archive)
    if digest != spec.sha256:
        archive.unlink()
        raise InputError(
            f"sdist {spec.sdist} has sha256 {digest}, the recipe says {spec.sha256}",
            hint="the file changed or the recipe is wrong; never build an unverified source",
        )
    tree = cache / spec.sha256
    newest_text = _fill_once(tree, lambda: str(safe_unpack(archive, tree)))
    entries = [p for p in tree.iterdir() if p.name != _COMPLETE]
    root = entries[0] if len(entries) == 1 and entries[0].is_dir() else tree
    files = [f for f in _walk(root) if f != _COMPLETE]
    found = int(newest_text) if newest_text.isdigit() else None
    epoch, origin = _epoch(recipe_epoch, found, "newest member of the sdist")
    return _resolved(spec, root, files, (epoch, origin), sdist_sha256=digest)


def _fetch(location: str, target: Path, echo: Echo | None) -> None:
    if "://" not in location or location.startswith("file://"):
        _copy_local(Path(location.removeprefix("file://")), target)
        return
    if echo:
        echo(f"+ download {location}")
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    try:
        with (
            Client(context, timeout=120) as client,
            NetBudget().request(location),
            client.opened(location) as response,
            atomic_writer(target) as out,
        ):
            # A server that trickles bytes is given up; so is an sdist past the bound.
            for block in paced_blocks(response, limit=MAX_SDIST_BYTES):
                out.write(block)
    except TooLarge:
        raise InputError(f"{location} is larger than {MAX_SDIST_BYTES} bytes") from None
    except OSError as exc:
        raise ToolError(f"could not download {location}: {exc}") from None


def _copy_local(source: Path, target: Path) -> None:
    """Copy a local sdist into the cache: a regular file of at most ``MAX_SDIST_BYTES``."""
    try:
        with open_regular(source) as src, atomic_writer(target) as dst:
            copied = 0
            while block := src.read(1 << 20):
                copied += len(block)
                if copied > MAX_SDIST_BYTES:
                    raise InputError(f"{source} is larger than {MAX_SDIST_BYTES} bytes")
                dst.write(block)
    except OSError as exc:
        raise InputError(f"sdist {source}: cannot read: {exc.strerror or exc}") from None


def _safe_member(name: str, archive: Path) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or name.startswith(("/", "\\")) or "\\" in name:
        raise InputError(f"{archive}: unsafe member name {name!r}; refusing to unpack")
    return path


def safe_unpack(archive: Path, target: Path) -> int:
    """Unpack a .tar.gz/.tar.bz2/.tar.xz/.zip sdist into ``target``; return the newest mtime.

    Only regular files and folders are written; links, devices, names that would leave
    ``target``, members that cannot be written (a file where a folder is), and more than
    ``MAX_SDIST_MEMBERS`` members or ``MAX_UNPACKED_BYTES`` bytes raise ``InputError``.
    """
    try:
        return _unpack(archive, target)
    except OSError as exc:
        raise InputError(
            f"{archive}: cannot unpack ({exc.strerror or exc}); refusing to build it"
        ) from None
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"{archive}: damaged archive ({exc}); refusing to build it") from None


def _unpack(archive: Path, target: Path) -> int:
    unpacked = 0
    newest = 0
    count = 0
    if zipfile.is_zipfile(archive):
        with (
            open_regular(archive) as fh,
            open_zip(fh, archive, max_members=MAX_SDIST_MEMBERS) as zf,
        ):
            for info in zf.infolist():  # at most MAX_SDIST_MEMBERS: open_zip checked them
                rel = _safe_member(info.filename, archive)
                dest = target.joinpath(*rel.parts)
                unpacked += info.file_size
                if unpacked > MAX_UNPACKED_BYTES:
                    raise InputError(f"{archive}: unpacks to more than {MAX_UNPACKED_BYTES} bytes")
                if info.is_dir():
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:
                    extract_member(zf, info, dest)
                except OversizedMember as exc:
                    raise InputError(f"{archive}: {exc}; refusing to unpack") from None
                except ZIP_MEMBER_ERRORS as exc:
                    raise InputError(
                        f"{archive}: member {info.filename[:200]!r} cannot be unpacked: {exc}"
                    ) from None
                newest = max(newest, calendar.timegm((*info.date_time, 0, 0, -1)))
        return newest
    try:
        tar = tarfile.open(archive)  # noqa: SIM115
    except tarfile.TarError as exc:
        raise InputError(f"{archive}: not a tar or zip archive ({exc})") from None
    with tar:
        for member in tar:
            count += 1
            if count > MAX_SDIST_MEMBERS:
                raise InputError(f"{archive}: more than {MAX_SDIST_MEMBERS} members")
            rel = _safe_member(member.name, archive)
            if not rel.parts:
                continue
            dest = target.joinpath(*rel.parts)
            unpacked += max(0, member.size)
            if unpacked > MAX_UNPACKED_BYTES:
                raise InputError(f"{archive}: unpacks to more than {MAX_UNPACKED_BYTES} bytes")
            if member.isdir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            if not member.isfile():
                raise InputError(
                    f"{archive}: member {member.name!r} is a link or device; refusing to unpack"
                )
            dest.parent.mkdir(parents=True, exist_ok=True)
            extracted = tar.extractfile(member)
            if extracted is None:
                raise InputError(f"{archive}: cannot read member {member.name!r}")
            with extracted, dest.open("wb") as out:
                shutil.copyfileobj(extracted, out)
            if member.mode & stat.S_IXUSR:
                dest.chmod(0o755)
            newest = max(newest, int(member.mtime))
    return newest
