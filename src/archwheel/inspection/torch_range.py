"""can-load across torch releases: which torches will an extension wheel load with?

``archwheel can-load EXT.whl --torch ">=2.11"`` (or ``--torch 2.13.0,2.14.1,2.15.0``) finds the
torch wheels of those releases for the extension's CPython and machine on the indexes pip is
configured with (their simple API; find-links folders too), reads of each only what the loader
model needs, and judges the extension against each as ``can-load --with`` does.

What is read (docs/verdicts.md, "Across torch releases"):

- a wheel on a local path or a ``file://`` index is read in place;
- a wheel on an http(s) index is read by range requests (``effects.ranged``): its zip directory,
  its metadata, and of each shared library the compressed bytes up to the last byte the loader
  model needs. A deflate stream can only be inflated from its start, so a library whose dynamic
  tables lie at its end (torch's own libraries: patchelf moved ``.dynstr`` and ``.gnu.hash``
  into a segment appended after the code) is read whole; a library whose tables lie at its
  start is read only that far;
- what was read is kept under the cache folder as the loader's view of the torch wheel, so
  that a later check against the same torch reads nothing; the raw blocks are dropped once that
  view is kept. A view is kept only under a sha256 archwheel computed over the whole wheel and
  found equal to the one the index states (``RangedFile.verify`` fetches what the ranges left
  out); a wheel whose index states no sha256 is judged but nothing of it is kept, and a
  mismatch is that release's error, with nothing kept (docs/verdicts.md, "What is trusted");
- every request is bounded in time (``effects.deadline``): its headers by the request bound,
  all of a run's requests together by the run's ``NetBudget``; a release not read when the run's
  bound is reached is that release's error, named.

The results are ``verdicts.torch_range``'s types; with ``host_libraries`` this host's own
copies of the system libraries the extension's manylinux policy allows stand in for them (as
``can-load --with``), without them the policy does (the build's range gate, ``matrix
--recheck``).

A release the index does not have, a wheel that cannot be read and a check that cannot be made
are reported as such, and make the answer incomplete, never "loads".
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import platform
import ssl
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from archwheel.binary.dynamic import DynamicInfo, UndefinedSymbol
from archwheel.effects.deadline import NetBudget
from archwheel.effects.files import write_bytes_atomic
from archwheel.effects.net import is_sha256
from archwheel.effects.pipconfig import PipSettings
from archwheel.effects.ranged import (
    HashMismatch,
    LocalFile,
    RangedFile,
    Transfer,
    is_local,
    local_path,
)
from archwheel.effects.simple_index import fetch_page, index_urls
from archwheel.errors import ArchwheelError, InputError, ToolError
from archwheel.facts.documents import load_document
from archwheel.inspection.loading import LOADERS, host_library_files
from archwheel.inspection.wheel_files import read_wheel_files
from archwheel.verdicts.load import WheelFiles, judge_load, policy_for
from archwheel.verdicts.torch_range import TorchCheck, TorchRangeReport
from archwheel.verdicts.torch_releases import (
    TorchFile,
    available_releases,
    choose_torch_files,
    extension_target,
    missing_releases,
    parse_torch_request,
    serving_python,
)

__all__ = [
    "TorchCheck",
    "TorchListing",
    "TorchRangeReport",
    "can_load_range",
    "list_torch_files",
    "torch_releases_for",
]

CACHE_FORMAT = 1
MAX_CACHED_VIEW = 256 << 20  # the loader's view of one torch wheel, as kept (torch 2.15: ~20 MB)
MAX_VIEW_NESTING = 16  # a kept view nests 7 deep
VIEWS = "torch-views"  # the kept views' folder under the cache folder

Event = Callable[[str], None]


def _target(tags: tuple[str, ...], python: str | None, say: Event) -> tuple[str, str]:
    """The CPython tag and machine whose torch builds ``tags`` are judged with: ``python`` where
    given; for an abi3 or ``py3-none`` wheel the Python its tag serves (this host's, else the
    lowest), said in one line; a ``-any`` wheel takes this host's machine."""
    if python is None:
        host = f"{sys.version_info.major}.{sys.version_info.minor}"
        served = serving_python(tags, host)
        if served is not None:
            python, why = served
            say(f"Python {python}: {why} (--python-version X.Y to read another's torch builds)")
    return extension_target(tags, python, host_machine=platform.machine())


