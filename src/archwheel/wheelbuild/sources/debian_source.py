"""A Debian source package as a recipe's source: ``[source] debian = "pytorch"``, ``version``.

Debian's archive serves the source of every package it builds, next to the binaries; for a
project with no sdist and a git repository out of reach (PyTorch), it is the one real source.
The package is fetched with apt from the archive of archwheel's own Debian base of the suite
(``archwheel/debian:SUITE``), in one container with the host network:

1. a ``deb-src`` entry copying the URIs, suite and components of the base image's own ``deb``
   entry (no host is written down here: a company mirror the base was made from is used as
   it is), ``apt-get update``, and ``dpkg-dev`` for ``dpkg-source``;
2. as the unprivileged build user, ``apt-get source --print-uris PACKAGE=VERSION``: the files
   and their sha256 from apt's Sources index, which apt verified against the suite's signed
   ``InRelease``; a version the index does not list is refused here (``RecipeError``, exit 2);
3. ``apt-get source --download-only`` into the work folder (a version the index lists whose
   files the archive does not serve, a 404, is refused the same way);
4. on the host: the ``.dsc``'s own sha256 against the index's (and the recipe's ``sha256``, when
   it pins one), then every file the ``.dsc``'s ``Checksums-Sha256`` names, size and sha256
   (``InputError``, exit 3, on the first that differs);
5. ``dpkg-source -x`` (Debian's patches applied, in the order of ``debian/patches/series``).

The verified files and the unpacked tree are kept under the cache folder, keyed by package,
version and the ``.dsc``'s sha256, so a second build reads nothing from the network. The
record (package, version, archive URIs, the ``.dsc``'s sha256, every file's sha256 and size,
the Debian patches applied) goes into provenance; ``SOURCE_DATE_EPOCH`` is the date of the top
entry of ``debian/changelog``.
"""

from __future__ import annotations

import email.utils
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from archwheel.effects.engine import Container, ContainerEngine, ContainerSpec, Mount
from archwheel.effects.files import sha256_file
from archwheel.effects.owner import owned_tempdir, remove_owned
from archwheel.effects.process import CommandResult, Echo, last_line
from archwheel.errors import InputError, RecipeError, ToolError
from archwheel.wheelbuild.recipes.recipe_model import SourceSpec

DEBIAN = "debian"  # the cache folder under sources/
_COMPLETE = ".archwheel-complete"
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_URI_LINE = re.compile(r"'(?P<uri>[^']+)' (?P<name>\S+) (?P<size>\d+) (?:SHA256:)?(?P<sha>\S+)")
MAX_DSC_BYTES = 1 << 20

# Step 1, as root: the deb-src entry (one-line sources.list or deb822 .sources), the index,
# dpkg-dev for dpkg-source.
_SETUP = r"""set -e
for list in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$list" ] && sed -n 's/^deb /deb-src /p' "$list"
done > /etc/apt/sources.list.d/archwheel-deb-src.list
for sources in /etc/apt/sources.list.d/*.sources; do
    [ -f "$sources" ] && sed -i 's/^Types: *deb$/Types: deb deb-src/' "$sources"
done
grep -qs . /etc/apt/sources.list.d/archwheel-deb-src.list /etc/apt/sources.list.d/*.sources \
    || { echo "the base image has no deb entry to copy" >&2; exit 3; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev >/dev/null
"""


