"""can-load and its ELF reader on compiled fake wheels (g++ only)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from archwheel.binary.dynamic import DT_STRSZ, parse_dynamic, program_headers, read_file_dynamic
from archwheel.binary.dynamic_wheel import read_member_dynamic, read_wheel_dynamic
from archwheel.binary.zipread import WheelReader
from archwheel.verdicts.load import policy_for, version_allowed
from tests.support.builders import write_zip
from tests.support.can_load_fakes import (
    EXT,
    TAG,
    Fakes,
    make_wheel,
    real_loader_opens,
    validate_schema,
)
from tests.support.cli import CliRun
from tests.support.components import require


def test_reader_agrees_with_readelf(fakes: Fakes) -> None:
    readelf = shutil.which("readelf")
    require(readelf is not None, "readelf (binutils) not found")
    assert readelf is not None
    info = read_file_dynamic(fakes.ext_so)
    assert info.complete, info.problems
    dyn = subprocess.run(
        [readelf, "-dW", str(fakes.ext_so)], capture_output=True, text=True, check=False
    )
    needed = [ln.split("[", 1)[1].rstrip("]") for ln in dyn.stdout.splitlines() if "(NEEDED)" in ln]
    assert list(info.needed) == needed
    syms = subprocess.run([readelf, "--dyn-syms", "-W", str(fakes.ext_so)], capture_output=True,
                          text=True, check=True).stdout.splitlines()  # fmt: skip
    undefined = {ln.split()[7] for ln in syms if " UND " in ln and len(ln.split()) >= 8}
    ours = {f"{u.name}@{u.version}" if u.version else u.name for u in info.undefined}
    # readelf appends " (N)" version indexes in some releases: compare names with versions
    assert {s.split(" ")[0] for s in undefined} == ours
    assert "_ZN3c103fooEi" in {u.name for u in info.undefined}
    assert "ext_call" in info.exports


def test_member_reader_equals_file_reader(fakes: Fakes) -> None:
    reader = WheelReader(fakes.ext)
    member = next(m for m in reader.members if m.name.endswith(EXT))
    from_member = read_member_dynamic(fakes.ext, reader.archive_size, member)
    from_file = read_file_dynamic(fakes.ext_so, member.name)
    assert from_member == from_file


@pytest.mark.parametrize("pooled", [False, True])
def test_wheels_read_together_are_read_as_each_alone(
    fakes: Fakes, pooled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """can-load reads the extension and torch together (one pool for the large members of
    both): each wheel's libraries as ``read_wheel_dynamic`` reads it alone, and the caller's
    other work done once, while the workers read."""
    from archwheel.binary import dynamic_wheel

    wheels = [fakes.ext, fakes.torch_new, fakes.torch_old]
    alone = [read_wheel_dynamic(w) for w in wheels]
    import concurrent.futures

    pools: list[object] = []

    class CountedPool(concurrent.futures.ProcessPoolExecutor):
        def __init__(self, *args: Any, **named: Any) -> None:
            pools.append(self)
            super().__init__(*args, **named)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", CountedPool)
    if pooled:  # every library to a forked worker
        monkeypatch.setattr(dynamic_wheel, "PARALLEL_MIN_BYTES", 0)
        # The reader forks only from a process with one thread: let the handler threads of
        # earlier tests' servers on 127.0.0.1 finish first.
        deadline = time.monotonic() + 60  # a server's handler may wait out its keep-alive
        while threading.active_count() > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
        assert not others, f"threads of earlier tests still running: {others}"
    calls: list[int] = []
    together = dynamic_wheel.read_wheels_dynamic(
        wheels, workers=2, while_waiting=lambda: calls.append(len(calls))
    )
    assert together == alone
    assert calls == [0]
    assert len(pools) == (1 if pooled else 0)  # one pool for all the wheels, or none


def test_truncated_library_is_a_problem_not_a_traceback(fakes: Fakes, tmp_path: Path) -> None:
    data = fakes.ext_so.read_bytes()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[: len(data) // 3])
    info = read_file_dynamic(cut)
    assert not info.complete
    assert "past the end of the file" in info.problems[0] or "no loadable" in info.problems[0]


def test_string_table_past_the_end_is_reported(fakes: Fakes, tmp_path: Path) -> None:
    data = bytearray(fakes.ext_so.read_bytes())
    is64, _loads, dyn = program_headers(lambda o, n: bytes(data[o : o + n]), len(data))
    assert is64 and dyn is not None
    for pos in range(dyn.offset, dyn.offset + dyn.filesz, 16):
        tag, _value = struct.unpack_from("<qQ", data, pos)
        if tag == DT_STRSZ:
            struct.pack_into("<qQ", data, pos, tag, 1 << 40)
    info = parse_dynamic(lambda o, n: bytes(data[o : o + n]), len(data), "patched.so")
    assert info.problems and "dynamic string table (.dynstr)" in info.problems[0]
    assert "past the end of the file" in info.problems[0]


def test_not_elf_members_are_reported(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / "x-1-py3-none-any.whl", [("x/fake.so", b"just text")])
    (info,) = read_wheel_dynamic(wheel)
    assert info.file_kind == "not-elf" and not info.is_dynamic


def test_policy_versions() -> None:
    policy = policy_for(["cp311-cp311-manylinux_2_28_x86_64"])
    assert policy is not None and policy.name == "manylinux_2_28"
    assert version_allowed("GLIBC_2.28", policy) is True
    assert version_allowed("GLIBC_2.36", policy) is False
    assert version_allowed("GLIBCXX_3.4.30", policy) is False
    assert version_allowed("GLIBCXX_3.4.21", policy) is True
    assert version_allowed("libcudart.so.13", policy) is None
    assert policy_for(["py3-none-any"]) is None


def test_extension_loads_with_its_torch(fakes: Fakes, cli_run: CliRun, tmp_path: Path) -> None:
    code, out, err = cli_run("can-load", str(fakes.ext), "--with", str(fakes.torch_new))
    assert code == 0, out + err
    assert "loads" in out and "satisfied" in out
    ok, message = real_loader_opens(tmp_path, fakes.torch_new, fakes.ext, f"myext/_ext.{EXT}")
    assert ok, message


def test_extension_fails_with_older_torch(fakes: Fakes, cli_run: CliRun, tmp_path: Path) -> None:
    code, out, err = cli_run(
        "can-load", str(fakes.ext), "--with", str(fakes.torch_old), "--format", "json"
    )
    assert code == 1, out + err
    doc = json.loads(out)
    validate_schema(doc, "can-load")
    (lib,) = doc["libraries"]
    assert lib["verdict"] == "does-not-load"
    assert [s["name"] for s in lib["missing_symbols"]] == ["_ZN3c103fooEi"]
    if shutil.which("c++filt"):
        assert lib["missing_symbols"][0]["demangled"] == "c10::foo(int)"
    assert any("another torch version" in c for c in lib["causes"])
    assert doc["metadata_conflicts"] and "NOT satisfied" in doc["metadata_conflicts"][0]
    ok, message = real_loader_opens(tmp_path, fakes.torch_old, fakes.ext, f"myext/_ext.{EXT}")
    assert not ok and "_ZN3c103fooEi" in message


def test_cuda13_extension_next_to_cuda12_torch(
    fakes: Fakes, cli_run: CliRun, tmp_path: Path
) -> None:
    code, out, err = cli_run("can-load", str(fakes.ext_cuda13), "--with", str(fakes.torch_cu12))
    assert code == 1, out + err
    assert "libcudart.so.13" in out
    assert "CUDA major mismatch" in out and "CUDA 12" in out
    # The real loader: torch's libcudart.so.12 is loadable (put where torch's RPATH finds it),
    # the extension's libcudart.so.13 is nowhere.
    ok, message = real_loader_opens(
        tmp_path, fakes.torch_cu12, fakes.ext_cuda13, f"cuext/_cuda.{EXT}"
    )
    assert not ok
    assert "libcudart.so.12" in message or "libcudart.so.13" in message
    cudart12 = fakes.ext_so.parent / "cuda" / "libcudart.so.12"
    ok, message = real_loader_opens(
        tmp_path, fakes.torch_cu12, fakes.ext_cuda13, f"cuext/_cuda.{EXT}",
        {"torch/lib/libcudart.so.12": cudart12},
    )  # fmt: skip
    # Only a libcudart.so.13 outside the environment (a CUDA 13 toolkit in this host's
    # ld.so.cache) can satisfy it; on a machine without one the import fails.
    if ok:
        site = str(tmp_path / "site")
        cudart13 = [ln for ln in message.splitlines() if ln.endswith("libcudart.so.13")]
        assert cudart13 and not any(site in ln for ln in cudart13)
    else:
        assert "libcudart.so.13" in message


def test_glibc_newer_than_the_tag(fakes: Fakes, cli_run: CliRun) -> None:
    code, out, err = cli_run("can-load", str(fakes.ext_glibc), "--with", str(fakes.torch_new))
    assert code == 1, out + err
    assert "GLIBC_2.36" in out and "manylinux_2_28" in out


def test_with_is_not_torch(fakes: Fakes, cli_run: CliRun) -> None:
    code, _out, err = cli_run("can-load", str(fakes.ext), "--with", str(fakes.ext_glibc))
    assert code == 2
    assert "none of the --with wheels is torch" in err and "Traceback" not in err


def test_two_torches(fakes: Fakes, cli_run: CliRun) -> None:
    code, _out, err = cli_run(
        "can-load", str(fakes.ext), "--with", str(fakes.torch_new), "--with", str(fakes.torch_old)
    )
    assert code == 2 and "two torches" in err


def test_wheel_without_elf(fakes: Fakes, cli_run: CliRun, tmp_path: Path) -> None:
    wheel = tmp_path / "pure" / f"pure-1.0-{TAG}.whl"
    wheel.parent.mkdir()
    make_wheel(wheel.parent, "pure", "1.0", {})
    code, out, err = cli_run("can-load", str(wheel), "--with", str(fakes.torch_new))
    assert code == 3, out + err
    assert "no shared library inside" in out


def test_broken_library_in_wheel(fakes: Fakes, cli_run: CliRun, tmp_path: Path) -> None:
    data = fakes.ext_so.read_bytes()
    broken = tmp_path / "b.so"
    broken.write_bytes(data[: len(data) // 3])
    (tmp_path / "w").mkdir()
    wheel = make_wheel(tmp_path / "w", "broken", "1.0", {f"broken/_b.{EXT}": broken})
    code, out, err = cli_run("can-load", str(wheel), "--with", str(fakes.torch_new))
    assert code == 3, out + err
    assert "past the end" in out or "no loadable" in out


def test_not_a_wheel(cli_run: CliRun, tmp_path: Path) -> None:
    path = tmp_path / "x.whl"
    path.write_bytes(b"not a zip")
    code, _out, err = cli_run("can-load", str(path), "--with", str(path))
    assert code == 3 and "Traceback" not in err


def test_corrupted_libraries_never_raise(fakes: Fakes) -> None:
    """Every single-field corruption of the header, program headers and dynamic section, and
    random byte damage anywhere: a result (with problems where the damage matters), never an
    exception."""
    import random

    data = fakes.ext_so.read_bytes()
    _is64, _loads, dyn = program_headers(lambda o, n: data[o : o + n], len(data))
    assert dyn is not None
    rng = random.Random(11)
    targets = list(range(0, 64 + 56 * 12, 4)) + list(range(dyn.offset, dyn.offset + dyn.filesz, 4))
    cases = [(pos, value) for pos in targets for value in (0, 0xFFFFFFFF, 0x7FFFFFF0)]
    cases += [(rng.randrange(len(data) - 4), rng.getrandbits(32)) for _ in range(300)]
    for pos, value in cases:
        damaged = bytearray(data)
        struct.pack_into("<I", damaged, pos, value)
        blob = bytes(damaged)
        info = parse_dynamic(lambda o, n, b=blob: b[o : o + n], len(blob), "x.so")  # type: ignore[misc]
        assert isinstance(info.problems, tuple)


def test_demangling_falls_back_to_mangled_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from archwheel.binary.demangle import demangle

    if shutil.which("c++filt"):
        assert demangle(["_ZN3c103fooEi"]) == {"_ZN3c103fooEi": "c10::foo(int)"}
    monkeypatch.setenv("PATH", "/nonexistent")
    assert demangle(["_ZN3c103fooEi"]) == {}


def test_own_library_off_the_search_path_is_satisfied_once_the_package_loads_it(
    fakes: Fakes, cli_run: CliRun, tmp_path: Path
) -> None:
    """torchaudio's layout: ``pkg/lib/_mod.so`` needs ``libown.so`` by soname with no RUNPATH;
    the package loads ``pkg/lib/libown.so`` itself first (``torch.ops.load_library``), after
    which the loader finds it by soname. can-load says so; the real loader agrees both ways."""
    from tests.support.can_load_fakes import compile_so

    own = compile_so(tmp_path / "libown.so", 'extern "C" int own() { return 3; }\n',
                     soname="libown.so")  # fmt: skip
    mod = compile_so(
        tmp_path / f"_mod.{EXT}", 'extern "C" int own();\nextern "C" int mod() { return own(); }\n',
        links=(str(own),),
    )  # fmt: skip
    (tmp_path / "w").mkdir()
    wheel = make_wheel(
        tmp_path / "w", "pkg", "1.0", {"pkg/lib/libown.so": own, f"pkg/lib/_mod.{EXT}": mod}
    )
    code, out, err = cli_run("can-load", str(wheel), "--with", str(fakes.torch_new),
                             "--format", "json")  # fmt: skip
    assert code == 0, out + err
    doc = json.loads(out)
    validate_schema(doc, "can-load")
    lib = next(x for x in doc["libraries"] if x["path"] == f"pkg/lib/_mod.{EXT}")
    (row,) = [n for n in lib["needed"] if n["name"] == "libown.so"]
    assert row["how"] == "package" and row["path"] == "site-packages/pkg/lib/libown.so"
    assert lib["symbols_resolved"] == lib["symbols_checked"]
    code, out, _err = cli_run("can-load", str(wheel), "--with", str(fakes.torch_new))
    assert "found only once the package has loaded" in out
    # the real loader: the module opened first fails; after the package's own library, it loads
    opened, message = real_loader_opens(
        tmp_path / "r1", fakes.torch_new, wheel, f"pkg/lib/_mod.{EXT}"
    )
    assert not opened and "libown.so" in message
    code_two = (
        "import ctypes, os, sys\n"
        f"ctypes.CDLL({str(tmp_path / 'r1' / 'site' / 'pkg' / 'lib' / 'libown.so')!r})\n"
        f"ctypes.CDLL({str(tmp_path / 'r1' / 'site' / 'pkg' / 'lib' / f'_mod.{EXT}')!r}, "
        "mode=os.RTLD_NOW)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code_two], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def _patched_wheel(tmp_path: Path, fakes: Fakes, name: str, data: bytes) -> Path:
    so = tmp_path / f"{name}.so"
    so.write_bytes(data)
    (tmp_path / name).mkdir()
    return make_wheel(tmp_path / name, name, "1.0", {f"{name}/_m.{EXT}": so})


def _dynamic_tag_positions(data: bytes, wanted: int) -> list[int]:
    _is64, _loads, dyn = program_headers(lambda o, n: data[o : o + n], len(data))
    assert dyn is not None
    return [
        pos
        for pos in range(dyn.offset, dyn.offset + dyn.filesz, 16)
        if struct.unpack_from("<qQ", data, pos)[0] == wanted
    ]


def _bad_elf_cases(fakes: Fakes) -> dict[str, tuple[bytes, str]]:
    """Broken ELF files, each with the words its one-line problem must contain."""
    from archwheel.binary.dynamic import DT_GNU_HASH, DT_HASH, DT_SYMTAB, PT_DYNAMIC

    data = fakes.ext_so.read_bytes()
    cases: dict[str, tuple[bytes, str]] = {}
    # the program header of PT_DYNAMIC points past the end of the file
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        base = phoff + i * phentsize
        if struct.unpack_from("<I", data, base)[0] == PT_DYNAMIC:
            damaged = bytearray(data)
            struct.pack_into("<Q", damaged, base + 8, len(data) + (1 << 20))
            cases["dynamic-past-the-end"] = (bytes(damaged), "dynamic section claims bytes")
    # the dynamic section has no end (DT_NULL overwritten by garbage tags) and a bogus entry
    damaged = bytearray(data)
    for pos in _dynamic_tag_positions(data, 0):
        struct.pack_into("<qQ", damaged, pos, 0x7123, 0xFFFF_FFFF_FFFF)
    cases["dynamic-without-end"] = (bytes(damaged), "no DT_NULL end")
    # the dynamic symbol table's address lies outside every loadable segment
    damaged = bytearray(data)
    for pos in _dynamic_tag_positions(data, DT_SYMTAB):
        struct.pack_into("<qQ", damaged, pos, DT_SYMTAB, 1 << 44)
    cases["symtab-outside"] = (bytes(damaged), "DT_SYMTAB address")
    # the hash table claims more symbols than the file holds: .dynsym runs past the end
    damaged = bytearray(data)
    for tag in (DT_HASH, DT_GNU_HASH):
        for pos in _dynamic_tag_positions(data, tag):
            address = struct.unpack_from("<qQ", data, pos)[1]
            _b, loads, _d = program_headers(lambda o, n: data[o : o + n], len(data))
            seg = next(s for s in loads if s.vaddr <= address < s.vaddr + s.filesz)
            offset = address - seg.vaddr + seg.offset
            # DT_HASH: nchain; DT_GNU_HASH: symoffset (both the second word) far too large
            struct.pack_into("<I", damaged, offset + 4, 900_000)
    cases["symtab-past-the-end"] = (bytes(damaged), "dynamic symbol table (.dynsym) claims")
    return cases


def test_broken_elf_files_get_one_line_problems_and_exit_3(
    fakes: Fakes, cli_run: CliRun, tmp_path: Path
) -> None:
    """Broken dynamic sections and symbol tables that point past the file: verdict unknown
    (exit 3, incomplete input), the problem named in one line, never a traceback."""
    for name, (data, words) in _bad_elf_cases(fakes).items():
        wheel = _patched_wheel(tmp_path, fakes, name.replace("-", "_"), data)
        code, out, err = cli_run("can-load", str(wheel), "--with", str(fakes.torch_new),
                                 "--format", "json")  # fmt: skip
        assert "Traceback" not in err, (name, err)
        assert code == 3, (name, out, err)
        doc = json.loads(out)
        validate_schema(doc, "can-load")
        (lib,) = doc["libraries"]
        assert lib["verdict"] == "unknown" and lib["problems"], (name, lib)
        assert all("\n" not in p for p in lib["problems"])
        assert words in lib["problems"][0], (name, lib["problems"])


def test_bad_with_arguments_are_usage_errors(fakes: Fakes, cli_run: CliRun, tmp_path: Path) -> None:
    """What is not a torch wheel: a file that is not a wheel, a wheel that is not torch, a
    missing file, a zip without metadata; and two torches: one line each, documented codes."""
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    empty_zip = write_zip(tmp_path / "torch-2.14.1-cp311-cp311-linux_x86_64.whl", [("a", b"")])
    cases = [
        ((str(fakes.ext), "--with", str(text)), 2, "not a wheel (.whl)"),
        ((str(fakes.ext), "--with", str(fakes.ext_glibc)), 2, "none of the --with wheels is torch"),
        ((str(fakes.ext), "--with", str(tmp_path / "gone.whl")), 3, "gone.whl"),
        ((str(fakes.ext), "--with", str(empty_zip)), 3, empty_zip.name),
        ((str(fakes.ext), "--with", str(fakes.torch_new), "--with", str(fakes.torch_old)), 2,
         "two torches given"),
        ((str(fakes.ext),), 2, "can-load needs the torch to load against"),
    ]  # fmt: skip
    for args, expected, words in cases:
        code, _out, err = cli_run("can-load", *args)
        assert code == expected, (args, err)
        assert "Traceback" not in err
        errors = [ln for ln in err.splitlines() if ln.startswith("archwheel: error")]
        assert len(errors) == 1 and words in errors[0], (args, err)


def _chain(count: int) -> tuple[object, object]:
    """A wheel of ``count`` libraries, each needing the next (RPATH $ORIGIN), and a torch."""
    from archwheel.binary.dynamic import DynamicInfo
    from archwheel.verdicts.load import WheelFiles

    libraries = tuple(
        DynamicInfo(
            f"x/lib{i}.so", 100, "shared-object", True, 62, soname=f"lib{i}.so",
            needed=(f"lib{i + 1}.so",) if i + 1 < count else (), rpath=("$ORIGIN",),
        )
        for i in range(count)
    )  # fmt: skip
    wheel = WheelFiles("x-1.0-py3-none-linux_x86_64.whl", "x", "1.0", ("py3-none-linux_x86_64",),
                       libraries)  # fmt: skip
    torch_c = DynamicInfo(f"torch/_C.{EXT}", 100, "shared-object", True, 62)
    torch = WheelFiles("torch-2.14.1-cp311-cp311-linux_x86_64.whl", "torch", "2.14.1",
                       ("cp311-cp311-linux_x86_64",), (torch_c,))  # fmt: skip
    return wheel, torch


def test_the_loader_model_of_a_wheel_has_a_bounded_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each library closes over its DT_NEEDED and each name is searched along the RPATHs of the
    chain that loaded it: for libraries that need one another in a chain that is cubic (500:
    105 s measured; 1000 about 14 minutes by that growth). The model has a budget of steps; the libraries it does not reach
    are 'unknown', each saying why. (The budget is lowered here to keep the test short.)"""
    from archwheel.verdicts import load
    from tests.support.fuzz import watchdog

    monkeypatch.setattr(load, "MAX_LOAD_STEPS", 200_000)
    wheel, torch = _chain(300)
    with watchdog(60):
        report = load.judge_load(wheel, torch)  # type: ignore[arg-type]
    verdicts = [lib.verdict.value for lib in report.libraries]
    assert len(verdicts) == 300 and verdicts[0] == "loads" and verdicts[-1] == "unknown"
    assert report.libraries[-1].problems == (
        "not judged: modelling the loader for this wheel took more than 200000 steps (a "
        "dependency graph or symbol tables far beyond a real wheel's)",
    )
    short, torch = _chain(20)  # a small wheel of the same shape is judged whole
    assert {lib.verdict.value for lib in load.judge_load(short, torch).libraries} == {"loads"}  # type: ignore[arg-type]
