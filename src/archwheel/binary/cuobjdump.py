"""NVIDIA's cuobjdump as an independent oracle: find it, run it, parse what it lists.

archwheel reads fatbins itself; this module exists so that its answers can be checked against
NVIDIA's own reader (``--cross-check``). It shares no parsing code with the scanner on purpose:
it reads ELF section names and ``ar`` member tables with its own small readers, and takes every
image from cuobjdump's listing.

cuobjdump is looked up on ``ARCHWHEEL_CUOBJDUMP``, ``PATH``, ``CUDA_HOME``/``CUDA_PATH``, the
``nvidia-cuda-cuobjdump`` wheel in this interpreter's ``site-packages`` (``nvidia/cu13/bin``),
``/usr/local/cuda/bin``, and a cache venv (``$ARCHWHEEL_CACHE`` or ``~/.cache/archwheel``) where it
is installed on demand from PyPI.

Each file is listed twice: ``cuobjdump -all -lelf -lptx`` (every fatbin) and ``cuobjdump -lelf
-lptx`` (only ``.nv_fatbin`` when the file has one). The difference is the ``__nv_relfatbin``
share, which is how images are attributed to sections. What cuobjdump cannot see (its blind
spots, see ``docs/crosscheck.md``): the ``f`` of family-specific cubins (``sm_103f`` is printed
``sm_103``), LTO-IR images, and containers in any other section.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from archwheel.errors import ToolError
from archwheel.facts.arch import CodeKind

CUOBJDUMP_REQUIREMENT = "nvidia-cuda-cuobjdump>=13,<14"
"""The PyPI wheel installed on demand (13.x reads every target CUDA 13 compiles)."""

DEFAULT_TIMEOUT_S = 900.0
"""Per cuobjdump run. libtorch_cuda.so (500 MB) takes about 17 s on 2 cores; leave room."""

EXECUTABLE_FATBIN = ".nv_fatbin"
RELOCATABLE_FATBIN = "__nv_relfatbin"
RAW_FATBIN_SECTION = "(fatbin)"
"""The section archwheel gives images of a file that is itself a fatbin (no host ELF around)."""
CUBIN_SECTION = "(cubin)"
"""... and the image of a file that is itself a cubin."""
UNKNOWN_SECTION = "<unknown>"
"""Images cuobjdump listed in a host ELF that has neither fatbin section (never seen)."""

EM_CUDA = 190
_FATBIN_MAGIC = 0xBA55ED50
_AR_MAGIC = b"!<arch>\n"
_MAX_SECTIONS = 65_535
_MAX_OUTPUT_LINE = 4096

_ENTRY_LINE = re.compile(r"^(ELF|PTX) file\s+(\d+:\s+)?(?P<name>.+)$")
_ENTRY_ARCH = re.compile(r"\.sm_(?P<number>\d{2,3})(?P<variant>[af]?)\.(?:cubin|ptx)$")
_MEMBER_LINE = re.compile(r"^member (?P<archive>.*):(?P<member>[^:]+):$")
_NO_DEVICE_CODE = "does not contain device code"


# -- what cuobjdump lists -------------------------------------------------------------------------


@dataclass(frozen=True)
class ListedImage:
    """One line of ``cuobjdump -lelf -lptx``: ``ELF file    1: libx.1.sm_90a.cubin``.

    ``arch`` is in archwheel's spelling: cuobjdump's ``sm_120`` PTX becomes ``compute_120``.
    It is what cuobjdump reports, so a family-specific cubin has lost its ``f``.
    """

    kind: CodeKind  # SASS or PTX: cuobjdump does not list LTO-IR
    arch: str  # sm_90a, sm_100 (was sm_100f?), compute_120f
    name: str  # the name cuobjdump printed
    member: str | None = None  # the object inside a static library, as cuobjdump names it


def parse_listing(text: str) -> tuple[ListedImage, ...]:
    """Parse the standard output of ``cuobjdump [-all] -lelf -lptx FILE``.

    Raises ``ToolError`` on a line it does not understand: an oracle whose output format
    changed must not be trusted silently.
    """
    images: list[ListedImage] = []
    member: str | None = None
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        member_match = _MEMBER_LINE.match(line)
        if member_match:
            member = member_match.group("member")
            continue
        entry = _ENTRY_LINE.match(line)
        arch = _ENTRY_ARCH.search(entry.group("name")) if entry else None
        if entry is None or arch is None:
            shown = line[:200]
            raise ToolError(
                f"unexpected line in cuobjdump output: {shown!r}",
                hint="this cuobjdump may be too new or too old for archwheel; report it",
            )
        kind = CodeKind.SASS if entry.group(1) == "ELF" else CodeKind.PTX
        prefix = "sm" if kind is CodeKind.SASS else "compute"
        images.append(
            ListedImage(
                kind=kind,
                arch=f"{prefix}_{arch.group('number')}{arch.group('variant')}",
                name=entry.group("name"),
                member=member,
            )
        )
    return tuple(images)


ImageKey = tuple[str, CodeKind, str]
"""(section, kind, arch) as cuobjdump can see it."""


def split_by_section(
    every_fatbin: Sequence[ListedImage],
    default_listing: Sequence[ListedImage],
    sections: frozenset[str],
    *,
    raw_section: str | None = None,
) -> Counter[ImageKey]:
    """Attribute listed images to sections from the two runs and the file's section names.

    ``cuobjdump -all`` lists ``.nv_fatbin`` and ``__nv_relfatbin``; without ``-all`` it lists
    only ``.nv_fatbin`` when the file has one, else ``__nv_relfatbin``. Counts, not positions,
    are compared, so the order cuobjdump prints in does not matter. ``raw_section`` names the
    section of a file that is itself a fatbin or cubin.
    """
    every = Counter((i.kind, i.arch) for i in every_fatbin)
    default = Counter((i.kind, i.arch) for i in default_listing)
    result: Counter[ImageKey] = Counter()

    def put(section: str, counts: Counter[tuple[CodeKind, str]]) -> None:
        for (kind, arch), n in counts.items():
            if n > 0:
                result[(section, kind, arch)] += n

    has_exec = EXECUTABLE_FATBIN in sections
    has_rel = RELOCATABLE_FATBIN in sections
    if raw_section is not None:
        put(raw_section, every)
    elif has_exec and has_rel:
        if default - every:
            raise ToolError(
                "cuobjdump listed more images without -all than with it",
                hint="its output cannot be attributed to sections; report this file",
            )
        put(EXECUTABLE_FATBIN, default)
        put(RELOCATABLE_FATBIN, every - default)
    elif has_exec:
        put(EXECUTABLE_FATBIN, every)
    elif has_rel:
        put(RELOCATABLE_FATBIN, every)
    else:
        put(UNKNOWN_SECTION, every)
    return result


# -- the file's own layout (independent of archwheel's scanner) ---------------------------------


@dataclass(frozen=True)
class FileLayout:
    """What kind of file cuobjdump is given, and the section names that matter to it."""

    kind: str  # "host-elf", "cubin", "fatbin", "archive", "other"
    sections: frozenset[str] = frozenset()
    members: Mapping[str, frozenset[str]] | None = None  # archive: member name -> sections

    @property
    def raw_section(self) -> str | None:
        """The section name of a file that is itself a fatbin or cubin; None otherwise."""
        return {"cubin": CUBIN_SECTION, "fatbin": RAW_FATBIN_SECTION}.get(self.kind)


def read_layout(path: Path) -> FileLayout:
    """Read just enough of ``path`` to attribute cuobjdump's images (never the whole file)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(64)
            if head.startswith(_AR_MAGIC):
                members: dict[str, frozenset[str]] = {}
                for name, offset, length in _archive_members(f, size):
                    layout = _region_layout(f, offset, length)
                    members[name] = members.get(name, frozenset()) | layout.sections
                return FileLayout("archive", members=members)
            return _region_layout(f, 0, size)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _region_layout(f: BinaryIO, base: int, length: int) -> FileLayout:
    f.seek(base)
    head = f.read(64)
    if len(head) >= 4 and struct.unpack_from("<I", head)[0] == _FATBIN_MAGIC:
        return FileLayout("fatbin")
    if not head.startswith(b"\x7fELF") or len(head) < 64:
        return FileLayout("other")
    if head[4] != 2 or head[5] != 1:  # only ELF64 little-endian carries CUDA fatbins here
        return FileLayout("other")
    machine = struct.unpack_from("<H", head, 0x12)[0]
    if machine == EM_CUDA:
        return FileLayout("cubin")
    return FileLayout("host-elf", _elf_section_names(f, base, length, head))