@dataclass(frozen=True)
class DscFile:
    """One file of a source package, as the ``.dsc``'s ``Checksums-Sha256`` names it."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Dsc:
    """What archwheel reads from a ``.dsc``: the package, its version and its files."""

    source: str
    version: str
    files: tuple[DscFile, ...]


def parse_dsc(text: str, where: str) -> Dsc:
    """The ``Source``, ``Version`` and ``Checksums-Sha256`` fields of a ``.dsc`` (signed or
    not); ``InputError`` for a ``.dsc`` without them or with a malformed line."""
    body = text
    if body.startswith("-----BEGIN PGP SIGNED MESSAGE-----"):
        body = body.split("\n\n", 1)[1] if "\n\n" in body else ""
        body = body.split("\n-----BEGIN PGP SIGNATURE-----", 1)[0]
    fields: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        if line.startswith((" ", "\t")) and current is not None:
            current.append(line.strip())
        elif ":" in line:
            key, _, value = line.partition(":")
            current = fields.setdefault(key.strip().lower(), [])
            if value.strip():
                current.append(value.strip())
        elif line.strip():
            raise InputError(f"{where}: not a .dsc line: {line[:80]!r}")
    try:
        source, version = fields["source"][0], fields["version"][0]
        lines = fields["checksums-sha256"]
    except (KeyError, IndexError):
        raise InputError(f"{where}: no Source, Version or Checksums-Sha256 field") from None
    files = []
    for line in lines:
        parts = line.split()
        if len(parts) != 3 or not _SHA256.match(parts[0]) or not parts[1].isdigit():
            raise InputError(f"{where}: Checksums-Sha256 line {line[:100]!r} is malformed")
        name = parts[2]
        if "/" in name or name.startswith("."):
            raise InputError(f"{where}: Checksums-Sha256 names {name!r}, not a file beside it")
        files.append(DscFile(name, int(parts[1]), parts[0]))
    if not files:
        raise InputError(f"{where}: Checksums-Sha256 lists no file")
    return Dsc(source, version, tuple(files))


def verify_files(folder: Path, dsc: Dsc, dsc_name: str) -> list[dict[str, object]]:
    """Every file ``dsc`` names, in ``folder``: its size and sha256 as the ``.dsc`` says, else
    ``InputError`` naming the file; the files' records, for provenance."""
    records: list[dict[str, object]] = []
    for entry in dsc.files:
        path = folder / entry.name
        if not path.is_file():
            raise InputError(f"{dsc_name} names {entry.name}, which was not downloaded")
        size = path.stat().st_size
        digest = sha256_file(path)
        if size != entry.size or digest != entry.sha256:
            raise InputError(
                f"{entry.name} has sha256 {digest} ({size} bytes), {dsc_name} says "
                f"{entry.sha256} ({entry.size} bytes)",
                hint="the file changed on its way from the archive; never build an unverified "
                "source",
            )
        records.append({"file": entry.name, "sha256": digest, "size": size})
    return records


def changelog_epoch(changelog: Path) -> int | None:
    """The Unix time of the top entry of a ``debian/changelog`` (its `` -- NAME <MAIL>  DATE``
    trailer); None when the file has none that parses."""
    try:
        with changelog.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith(" -- ") and "  " in line.rstrip():
                    stamp = line.rstrip().rsplit("  ", 1)[1]
                    try:
                        return int(email.utils.parsedate_to_datetime(stamp).timestamp())
                    except (TypeError, ValueError):
                        return None
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class IndexEntry:
    """One file ``apt-get source --print-uris`` names: where, and its size and sha256."""

    uri: str
    name: str
    size: int
    sha256: str


def parse_print_uris(text: str) -> list[IndexEntry]:
    """The ``'URI' NAME SIZE SHA256:HEX`` lines of ``apt-get source --print-uris``."""
    found = []
    for line in text.splitlines():
        match = _URI_LINE.fullmatch(line.strip())
        if match and _SHA256.match(match["sha"]):
            found.append(
                IndexEntry(unquote(match["uri"]), match["name"], int(match["size"]), match["sha"])
            )
    return found


@dataclass(frozen=True)
class DebianTree:
    """A fetched, verified and unpacked source package: the tree and what provenance records."""

    root: Path
    record: Mapping[str, object]
    epoch: int | None


def folder_name(package: str, version: str) -> str:
    """``pytorch_2.6.0+dfsg-7``: a cache folder name (an epoch's ``:`` written ``%3a``)."""
    return f"{package}_{version.replace(':', '%3a')}"