def can_load_range(
    wheel: Path,
    torch: str,
    *,
    pip: PipSettings,
    cache: Path,
    python: str | None = None,
    host_libraries: bool = True,
    on_event: Event | None = None,
    listing: TorchListing | None = None,
    budget: NetBudget | None = None,
) -> TorchRangeReport:
    """``wheel`` judged against each torch release ``torch`` names (see the module doc).

    ``pip``: the indexes to look on; ``cache``: archwheel's cache folder; ``python``: the
    Python (``3.11``) of an extension whose tags name none; ``host_libraries``: this host's
    libc and libstdc++ stand in for the system libraries the extension's policy allows (False:
    the policy stands for them, as in a build's gates); ``listing``: the indexes' torch files,
    read already (``list_torch_files``: a caller checking many wheels reads them once);
    ``budget``: the run's network time (None: one of the default limits, from now).
    ``UsageError`` for a bad request, ``InputError`` when the extension cannot be read,
    ``ToolError`` when no index answers."""
    say = on_event or (lambda _line: None)
    budget = budget or NetBudget()
    request = parse_torch_request(torch)
    if wheel.suffix != ".whl":
        raise InputError(f"{wheel}: not a wheel (.whl)")
    files = read_wheel_files(wheel)
    interpreter, machine = _target(files.tags, python, say)
    indexes, listed = (
        listing if listing is not None else list_torch_files(pip, on_event=say, budget=budget)
    )
    chosen = choose_torch_files(listed, request, interpreter, machine)
    if not chosen and not request.exact:
        raise ToolError(
            f"no torch wheel for {interpreter} on {machine} matches {torch!r} on "
            + (", ".join(indexes) or "the configured indexes"),
            hint="check the range, or pip's index settings (`pip config list`, --index-url)",
        )
    libraries = _host_system(files) if host_libraries else {}
    context = ssl.create_default_context(cafile=str(pip.ca_bundle) if pip.ca_bundle else None)
    checks = []
    if sum(not is_local(item.url) for item in chosen) > 1:
        say(
            f"{len(chosen)} torch releases to check: the network reads of this run stop after "
            f"{max(budget.left(), 0):.0f} s more (the setting ARCHWHEEL_NET_RUN_TIMEOUT)"
        )
    spent = False
    for item in chosen:
        say(f"torch {item.version}: {item.filename}")
        if budget.spent and not spent and not is_local(item.url):
            spent = True
            say(f"{budget.over()}: the releases not read yet are unknown")
        check = _check(
            files, item, system=libraries, cache=cache, context=context, say=say, budget=budget
        )
        checks.append(check)
    return TorchRangeReport(
        wheel=files,
        request=torch,
        interpreter=interpreter,
        machine=machine,
        indexes=indexes,
        checks=tuple(checks),
        not_found=missing_releases(request, chosen),
        available=available_releases(listed, interpreter, machine),
    )


def torch_releases_for(
    wheel: Path,
    *,
    pip: PipSettings,
    python: str | None = None,
    on_event: Event | None = None,
    listing: TorchListing | None = None,
    budget: NetBudget | None = None,
) -> tuple[str, ...]:
    """Every public torch release the indexes (and find-links folders) hold a wheel of for
    ``wheel``'s CPython and machine, oldest first (``matrix --recheck``: which appeared since
    a wheel was checked); ``listing`` as ``can_load_range``'s. ``ToolError`` when no index
    answers."""
    files = read_wheel_files(wheel)
    interpreter, machine = _target(files.tags, python, on_event or (lambda _line: None))
    _, listed = (
        listing if listing is not None else list_torch_files(pip, on_event=on_event, budget=budget)
    )
    return available_releases(listed, interpreter, machine)


class TorchListing(NamedTuple):
    """The torch files on the configured indexes and find-links folders: where was asked, and
    each file as (file name, URL, sha256 or None, size or None)."""

    indexes: tuple[str, ...]
    files: tuple[tuple[str, str, str | None, int | None], ...]


def list_torch_files(
    pip: PipSettings, *, on_event: Event | None = None, budget: NetBudget | None = None
) -> TorchListing:
    """Every torch file on the configured indexes and find-links folders (one request per
    index: torch's page lists thousands of files). ``ToolError`` when no index answers."""
    indexes, found = _torch_files(pip, on_event or (lambda _line: None), budget or NetBudget())
    return TorchListing(indexes, tuple(found))


def _torch_files(
    pip: PipSettings, say: Event, budget: NetBudget
) -> tuple[tuple[str, ...], list[tuple[str, str, str | None, int | None]]]:
    """Every torch file on the configured indexes and find-links folders."""
    found: list[tuple[str, str, str | None, int | None]] = []
    asked: list[str] = []
    failures: list[ArchwheelError] = []
    for index in index_urls(pip):
        try:
            page = fetch_page(index, "torch", pip, budget=budget)
        except ToolError as exc:  # one unreachable index does not hide the others
            failures.append(exc)
            continue
        asked.append(index)
        say(f"index {index}: {0 if page is None else len(page)} torch files")
        found.extend((f.filename, f.url, f.sha256, f.size) for f in page or [])
    for link in pip.find_links:
        if not is_local(link):
            continue
        folder = local_path(link)
        if folder.is_dir():
            asked.append(str(folder))
            for path in sorted(folder.glob("torch-*.whl")):
                if path.is_file():
                    found.append((path.name, path.as_uri(), None, path.stat().st_size))
    if not asked and failures:
        raise failures[0]
    return tuple(asked), found


