"""The nvcc fixture corpus: small CUDA binaries compiled with the real nvcc 13, once per cache key.

Each fixture is declared by the nvcc flags that make it (``FixtureSpec``), and
``expected_images`` derives from those flags alone what the binary must contain: per (member,
section, kind, arch) the number of images and their compression. These expectations are
independent of both readers under test (archwheel's scanner and cuobjdump); the rules they
encode were established with the commands recorded in ``docs/maintainers/fixtures.md``.

The corpus is built into ``<cache>/nvcc-fixtures/<key>`` where the key hashes the sources in
``tests/support/fixtures/nvcc``, this file and the toolchain versions, so it is compiled once and reused
until one of them changes. Builds happen in a temporary folder renamed into place, under a lock.
"""

from __future__ import annotations

import enum
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from archwheel.binary.model import Compression
from archwheel.facts.arch import CodeKind, Target

SOURCES = Path(__file__).resolve().parent / "fixtures" / "nvcc"
EXECUTABLE_FATBIN = ".nv_fatbin"
RELOCATABLE_FATBIN = "__nv_relfatbin"
RAW_FATBIN = "(fatbin)"  # archwheel's section name for a file that is itself a fatbin
RAW_CUBIN = "(cubin)"  # ... and for a file that is itself a cubin


class Compress(enum.Enum):
    """The compression flags a fixture is built with (nvcc 13.0 behaviour in docs/maintainers/fixtures.md)."""

    DEFAULT = ()  # PTX compressed (ZSTD); cubins too in relocatable fatbins only
    NONE = ("-no-compress",)
    ALL_DEFAULT = ("-Xfatbin", "-compress-all")  # ZSTD
    ALL_SPEED = ("-Xfatbin", "-compress-all", "--compress-mode=speed")  # LZ4
    ALL_SIZE = ("-Xfatbin", "-compress-all", "--compress-mode=size")  # ZSTD, smaller

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple(self.value)


class Product(enum.Enum):
    SHARED = "shared"  # nvcc -shared: a device-link fatbin is added to .nv_fatbin
    EXECUTABLE = "executable"  # likewise
    OBJECT = "object"  # nvcc -c
    STATIC = "static"  # ar of nvcc -c objects, one per unit
    CUBIN = "cubin"  # nvcc -cubin
    FATBIN = "fatbin"  # nvcc -fatbin
    EMBEDDED_INCBIN = "embedded-incbin"  # nvcc -fatbin, then .incbin into a named section
    EMBEDDED_OBJCOPY = "embedded-objcopy"  # nvcc -fatbin, then objcopy --add-section


@dataclass(frozen=True)
class Gencode:
    """One ``-gencode``; its code names the image: ``sm_90a``, ``compute_90``, ``lto_90``."""

    code: str

    @property
    def kind(self) -> CodeKind:
        return Target.from_name(self.code)[0]

    @property
    def target(self) -> Target:
        return Target.from_name(self.code)[1]

    @property
    def flag(self) -> str:
        return f"-gencode=arch={self.target.compute},code={self.code}"


def gencodes(*codes: str) -> tuple[Gencode, ...]:
    return tuple(Gencode(c) for c in codes)


@dataclass(frozen=True)
class Unit:
    """One nvcc invocation's sources and targets (a static library has one unit per member)."""

    sources: tuple[str, ...]
    targets: tuple[Gencode, ...]
    relocatable: bool = False  # -rdc=true

    @property
    def member(self) -> str:
        return Path(self.sources[0]).stem + ".o"


@dataclass(frozen=True)
class FixtureSpec:
    name: str  # the file produced
    product: Product
    units: tuple[Unit, ...]
    description: str
    compress: Compress = Compress.DEFAULT
    embed_section: str | None = None  # embedded products: the section holding the fatbin

    @property
    def file_kind(self) -> str:
        """As archwheel's ``LibraryInventory.file_kind`` names it."""
        return {
            Product.SHARED: "shared-object",
            Product.EXECUTABLE: "executable",
            Product.OBJECT: "relocatable",
            Product.STATIC: "relocatable",
            Product.CUBIN: "cubin",
            Product.FATBIN: "fatbin",
            Product.EMBEDDED_INCBIN: "shared-object",
            Product.EMBEDDED_OBJCOPY: "shared-object",
        }[self.product]


@dataclass(frozen=True)
class ExpectedImage:
    member: str | None  # the object inside a static library
    section: str
    kind: CodeKind
    arch: str  # archwheel's spelling: sm_90a, sm_100f, compute_120f, lto_90
    count: int
    compressions: frozenset[Compression]


