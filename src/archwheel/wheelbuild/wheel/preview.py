"""The repair step on a partial build (``--targets``), before the whole build: the shared
libraries the build tree holds, packed as the wheel will hold them and repaired as it will be.

A PyTorch build takes hours and its repair step (the RPATHs, the bundled libraries, the
``Requires-Dist`` pins, the platform tag auditwheel agrees to) runs on the wheel at its end. A
partial build that made c10 and c10_cuda runs it now: the regular ELF shared objects of
``[build] build_folder``/lib (links skipped, never followed: a container wrote that folder) go
into a preview wheel under the recipe's library folder, each under its SONAME, and the recipe's
``[repair]`` runs on it with the same code as at the end of a build. Each repaired library is
then set beside the same library of the official wheel of the release
(``facts/pytorch_official.toml``): its SONAME, what it needs from outside the wheel that the
official one does not (and the reverse), its RPATH. The preview wheel's version carries the
local label ``+partial``; it is kept beside the kept tree, never in the output folder.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from archwheel.binary.dynamic import DynamicInfo, read_file_dynamic
from archwheel.binary.dynamic_wheel import read_wheel_dynamic
from archwheel.binary.elf import ELF_MAGIC
from archwheel.effects.engine import ContainerEngine
from archwheel.effects.files import open_regular
from archwheel.facts.pytorch_official import OfficialFacts, OfficialVariant, load_official
from archwheel.wheelbuild.recipes.recipe_model import Recipe
from archwheel.wheelbuild.wheel.repair import RepairSpec, repair_step

PARTIAL = "partial"  # the local version label of a preview wheel
LIBRARY_FOLDER = "lib"  # under [build] build_folder: where CMake projects put their libraries
_SONAME = re.compile(r"^[A-Za-z0-9_+.-]+\.so(\.[0-9]+)*\Z")
MAX_LIBRARIES = 256
MAX_LIBRARY_BYTES = 8 << 30  # one library (PyTorch's largest, libtorch_cuda.so: about 1 GiB)


def tree_libraries(folder: Path, into: Path) -> tuple[Path, ...]:
    """Copy the regular ELF shared objects of ``folder`` into ``into``, each under its SONAME
    (the file name without one); links, other files and files over ``MAX_LIBRARY_BYTES`` are
    skipped, a second file with a SONAME already taken too. Returns the copies, by name."""
    if folder.is_symlink() or not folder.is_dir():
        return ()
    into.mkdir(parents=True, exist_ok=True)
    taken: dict[str, Path] = {}
    entries = sorted(os.scandir(folder), key=lambda e: e.name)
    for entry in entries[: MAX_LIBRARIES * 4]:
        if ".so" not in entry.name or not entry.is_file(follow_symlinks=False):
            continue
        if entry.stat(follow_symlinks=False).st_size > MAX_LIBRARY_BYTES:
            continue  # no library is that large: not copied (the disk is not filled)
        part = into / f".{len(taken)}.part"
        try:
            with open_regular(entry.path) as source:
                if source.read(4) != ELF_MAGIC:
                    continue
                source.seek(0)
                with part.open("wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
        except OSError:
            part.unlink(missing_ok=True)
            continue
        info = read_file_dynamic(part, entry.name)
        name = info.soname or entry.name
        if info.file_kind != "shared-object" or not _SONAME.match(name) or name in taken:
            part.unlink()
            continue
        part.rename(into / name)
        taken[name] = into / name
        if len(taken) >= MAX_LIBRARIES:
            break
    return tuple(taken[name] for name in sorted(taken))


def preview_wheel(
    libraries: Iterable[Path],
    *,
    distribution: str,
    version: str,
    python: str,
    library_folder: str,
    into: Path,
) -> Path:
    """A wheel holding ``libraries`` in ``library_folder``, version ``VERSION+partial``, for
    CPython ``python`` (``3.13``, ``3.13t``) on linux_x86_64: what the repair step takes."""
    nodot = python.removesuffix("t").replace(".", "")
    tag = f"cp{nodot}-cp{nodot}{'t' if python.endswith('t') else ''}-linux_x86_64"
    full = f"{version}+{PARTIAL}"
    dist_info = f"{distribution}-{full}.dist-info"
    wheel = into / f"{distribution}-{full}-{tag}.whl"
    into.mkdir(parents=True, exist_ok=True)
    meta = {
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {full}\n"
        "Summary: the libraries of a partial build, for the repair step's preview\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: archwheel\n"
        f"Root-Is-Purelib: false\nTag: {tag}\n",
        f"{dist_info}/RECORD": "",
    }
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as out:
        for path in libraries:
            info = zipfile.ZipInfo(f"{library_folder}/{path.name}", (1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o100755 << 16
            with path.open("rb") as src, out.open(info, "w", force_zip64=True) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        for name, text in meta.items():
            out.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), text)
    return wheel


@dataclass(frozen=True)
class LibraryRow:
    """One repaired library beside the same library of the official wheel (None: it has none)."""

    library: str
    soname: str | None
    rpath: str
    official: bool  # the official wheel ships a library of this name
    official_soname: str | None = None
    more: tuple[str, ...] = ()  # needed from outside the wheel; the official one does not
    less: tuple[str, ...] = ()  # the official one needs from outside its wheel; this one not

    def line(self) -> str:
        """One line of the report."""
        if not self.official:
            return f"{self.library}: not in the official wheel"
        parts = [
            "same SONAME"
            if self.soname == self.official_soname
            else f"SONAME {self.soname} (official: {self.official_soname})"
        ]
        if self.more:
            parts.append(f"needs {', '.join(self.more)}, which the official one does not")
        if self.less:
            parts.append(f"does not need the official one's {', '.join(self.less)}")
        if not self.more and not self.less:
            parts.append("needs what the official one needs")
        return f"{self.library}: {'; '.join(parts)}"

    def to_json_dict(self) -> dict[str, object]:
        """The row in the provenance and ``--format json``."""
        return {
            "library": self.library,
            "soname": self.soname,
            "rpath": self.rpath,
            "official": self.official,
            "official_soname": self.official_soname,
            "more": list(self.more),
            "less": list(self.less),
        }


@dataclass(frozen=True)
class RepairPreview:
    """The repair step's record on a partial build's libraries, and how each compares with the
    official wheel of the release (``against`` ""; no official wheel of it is recorded)."""

    wheel: Path | None  # the repaired preview wheel where it was kept
    record: Mapping[str, object]  # the repair step's record, as a build's provenance has it
    against: str  # "2.6.0/cu124 (CUDA 12.4)"
    rows: tuple[LibraryRow, ...]

    def lines(self) -> list[str]:
        """The report after the repair step's own lines."""
        audit = self.record.get("auditwheel", {})
        tags = audit if isinstance(audit, Mapping) else {}
        out = [
            f"tag: {self.record.get('platform')} (auditwheel: overall "
            f"{tags.get('overall_tag', '?')}, symbols {tags.get('sym_tag', '?')})"
        ]
        if not self.against:
            return [*out, "no official wheel of this release is recorded to compare with"]
        out.append(f"against the official wheel {self.against}:")
        out.extend(f"  {row.line()}" for row in self.rows)
        return out

    def to_json_dict(self) -> dict[str, object]:
        """The preview in the provenance and ``--format json``."""
        return {
            "wheel": self.wheel.name if self.wheel else None,
            "repair": dict(self.record),
            "against": self.against,
            "libraries": [row.to_json_dict() for row in self.rows],
        }