def _elf_section_names(f: BinaryIO, base: int, length: int, head: bytes) -> frozenset[str]:
    shoff = struct.unpack_from("<Q", head, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if shoff == 0 or shentsize < 64 or shoff >= length:
        return frozenset()
    if shnum == 0 or shstrndx == 0xFFFF:  # extended numbering: the real values in header 0
        first = _read_at(f, base + shoff, 64, base + length)
        if first is None:
            return frozenset()
        if shnum == 0:
            shnum = min(struct.unpack_from("<Q", first, 0x20)[0], _MAX_SECTIONS)
        if shstrndx == 0xFFFF:
            shstrndx = struct.unpack_from("<I", first, 0x28)[0]
    if shstrndx >= shnum or shoff + shnum * shentsize > length:
        return frozenset()
    table = _read_at(f, base + shoff, shnum * shentsize, base + length)
    if table is None:
        return frozenset()
    headers = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    str_offset, str_size = headers[shstrndx][4], headers[shstrndx][5]
    strings = _read_at(f, base + str_offset, min(str_size, 1 << 24), base + length)
    if strings is None:
        return frozenset()
    names = set()
    for name_offset, *_ in headers:
        end = strings.find(b"\0", name_offset)
        if 0 <= name_offset < len(strings) and end > name_offset:
            names.add(strings[name_offset:end].decode("utf-8", "replace"))
    return frozenset(names)


def _read_at(f: BinaryIO, offset: int, size: int, limit: int) -> bytes | None:
    if offset < 0 or size < 0 or offset + size > limit:
        return None
    f.seek(offset)
    data = f.read(size)
    return data if len(data) == size else None


def _archive_members(f: BinaryIO, size: int) -> Iterator[tuple[str, int, int]]:
    """(name, data offset, data size) of each object in a GNU or BSD ``ar`` archive."""
    long_names = b""
    offset = len(_AR_MAGIC)
    while offset + 60 <= size:
        f.seek(offset)
        header = f.read(60)
        if len(header) < 60 or header[58:60] != b"`\n":
            return
        raw_name = header[:16].decode("latin-1").rstrip()
        try:
            length = int(header[48:58].decode("latin-1").strip() or "0")
        except ValueError:
            return
        data = offset + 60
        if length < 0 or data + length > size:
            return
        name = raw_name
        if raw_name == "//":
            f.seek(data)
            long_names = f.read(min(length, 1 << 24))
        elif raw_name in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            pass
        elif raw_name.startswith("#1/"):  # BSD: the name precedes the data
            name_length = int(raw_name[3:] or "0")
            f.seek(data)
            name = f.read(name_length).rstrip(b"\0").decode("utf-8", "replace")
            yield name, data + name_length, length - name_length
        else:
            if raw_name.startswith("/") and raw_name[1:].isdigit():
                start = int(raw_name[1:])
                end = long_names.find(b"/\n", start)
                name = long_names[start : end if end >= 0 else None].decode("utf-8", "replace")
            else:
                name = raw_name.removesuffix("/")
            yield name, data, length
        offset = data + length + (length & 1)


# -- running it -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CuobjdumpInventory:
    """What cuobjdump sees in one file: image counts per member, per (section, kind, arch).

    For a plain file the only member is ``None``; for a static library, each object's name.
    """

    path: Path
    layout: FileLayout
    counts: Mapping[str | None, Counter[ImageKey]]

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())