SPECS: tuple[FixtureSpec, ...] = (
    FixtureSpec(
        "multi_arch.so", Product.SHARED,
        (Unit(("scale.cu",), gencodes("sm_75", "sm_80", "sm_90", "compute_90")),),
        "several archs in one library, +PTX (sm_75;sm_80;sm_90+PTX), nvcc's default compression",
    ),
    FixtureSpec(
        "variants.so", Product.SHARED,
        (Unit(("scale.cu",), gencodes(
            "sm_90a", "compute_90a", "sm_100a", "sm_100f", "sm_103f", "sm_120f", "compute_120f",
        )),),
        "'a' and 'f' targets, SASS and PTX, all compressed (-compress-all: ZSTD)",
        Compress.ALL_DEFAULT,
    ),
    FixtureSpec(
        "lz4_speed.so", Product.SHARED,
        (Unit(("saxpy.cu",), gencodes("sm_80", "sm_90", "compute_90")),),
        "-Xfatbin -compress-all --compress-mode=speed: every image LZ4",
        Compress.ALL_SPEED,
    ),
    FixtureSpec(
        "zstd_size.so", Product.SHARED,
        (Unit(("saxpy.cu",), gencodes("sm_80", "sm_90", "compute_90")),),
        "-Xfatbin -compress-all --compress-mode=size: every image ZSTD",
        Compress.ALL_SIZE,
    ),
    FixtureSpec(
        "uncompressed.so", Product.SHARED,
        (Unit(("saxpy.cu",), gencodes("sm_80", "sm_90", "compute_90")),),
        "-no-compress: PTX and cubins stored as they are",
        Compress.NONE,
    ),
    FixtureSpec(
        "relocatable.o", Product.OBJECT,
        (Unit(("scale.cu",), gencodes("sm_80", "sm_90", "compute_90"), relocatable=True),),
        "-rdc=true object: a relocatable fatbin (__nv_relfatbin)",
    ),
    FixtureSpec(
        "device_linked.so", Product.SHARED,
        (Unit(("twice_device.cu", "apply_twice.cu"), gencodes("sm_80", "sm_90"), True),),
        "-rdc=true library: two relocatable fatbins plus the device-linked .nv_fatbin",
    ),
    FixtureSpec(
        "libkernels.a", Product.STATIC,
        (
            Unit(("scale.cu",), gencodes("sm_75", "sm_90a")),
            Unit(("saxpy.cu",), gencodes("sm_80", "compute_80")),
            Unit(("reduce.cu",), gencodes("sm_86", "compute_86"), relocatable=True),
        ),
        "static library of three objects, one of them relocatable",
    ),
    FixtureSpec(
        "ptx_only.so", Product.SHARED,
        (Unit(("scale.cu",), gencodes("compute_80", "compute_120")),),
        "PTX only, no SASS (the device-link fatbin is an empty container)",
    ),
    FixtureSpec(
        "multi_tu.so", Product.SHARED,
        (Unit(("scale.cu", "saxpy.cu", "reduce.cu"), gencodes("sm_80", "sm_120")),),
        "three translation units in one library: three fatbins plus the device-link one",
    ),
    FixtureSpec(
        "embedded_incbin.so", Product.EMBEDDED_INCBIN,
        (Unit(("scale.cu",), gencodes("sm_80", "sm_90", "compute_90")),),
        "a fatbin in a non-standard section (.mydata) through .incbin, for cuModuleLoadData",
        embed_section=".mydata",
    ),
    FixtureSpec(
        "embedded_objcopy.so", Product.EMBEDDED_OBJCOPY,
        (Unit(("saxpy.cu",), gencodes("sm_80", "sm_120a", "compute_120")),),
        "a fatbin added as .cask_resource with objcopy --add-section (as cuBLASLt names it)",
        Compress.ALL_SPEED,
        embed_section=".cask_resource",
    ),
    FixtureSpec(
        "standalone.cubin", Product.CUBIN,
        (Unit(("scale.cu",), gencodes("sm_90")),),
        "nvcc -cubin: a bare device ELF, no fatbin around it",
    ),
    FixtureSpec(
        "standalone.fatbin", Product.FATBIN,
        (Unit(("scale.cu",), gencodes("sm_80", "sm_120a", "compute_120")),),
        "nvcc -fatbin: a bare fatbin container",
        Compress.ALL_SPEED,
    ),
    FixtureSpec(
        "app", Product.EXECUTABLE,
        (Unit(("app_main.cu",), gencodes("sm_75", "sm_120", "compute_120")),),
        "an executable",
    ),
    FixtureSpec(
        "lto.o", Product.OBJECT,
        (Unit(("scale.cu",), gencodes("lto_90", "sm_100a"), relocatable=True),),
        "LTO-IR (code=lto_90) beside SASS in a relocatable fatbin",
    ),
)  # fmt: skip


# -- expectations from the flags ------------------------------------------------------------------