def compare_libraries(
    repaired: Iterable[DynamicInfo], variant: OfficialVariant, library_folder: str
) -> tuple[LibraryRow, ...]:
    """Each library of ``library_folder`` in the repaired preview beside the official one."""
    infos = [i for i in repaired if i.path.startswith(f"{library_folder}/")]
    ours = {Path(i.path).name for i in infos}
    theirs_inside = set(variant.libraries) | {"libgomp.so.1"}
    rows = []
    for info in sorted(infos, key=lambda i: i.path):
        name = Path(info.path).name
        rpath = ":".join(info.rpath or info.runpath)
        needed = variant.needed.get(name)
        if name not in variant.libraries or needed is None:
            rows.append(LibraryRow(name, info.soname, rpath, name in variant.libraries))
            continue
        outside = set(info.needed) - ours
        official_outside = set(needed) - theirs_inside
        rows.append(
            LibraryRow(
                library=name,
                soname=info.soname,
                rpath=rpath,
                official=True,
                official_soname=name,
                more=tuple(sorted(outside - official_outside)),
                less=tuple(sorted(official_outside - outside)),
            )
        )
    return tuple(rows)


def read_preview(
    wheel: Path, record: Mapping[str, object], variant: OfficialVariant | None, folder: str
) -> RepairPreview:
    """The preview of the repaired ``wheel``: its libraries read back, compared."""
    if variant is None:
        return RepairPreview(wheel, record, "", ())
    rows = compare_libraries(read_wheel_dynamic(wheel), variant, folder)
    return RepairPreview(wheel, record, f"{variant.key} (CUDA {variant.cuda})", rows)


class _Output(Protocol):
    def stage(self, name: str, description: str) -> None: ...
    def line(self, text: str) -> None: ...


@dataclass(frozen=True)
class PreviewInputs:
    """What the preview repairs and how: the libraries copied out of the tree, the recipe's
    resolved ``[repair]``, the build's Python and ``SOURCE_DATE_EPOCH``."""

    libraries: Sequence[Path]
    spec: RepairSpec
    recipe: Recipe
    python: str
    source_date_epoch: int


def repair_preview(
    given: PreviewInputs,
    engine: ContainerEngine,
    builder_image: str,
    staging: Path,
    keep: Path | None,
    *,
    user: str | None,
    output: _Output,
    facts: OfficialFacts | None = None,
) -> RepairPreview:
    """Pack the libraries into a preview wheel, run the build's repair step on it (in
    ``staging``), keep the repaired wheel in ``keep`` (the wheels an earlier preview kept there
    replaced) and compare each library with the official wheel of the recipe's release."""
    folder = given.spec.library_folder or LIBRARY_FOLDER
    distribution = folder.split("/")[0] if given.spec.library_folder else given.recipe.name
    wheel = preview_wheel(
        given.libraries,
        distribution=distribution.replace("-", "_"),
        version=given.recipe.version,
        python=given.python,
        library_folder=folder,
        into=staging / "preview",
    )
    repaired, record = repair_step(
        wheel, given.spec, engine, builder_image, staging,
        user=user, source_date_epoch=given.source_date_epoch, output=output,
    )  # fmt: skip
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        for old in keep.glob(f"*+{PARTIAL}-*.whl"):
            old.unlink()
        repaired = Path(shutil.move(repaired, keep / repaired.name))
    variant = (facts or load_official()).closest(
        given.recipe.version, str(given.recipe.toolchain.cuda)
    )
    preview = read_preview(repaired, record, variant, folder)
    return preview if keep is not None else dataclasses.replace(preview, wheel=None)