def cached_tree(spec: SourceSpec, cache: Path) -> DebianTree | None:
    """The tree of an earlier fetch of ``spec`` (nothing read from the network), or None."""
    assert spec.debian is not None and spec.project_version is not None
    base = cache / "sources" / DEBIAN
    stem = folder_name(spec.debian, spec.project_version)
    pointer = base / f"{stem}.dsc-sha256"
    digest = spec.sha256
    if digest is None:
        try:
            digest = pointer.read_text().strip()
        except OSError:
            return None
    folder = base / f"{stem}-{digest[:16]}"
    if not (folder / _COMPLETE).is_file():
        return None
    record = json.loads((folder / "record.json").read_text())
    if record.get("dsc_sha256") != digest:
        return None
    dsc_path = folder / "download" / str(record["dsc"])
    if sha256_file(dsc_path) != digest:
        raise InputError(f"{dsc_path} in the cache is not the .dsc it was; delete {folder}")
    verify_files(folder / "download", parse_dsc(dsc_path.read_text(), str(dsc_path)), dsc_path.name)
    epoch = record.get("source_date_epoch")
    return DebianTree(folder / "tree", record, epoch if isinstance(epoch, int) else None)


def fetch_debian_source(
    spec: SourceSpec,
    cache: Path,
    engine: ContainerEngine,
    image: str,
    *,
    user: tuple[int, int],
    echo: Echo | None = None,
) -> DebianTree:
    """``spec``'s source package, from the cache or fetched in ``image`` (the suite's Debian
    base) as the module says; ``RecipeError`` for a version the archive does not serve."""
    assert spec.debian is not None and spec.project_version is not None
    found = cached_tree(spec, cache)
    if found is not None:
        return found
    package, version = spec.debian, spec.project_version
    base = cache / "sources" / DEBIAN
    base.mkdir(parents=True, exist_ok=True)
    staged = owned_tempdir("archwheel-debian-", base)
    try:
        staged.chmod(0o755)  # the build user reaches /work/download and /work/unpack
        for sub in ("download", "unpack"):
            (staged / sub).mkdir()
            _give(staged / sub, user)
        container_spec = ContainerSpec(
            image=image, network="host", mounts=(Mount(str(staged), "/work"),)
        )
        with engine.container(container_spec) as box:
            record = _fetch_in(box, package, version, spec.sha256, staged, user, echo)
        digest = str(record["dsc_sha256"])
        final = base / f"{folder_name(package, version)}-{digest[:16]}"
        (staged / "unpack" / "tree").rename(staged / "tree")
        shutil.rmtree(staged / "unpack")  # dpkg-source's copies of the tarballs
        (staged / "record.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        (staged / _COMPLETE).write_text("complete\n")
        if final.exists():
            shutil.rmtree(final)
        staged.rename(final)
        (staged.parent / (staged.name + ".owner")).unlink(missing_ok=True)
        (base / f"{folder_name(package, version)}.dsc-sha256").write_text(digest + "\n")
    finally:
        if staged.exists():
            remove_owned(staged)
    epoch = record.get("source_date_epoch")
    return DebianTree(final / "tree", record, epoch if isinstance(epoch, int) else None)


def _give(folder: Path, user: tuple[int, int]) -> None:
    """The build user may write into ``folder`` (the host may run as root)."""
    try:
        os.chown(folder, *user)
    except PermissionError:
        folder.chmod(0o777)


def _exec(box: Container, script: str, user: tuple[int, int] | None) -> CommandResult:
    args = ["exec", "--workdir", "/work/download"]
    if user is not None:
        args += ["--user", f"{user[0]}:{user[1]}", "--env", "HOME=/tmp"]
    return box.engine.run(*args, box.name, "sh", "-c", script, check=False, quiet=True)


def _fetch_in(  # noqa: PLR0917 (one fetch: the container, what to fetch, where, as whom)
    box: Container,
    package: str,
    version: str,
    pinned: str | None,
    staged: Path,
    user: tuple[int, int],
    echo: Echo | None,
) -> dict[str, object]:
    """Steps 1-5 of the module in the running container ``box``; the provenance record."""
    wanted = f"{package}={version}"
    if echo:
        echo(f"+ apt-get source {wanted} (deb-src of {box.spec.image}'s own archive)")
    setup = _exec(box, _SETUP, None)
    if setup.returncode != 0:
        raise ToolError(
            f"apt-get update in {box.spec.image} failed (exit {setup.returncode}): "
            f"{last_line(setup.stderr or setup.stdout, limit=300)}",
            hint="the Debian archive of the base image must be reachable from this host",
        )
    listed = _exec(box, f"apt-get source --print-uris '{wanted}'", user)
    entries = parse_print_uris(listed.stdout)
    dsc_entry = next((e for e in entries if e.name.endswith(".dsc")), None)
    if listed.returncode != 0 or dsc_entry is None:
        raise RecipeError(
            f"[source] debian: the archive of {box.spec.image} has no source package {wanted}: "
            f"{last_line(listed.stderr or listed.stdout, limit=200)}",
            hint=f"`apt-cache showsrc {package}` in that base lists the versions it serves",
        )
    fetched = _exec(box, f"apt-get source --download-only '{wanted}'", user)
    if fetched.returncode != 0:
        why = last_line(fetched.stderr or fetched.stdout, limit=200)
        raise RecipeError(
            f"[source] debian: the archive lists {wanted} but does not serve its files: {why}",
            hint="an index can list a version whose files are gone from the pool; choose a "
            "version the archive serves",
        )
    download = staged / "download"
    dsc_path = download / dsc_entry.name
    dsc_sha = sha256_file(dsc_path) if dsc_path.is_file() else ""
    if dsc_sha != dsc_entry.sha256:
        raise InputError(
            f"{dsc_entry.name} has sha256 {dsc_sha or '(missing)'}, apt's verified index says "
            f"{dsc_entry.sha256}",
            hint="the file changed on its way from the archive; never build an unverified source",
        )
    if pinned is not None and dsc_sha != pinned:
        raise InputError(
            f"{dsc_entry.name} has sha256 {dsc_sha}, the recipe's [source] sha256 says {pinned}",
            hint="the archive serves another upload of this version, or the recipe is wrong",
        )
    if dsc_path.stat().st_size > MAX_DSC_BYTES:
        raise InputError(f"{dsc_entry.name} is larger than {MAX_DSC_BYTES} bytes")
    dsc = parse_dsc(dsc_path.read_text(errors="replace"), dsc_entry.name)
    if dsc.source != package or dsc.version != version:
        raise InputError(f"{dsc_entry.name} is {dsc.source} {dsc.version}, not {wanted}")
    files = verify_files(download, dsc, dsc_entry.name)
    unpacked = _exec(box, f"dpkg-source -x '{dsc_entry.name}' /work/unpack/tree", user)
    if unpacked.returncode != 0:
        raise ToolError(
            f"dpkg-source -x {dsc_entry.name} failed (exit {unpacked.returncode}): "
            f"{last_line(unpacked.stderr or unpacked.stdout, limit=300)}"
        )
    tree = staged / "unpack" / "tree"
    return {
        "package": package,
        "version": version,
        "image": box.spec.image,
        "archive": sorted({e.uri.rsplit("/", 1)[0] + "/" for e in entries}),
        "dsc": dsc_entry.name,
        "dsc_sha256": dsc_sha,
        "dsc_sha256_from": "apt's Sources index, verified by apt against the suite's InRelease",
        "files": [{"file": dsc_entry.name, "sha256": dsc_sha, "size": dsc_entry.size}, *files],
        "patches_applied": applied_patches(tree),
        "source_date_epoch": changelog_epoch(tree / "debian" / "changelog"),
    }


def applied_patches(tree: Path) -> list[str]:
    """The Debian patches ``dpkg-source -x`` applied, in order (quilt's ``.pc/applied-patches``,
    else ``debian/patches/series``)."""
    for listing in (tree / ".pc" / "applied-patches", tree / "debian" / "patches" / "series"):
        try:
            text = listing.read_text()
        except OSError:
            continue
        return [line.split()[0] for line in text.splitlines() if line.strip() and line[0] != "#"]
    return []


DebianFetch = Callable[[SourceSpec, Path], DebianTree]
"""What ``source.resolve_source`` calls for a ``debian`` source: (spec, cache folder)."""
