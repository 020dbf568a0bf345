"""can-load and its ELF reader on compiled fake wheels (g++ only)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from archwheel.binary.dynamic import (
    DT_STRSZ,
    parse_dynamic,
    program_headers,
    read_file_dynamic,
    read_member_dynamic,
    read_wheel_dynamic,
)
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
    from archwheel.interfaces.commands.can_load import demangle

    if shutil.which("c++filt"):
        assert demangle(["_ZN3c103fooEi"]) == {"_ZN3c103fooEi": "c10::foo(int)"}
    monkeypatch.setenv("PATH", "/nonexistent")
    assert demangle(["_ZN3c103fooEi"]) == {}