def _check(
    files: WheelFiles,
    item: TorchFile,
    *,
    system: Mapping[str, DynamicInfo],
    cache: Path,
    context: ssl.SSLContext,
    say: Event,
    budget: NetBudget,
) -> TorchCheck:
    """``files`` judged against one torch wheel: a local one read in place, a remote one from
    its kept view (keyed by a sha256 archwheel verified) or by ranges, verified against the
    sha256 its index states before its view is kept (docs/verdicts.md, "What is trusted")."""
    base = TorchCheck(str(item.version), item.filename, item.url, item.size, None)
    if is_local(item.url):
        return _check_local(files, item, base, system)
    if item.sha256 is not None and not is_sha256(item.sha256):
        return dataclasses.replace(
            base,
            error=f"the index states the sha256 {item.sha256[:80]!r} for {item.filename}, "
            "which is not one: not read",
        )
    # Only a view kept under a sha256 archwheel computed over the whole file is ever read.
    view_path = None if item.sha256 is None else cache / VIEWS / f"{item.sha256}.json"
    kept = None if view_path is None else _cached_view(view_path, item.filename, say)
    if kept is not None:
        report = judge_load(files, kept, (), system)
        return dataclasses.replace(base, report=report, cached=True)
    if budget.spent:
        return dataclasses.replace(base, error=f"not read: {budget.over()}")
    cost = _Cost(Transfer(), item.size)
    try:
        torch = _read_remote(item, cost, cache=cache, context=context, say=say, budget=budget)
    except ArchwheelError as exc:
        return dataclasses.replace(base, size=cost.size, error=exc.one_line(), **cost.fields())
    except OSError as exc:  # the server or the cache folder failed (effects.ranged says which)
        why = " ".join(str(exc).split())
        return dataclasses.replace(base, size=cost.size, error=why, **cost.fields())
    report = judge_load(files, torch, (), system)
    return dataclasses.replace(base, size=cost.size, report=report, **cost.fields())


@dataclass
class _Cost:
    """What reading one torch wheel cost so far (kept when the reading fails)."""

    transfer: Transfer
    size: int | None

    def fields(self) -> dict[str, Any]:
        return _cost(self.transfer)


def _read_remote(
    item: TorchFile,
    cost: _Cost,
    *,
    cache: Path,
    context: ssl.SSLContext,
    say: Event,
    budget: NetBudget,
) -> WheelFiles:
    """The loader's view of a torch wheel on an http(s) index, read by ranges and verified
    against the sha256 the index states; kept (under that sha256) only when it matched. Blocks
    an earlier run kept that do not match are discarded and read again once."""
    for attempt in (1, 2):
        remote = RangedFile(
            item.url, cache / "ranges", size=item.size, digest=item.sha256, context=context,
            progress=_progress(say, item.filename), budget=budget,
        )  # fmt: skip
        cost.transfer, cost.size = remote.transfer, remote.size
        try:
            torch = read_wheel_files(Path(item.filename), source=remote)
            if remote.transfer.whole:
                say(f"{item.filename}: the server does not serve ranges: downloaded whole")
            verified = remote.verify()
        except HashMismatch:
            remote.discard()  # nothing of a file that is not what the index says is kept
            if remote.reused and attempt == 1:
                say(
                    f"warning: {item.filename}: the blocks kept by an earlier run do not "
                    "match the index's sha256: discarded, read again"
                )
                continue
            raise
        except BaseException:
            if remote.transfer.whole_failed:  # nothing half-written is kept
                remote.discard()
                say(f"warning: {item.filename}: the download failed: nothing of it kept")
            else:
                remote.close()  # whole blocks stay, checked by ``verify`` before any use
            raise
        if not verified:
            remote.discard()
            say(
                f"{item.filename}: the index states no sha256: read, but not verified, so "
                "nothing of it is kept"
            )
        elif torch.libraries and all(lib.complete for lib in torch.libraries):
            assert item.sha256 is not None  # verified: the index stated it, and it matched
            _keep_view(cache / VIEWS / f"{item.sha256}.json", torch)
            remote.discard()  # the raw blocks: the view is what a later run reads
        else:
            remote.close()
        return torch
    raise AssertionError("unreachable")