def expected_compression(kind: CodeKind, compress: Compress, relocatable: bool) -> Compression:
    """nvcc 13.0: what compression an image gets (measured; see docs/maintainers/fixtures.md)."""
    if compress is Compress.NONE:
        return Compression.NONE
    algorithm = Compression.LZ4 if compress is Compress.ALL_SPEED else Compression.ZSTD
    if compress is not Compress.DEFAULT:  # -compress-all
        return algorithm
    return algorithm if (kind is not CodeKind.SASS or relocatable) else Compression.NONE


def expected_images(spec: FixtureSpec) -> tuple[ExpectedImage, ...]:
    """What the flags say the fixture contains, per (member, section, kind, arch)."""
    found: Counter[tuple[str | None, str, CodeKind, str, Compression]] = Counter()

    def add(member: str | None, section: str, g: Gencode, compression: Compression) -> None:
        found[(member, section, g.kind, g.target.name(g.kind), compression)] += 1

    for unit in spec.units:
        section = RELOCATABLE_FATBIN if unit.relocatable else EXECUTABLE_FATBIN
        if spec.product in (Product.EMBEDDED_INCBIN, Product.EMBEDDED_OBJCOPY):
            assert spec.embed_section is not None
            section = spec.embed_section
        elif spec.product is Product.CUBIN:
            section = RAW_CUBIN
        elif spec.product is Product.FATBIN:
            section = RAW_FATBIN
        member = unit.member if spec.product is Product.STATIC else None
        for _source in unit.sources:  # one fatbin per translation unit
            for g in unit.targets:
                compression = expected_compression(g.kind, spec.compress, unit.relocatable)
                if spec.product is Product.CUBIN:
                    compression = Compression.NONE
                add(member, section, g, compression)
        if spec.product in (Product.SHARED, Product.EXECUTABLE):
            # nvcc links every shared library and executable through nvlink, once per real
            # arch: one more fatbin in .nv_fatbin with one cubin per SASS target.
            for g in dict.fromkeys(t for t in unit.targets if t.kind is CodeKind.SASS):
                add(None, EXECUTABLE_FATBIN, g, expected_compression(g.kind, spec.compress, False))
    merged: dict[tuple[str | None, str, CodeKind, str], tuple[int, set[Compression]]] = {}
    for (member, section, kind, arch, compression), n in found.items():
        count, compressions = merged.get((member, section, kind, arch), (0, set()))
        merged[(member, section, kind, arch)] = (count + n, compressions | {compression})
    return tuple(
        ExpectedImage(member, section, kind, arch, count, frozenset(compressions))
        for (member, section, kind, arch), (count, compressions) in sorted(
            merged.items(), key=lambda item: (item[0][0] or "", item[0][1], item[0][3])
        )
    )


# -- building -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuiltFixture:
    spec: FixtureSpec
    path: Path
    commands: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def expected(self) -> tuple[ExpectedImage, ...]:
        return expected_images(self.spec)

    def library_path(self, member: str | None, base: str | None = None) -> str:
        """The library name archwheel gives an image: ``base`` or ``base(member.o)``."""
        base = base if base is not None else str(self.path)
        return base if member is None else f"{base}({member})"


@dataclass(frozen=True)
class NvccCorpus:
    root: Path
    nvcc: Path
    nvcc_version: str
    fixtures: tuple[BuiltFixture, ...]

    def __getitem__(self, name: str) -> BuiltFixture:
        for fixture in self.fixtures:
            if fixture.name == name:
                return fixture
        raise KeyError(name)