class Cuobjdump:
    """One cuobjdump executable. Every run is bounded in time; failures raise ``ToolError``."""

    def __init__(self, executable: Path, *, timeout_s: float | None = None) -> None:
        self.executable = executable
        self.timeout_s = timeout_s if timeout_s is not None else _timeout_from_env()
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
        if proc.returncode == 255 and _NO_DEVICE_CODE in proc.stderr:
            return ()
        if proc.returncode != 0:
            raise ToolError(
                f"cuobjdump failed on {path} (exit {proc.returncode}): {_last_line(proc)}",
                hint=f"run `{self.executable} -all -lelf -lptx {path}` to see its full output",
            )
        return parse_listing(proc.stdout)

    def inventory(self, path: Path) -> CuobjdumpInventory:
        """Both listings of ``path``, attributed to sections (and to members of an archive)."""
        layout = read_layout(path)
        every = self.list_images(path, all_fatbins=True)
        default: tuple[ListedImage, ...] = ()
        both = frozenset((EXECUTABLE_FATBIN, RELOCATABLE_FATBIN))
        member_sections = (layout.members or {}).values()
        if both <= layout.sections or any(both <= s for s in member_sections):
            default = self.list_images(path, all_fatbins=False)  # the only way to split them
        counts: dict[str | None, Counter[ImageKey]] = {}
        if layout.kind == "archive":
            assert layout.members is not None
            for member in sorted({i.member or "" for i in every}):
                sections = layout.members.get(member, frozenset())
                counts[member] = split_by_section(
                    [i for i in every if (i.member or "") == member],
                    [i for i in default if (i.member or "") == member],
                    sections,
                )
        else:
            counts[None] = split_by_section(
                every, default, layout.sections, raw_section=layout.raw_section
            )
        return CuobjdumpInventory(path=path, layout=layout, counts=counts)

    def _run(self, args: list[str], *, what: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.executable), *args]
        try:
            proc = subprocess.run(
                command,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self.timeout_s,
                check=False,
                env={**os.environ, "LC_ALL": "C"},
            )
        except subprocess.TimeoutExpired as exc:
            raise ToolError(
                f"cuobjdump did not finish on {what} within {self.timeout_s:g} s",
                hint="raise the limit with ARCHWHEEL_CUOBJDUMP_TIMEOUT (seconds)",
            ) from exc
        except OSError as exc:
            raise ToolError(
                f"cannot run cuobjdump at {self.executable}: {exc.strerror or exc}",
                hint="set ARCHWHEEL_CUOBJDUMP to a working cuobjdump, or remove the broken one",
            ) from exc
        if proc.returncode < 0:
            raise ToolError(
                f"cuobjdump was killed by signal {-proc.returncode} on {what}",
                hint="it decompresses every image in memory: large libraries need several GB",
            )
        return proc


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
    return lines[-1][:_MAX_OUTPUT_LINE] if lines else "no output"