def _check_local(
    files: WheelFiles, item: TorchFile, base: TorchCheck, system: Mapping[str, DynamicInfo]
) -> TorchCheck:
    """A torch wheel in a local index or find-links folder the user named, read in place (a
    regular file only; nothing is kept: reading it again costs no network)."""
    transfer, size = Transfer(), item.size
    try:
        with LocalFile(local_path(item.url)) as local:
            transfer, size = local.transfer, local.size
            torch = read_wheel_files(Path(item.filename), source=local)
    except ArchwheelError as exc:
        return dataclasses.replace(base, size=size, error=exc.one_line(), **_cost(transfer))
    except OSError as exc:
        name = getattr(exc, "filename", None) or item.url
        why = " ".join(f"{name}: {exc.strerror or exc}".split())
        return dataclasses.replace(base, size=size, error=why, **_cost(transfer))
    report = judge_load(files, torch, (), system)
    return dataclasses.replace(base, size=size, report=report, **_cost(transfer))


def _cost(transfer: Transfer) -> dict[str, Any]:
    return {
        "fetched": transfer.fetched,
        "requests": transfer.requests,
        "whole_download": transfer.whole,
    }


def _progress(say: Event, name: str) -> Callable[[int, int], None]:
    shown = [-1]

    def progress(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if tenth != shown[0]:
            shown[0] = tenth
            say(f"{name}: downloading whole, {done >> 20} of {total >> 20} MiB")

    return progress


# -- the loader's view of a torch wheel, kept --------------------------------------------------


def _keep_view(path: Path, files: WheelFiles) -> None:
    document = {"format": CACHE_FORMAT, "wheel": dataclasses.asdict(files)}
    data = json.dumps(document, separators=(",", ":")).encode()
    if len(data) <= MAX_CACHED_VIEW:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)


def _cached_view(path: Path, filename: str, say: Event | None = None) -> WheelFiles | None:
    """The kept view, or None: absent, another file's or another version's (read again), or
    damaged (too large, not JSON, nested too deep, fields of the wrong type): then it is removed
    with one warning, and the wheel read again."""
    try:
        if not path.is_file():
            return None
        if path.stat().st_size > MAX_CACHED_VIEW:
            raise ValueError(f"larger than {MAX_CACHED_VIEW} bytes")
        document = load_document(
            path.read_bytes(), origin="view", nesting=MAX_VIEW_NESTING, error=ValueError
        )
        if not isinstance(document, dict):
            raise ValueError("not a JSON object")
        if document.get("format") != CACHE_FORMAT:
            return None  # another version's: replaced when this one is kept
        files = _wheel_from(document["wheel"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        if say is not None:
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            say(f"warning: the kept view {path} is damaged ({why}): removed, read again")
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return files if files.filename == filename else None


def _wheel_from(raw: dict[str, Any]) -> WheelFiles:
    return WheelFiles(
        filename=str(raw["filename"]),
        name=str(raw["name"]),
        version=str(raw["version"]),
        tags=tuple(str(t) for t in raw["tags"]),
        libraries=tuple(_library_from(lib) for lib in raw["libraries"]),
        requires=tuple((str(a), str(b), str(c)) for a, b, c in raw["requires"]),
        cuda_major=None if raw["cuda_major"] is None else int(raw["cuda_major"]),
    )


def _library_from(raw: dict[str, Any]) -> DynamicInfo:
    def strings(key: str) -> tuple[str, ...]:
        return tuple(str(v) for v in raw[key])

    return DynamicInfo(
        path=str(raw["path"]),
        size=int(raw["size"]),
        file_kind=str(raw["file_kind"]),
        is_dynamic=bool(raw["is_dynamic"]),
        machine=int(raw["machine"]),
        soname=None if raw["soname"] is None else str(raw["soname"]),
        needed=strings("needed"),
        rpath=strings("rpath"),
        runpath=strings("runpath"),
        bind_now=bool(raw["bind_now"]),
        undefined=tuple(UndefinedSymbol(**u) for u in raw["undefined"]),
        exports={
            str(name): tuple(None if v is None else str(v) for v in versions)
            for name, versions in raw["exports"].items()
        },
        version_definitions=strings("version_definitions"),
        version_needs=tuple((str(f), tuple(str(v) for v in vs)) for f, vs in raw["version_needs"]),
        problems=strings("problems"),
    )


def _host_system(files: WheelFiles) -> Mapping[str, DynamicInfo]:
    """This host's copies of the system libraries ``files``'s manylinux policy allows."""
    policy = policy_for(files.tags)
    return {} if policy is None else host_library_files(policy.libraries | LOADERS)