class _Builder:
    """Runs nvcc, gcc, ar and objcopy for one fixture in its own work folder."""

    def __init__(self, nvcc: Path, work: Path) -> None:
        self.nvcc = nvcc
        self.work = work
        self.commands: list[str] = []

    def run(self, *command: str) -> None:
        self.commands.append(" ".join(command))
        proc = subprocess.run(
            command, cwd=self.work, capture_output=True, text=True, timeout=900, check=False
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise RuntimeError(f"fixture build step failed ({proc.returncode}): {command}\n{tail}")

    def nvcc_compile(self, unit: Unit, compress: Compress, *mode: str, output: str) -> None:
        sources = [str(SOURCES / s) for s in unit.sources]
        rdc = ["-rdc=true"] if unit.relocatable else []
        flags = [g.flag for g in unit.targets]
        self.run(
            str(self.nvcc), *mode, "-Xcompiler", "-fPIC", *rdc, *compress.flags, *flags,
            "-o", output, *sources,
        )  # fmt: skip

    def build(self, spec: FixtureSpec) -> Path:
        unit = spec.units[0]
        out = spec.name
        if spec.product is Product.SHARED:
            self.nvcc_compile(unit, spec.compress, "-shared", output=out)
        elif spec.product is Product.EXECUTABLE:
            self.nvcc_compile(unit, spec.compress, output=out)
        elif spec.product is Product.OBJECT:
            self.nvcc_compile(unit, spec.compress, "-c", output=out)
        elif spec.product is Product.STATIC:
            for member_unit in spec.units:
                self.nvcc_compile(member_unit, spec.compress, "-c", output=member_unit.member)
            self.run("ar", "rcsD", out, *(u.member for u in spec.units))
        elif spec.product is Product.CUBIN:
            arch = f"-arch={unit.targets[0].code}"
            self.run(str(self.nvcc), "-cubin", arch, "-o", out, str(SOURCES / unit.sources[0]))
        elif spec.product is Product.FATBIN:
            self.nvcc_compile(unit, spec.compress, "-fatbin", output=out)
        elif spec.product is Product.EMBEDDED_INCBIN:
            self.nvcc_compile(unit, spec.compress, "-fatbin", output="embedded_payload.fatbin")
            self.run(
                "gcc", "-shared", "-fPIC", "-Wa,-I.", "-o", out,
                str(SOURCES / "embed_holder.c"), str(SOURCES / "embed_incbin.S"),
            )  # fmt: skip
        elif spec.product is Product.EMBEDDED_OBJCOPY:
            assert spec.embed_section is not None
            section = spec.embed_section
            self.nvcc_compile(unit, spec.compress, "-fatbin", output="embedded_payload.fatbin")
            self.run("gcc", "-c", "-fPIC", "-o", "symbol.o", str(SOURCES / "embed_symbol.c"))
            self.run(
                "objcopy", f"--add-section={section}=embedded_payload.fatbin",
                f"--set-section-flags={section}=alloc,load,readonly,data",
                f"--set-section-alignment={section}=8", "symbol.o", "symbol_with_payload.o",
            )  # fmt: skip
            self.run(
                "gcc", "-shared", "-fPIC", "-o", out,
                str(SOURCES / "embed_holder.c"), "symbol_with_payload.o",
            )  # fmt: skip
        return self.work / out


def _version_line(command: list[str]) -> str:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    except OSError as exc:
        return f"unavailable: {exc}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return " | ".join(lines[-2:]) if lines else f"exit {proc.returncode}"


def corpus_key(nvcc: Path) -> tuple[str, str]:
    """(cache key, nvcc version) from the sources, this file and the toolchain versions."""
    digest = hashlib.sha256()
    nvcc_version = _version_line([str(nvcc), "--version"])
    for part in (nvcc_version, _version_line(["gcc", "--version"]),
                 _version_line(["ld", "--version"])):  # fmt: skip
        digest.update(part.encode() + b"\0")
    for path in sorted([*SOURCES.iterdir(), Path(__file__)]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20], nvcc_version


def build_corpus(nvcc: Path, cache: Path) -> NvccCorpus:
    """Build every fixture once per key into ``cache/<key>`` (reused while the key holds)."""
    key, nvcc_version = corpus_key(nvcc)
    cache = cache.resolve()
    root = cache / key
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "corpus.json").is_file():
            _build_into(root, nvcc, nvcc_version)
    record = json.loads((root / "corpus.json").read_text())
    commands = {f["name"]: tuple(f["commands"]) for f in record["fixtures"]}
    return NvccCorpus(
        root=root,
        nvcc=nvcc,
        nvcc_version=nvcc_version,
        fixtures=tuple(BuiltFixture(s, root / s.name, commands[s.name]) for s in SPECS),
    )


def _build_into(root: Path, nvcc: Path, nvcc_version: str) -> None:
    staging = root.with_name(f"{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        records = []
        for spec in SPECS:
            work = staging / "work" / spec.name
            work.mkdir(parents=True)
            builder = _Builder(nvcc, work)
            product = builder.build(spec)
            product.rename(staging / spec.name)
            records.append(_record(spec, builder.commands))
        shutil.rmtree(staging / "work")
        corpus = {"nvcc": str(nvcc), "nvcc_version": nvcc_version, "fixtures": records}
        (staging / "corpus.json").write_text(json.dumps(corpus, indent=2) + "\n")
        shutil.rmtree(root, ignore_errors=True)
        staging.rename(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _record(spec: FixtureSpec, commands: list[str]) -> dict[str, object]:
    """What corpus.json says of one fixture: how it was made and what it must contain."""
    expected = [
        {
            "member": e.member,
            "section": e.section,
            "kind": e.kind.value,
            "arch": e.arch,
            "count": e.count,
            "compressions": sorted(c.value for c in e.compressions),
        }
        for e in expected_images(spec)
    ]
    return {
        "name": spec.name,
        "product": spec.product.value,
        "description": spec.description,
        "commands": commands,
        "expected": expected,
    }