def _timeout_from_env() -> float:
    text = os.environ.get("ARCHWHEEL_CUOBJDUMP_TIMEOUT", "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


# -- finding and installing it --------------------------------------------------------------------


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """archwheel's cache: ``$ARCHWHEEL_CACHE`` or ``~/.cache/archwheel``."""
    env = os.environ if environ is None else environ
    if env.get("ARCHWHEEL_CACHE"):
        return Path(env["ARCHWHEEL_CACHE"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "archwheel"


def _wheel_binary(site_packages: Path) -> Path:
    return site_packages / "nvidia" / "cu13" / "bin" / "cuobjdump"


def find_cuobjdump(
    environ: Mapping[str, str] | None = None,
    search_path: Sequence[str] | None = None,
) -> Path | None:
    """The first usable cuobjdump, or None. The cache venv is searched last."""
    env = os.environ if environ is None else environ
    candidates: list[Path] = []
    if env.get("ARCHWHEEL_CUOBJDUMP"):
        candidates.append(Path(env["ARCHWHEEL_CUOBJDUMP"]))
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
    candidates.extend(CuobjdumpInstaller(cache_dir(env) / "cuobjdump").installed_binaries())
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


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
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=self.timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolError(
                f"could not {what} for cuobjdump in {self.root}: {exc}",
                hint="install nvidia-cuda-cuobjdump yourself or put CUDA's bin on PATH",
            ) from exc
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()
            raise ToolError(
                f"could not {what} for cuobjdump (exit {proc.returncode}): "
                f"{tail[-1] if tail else 'no output'}",
                hint="check the package index (pip config), or put CUDA's cuobjdump on PATH",
            )


def ensure_cuobjdump(
    *,
    install: bool = True,
    environ: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> Cuobjdump:
    """Find cuobjdump, installing the PyPI wheel into the cache when allowed and missing."""
    found = find_cuobjdump(environ)
    if found is None:
        if not install:
            raise ToolError(
                "cuobjdump not found (PATH, CUDA_HOME, site-packages, the archwheel cache)",
                hint=f"pip install '{CUOBJDUMP_REQUIREMENT}', or set ARCHWHEEL_CUOBJDUMP",
            )
        found = CuobjdumpInstaller(cache_dir(environ) / "cuobjdump").install()
    return Cuobjdump(found, timeout_s=timeout_s)
