"""Every bad-input class against every command that reads files (also
metadata that disagrees with the file name, an archive member that cannot be placed;
the output shapes are in test_bad_output_matrix.py, index folders bent out of shape in
test_bad_index_folders.py, what other programs answer in test_untrusted_answers.py).

Exit 4 and "internal error" are reserved for archwheel's own bugs: a user's mistake or a
hostile file ends with a one-line error and a documented code (2 usage, 3 unreadable input),
within the watchdog (a FIFO or /dev/zero must never block or grow), and names the input.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

import archwheel
from archwheel.binary.scan.inputs import MAX_PROBLEMS_PER_INPUT, scan_wheel
from archwheel.binary.scan.pool import scan_members
from archwheel.binary.zipread import WheelReader
from archwheel.errors import ArchwheelError
from archwheel.exit_codes import ExitCode
from tests.support.bad_input import DOCUMENTED, run_main
from tests.support.builders import (
    Entry,
    ar_archive,
    container,
    elf64,
    overlapping_zip,
    with_zip_flags,
    write_zip,
    zip_declaring,
)
from tests.support.fuzz import watchdog
from tests.support.index_wheels import device_library, make_dist
from tests.support.wheels import make_wheel

REPO = Path(__file__).resolve().parents[3]

Make = Callable[[Path], str]


def _write(name: str, data: bytes) -> Make:
    def make(folder: Path) -> str:
        path = folder / name
        path.write_bytes(data)
        return str(path)

    return make


def _fifo(folder: Path) -> str:
    path = folder / "pipe.whl"
    os.mkfifo(path)
    return str(path)


def _negative_ar(folder: Path) -> str:
    head = b"x.o/".ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"100644".ljust(8)
    member = b"!<arch>\n" + head + b"-60".ljust(10) + b"`\n" + b"\0" * 64
    return str(write_zip(folder / "neg-1-py3-none-any.whl", [("pkg/libneg.a", member)]))


def _declared_bomb(folder: Path) -> str:
    # One deflated member whose directory entry declares 3 GiB: above what any wheel of this
    # size may inflate to, refused before a byte is inflated.
    wheel = write_zip(folder / "bomb-1-py3-none-any.whl", [("pkg/libz.so", bytes(1 << 16))])
    data = bytearray(wheel.read_bytes())
    struct.pack_into("<I", data, data.rindex(b"PK\x01\x02") + 24, 3 << 30)
    wheel.write_bytes(bytes(data))
    return str(wheel)


def _encrypted(folder: Path) -> str:
    # Every member flagged encrypted (zip flag bit 0), its METADATA too: pip's zipfile refuses
    # to read them; they ended manifest, can-run, can-load, diff and publish with an internal
    # error (zipfile's RuntimeError).
    wheel = write_zip(
        folder / "enc-1.0-py3-none-any.whl",
        [
            ("enc/libz.so", elf64([(".nv_fatbin", container(Entry(sm=80)))])),
            ("enc-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: enc\nVersion: 1.0\n"),
            ("enc-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nTag: py3-none-any\n"),
            ("enc-1.0.dist-info/RECORD", b""),
        ],
    )
    return str(with_zip_flags(wheel, 0x1))


def _empty_archive(folder: Path) -> str:
    # A zip whose directory holds nothing: the overlap check failed on it (ValueError, exit 4).
    path = folder / "empty-1.0-py3-none-any.whl"
    zipfile.ZipFile(path, "w").close()
    return str(path)


def _extract_version_7(folder: Path) -> str:
    # A member needing "version 7.0" to extract: zipfile raises NotImplementedError (was exit 4).
    wheel = write_zip(folder / "v7-1.0-py3-none-any.whl", [("pkg/libz.so", b"\x7fELF" * 16)])
    data = bytearray(wheel.read_bytes())
    data[data.rindex(b"PK\x01\x02") + 6] = 70
    wheel.write_bytes(bytes(data))
    return str(wheel)


def _empty_member_name(folder: Path) -> str:
    # A member named "": zipfile's is_dir() indexes its last character (IndexError, exit 4).
    path = folder / "noname-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo(""), b"abcd")
    return str(path)


def _metadata_disagrees(folder: Path) -> str:
    # METADATA says demo 1.0, the file name other 2.0: pip finds it by name, then refuses it.
    wheel = make_dist(folder, "demo", "1.0", libraries={"demo/libx.so": device_library(80)})
    return str(wheel.rename(folder / "other-2.0-py3-none-any.whl"))


def _unplaceable_ar_member(folder: Path) -> str:
    # A static library whose member's long name (/N) points past the '//' table.
    lib = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    data = bytearray(ar_archive([("a_very_long_member_name.o", lib)]))
    at = data.index(b"/0".ljust(16))
    data[at : at + 16] = b"/999".ljust(16)
    return str(write_zip(folder / "ar-1.0-py3-none-any.whl", [("ar/libx.a", bytes(data))]))


def _recipe_with_env(env_line: str) -> Make:
    """An extension recipe whose [build.env] holds ``env_line`` (a folder "src" beside it)."""

    def make(folder: Path) -> str:
        (folder / "src").mkdir(exist_ok=True)
        text = (REPO / "recipes" / "example.toml").read_text(encoding="utf-8")
        text = re.sub(r'^path = ".*"$', 'path = "src"', text, count=1, flags=re.M)
        path = folder / "recipe.toml"
        path.write_text(text.replace("[build.env]\n", f"[build.env]\n{env_line}\n", 1))
        return str(path)

    return make


BAD_INPUTS: dict[str, Make] = {
    "fifo": _fifo,
    "char-device": lambda _: "/dev/zero",
    "proc-file": lambda _: "/proc/self/status",
    "folder": str,
    "missing": lambda folder: str(folder / "nothing-here.whl"),
    "huge-name": lambda folder: str(folder / ("x" * 100_000)),
    "control-name": lambda folder: str(folder / "evil\x1b]0;owned\x07.whl"),
    "deep-json": _write("deep.json", b"[" * 200_000 + b"]" * 200_000),
    "deep-json-moderate": _write("moderate.json", b'{"kind": ' + b"[" * 500 + b"]" * 500 + b"}"),
    "huge-int-json": _write("int.json", b'{"schema_version": ' + b"9" * 100_000 + b"}"),
    "non-utf8": _write("latin.json", b'{"kind": "\xff\xfe"}'),
    "deep-toml": _write("deep.toml", b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    "huge-int-toml": _write("int.toml", b"a = " + b"9" * 100_000 + b"\n"),
    "negative-ar-size": _negative_ar,
    "random-bytes": _write("noise.whl", os.urandom(4096)),
    "overlapping-zip": lambda folder: str(
        overlapping_zip(folder / "over-1-py3-none-any.whl", elf64([(".nv_fatbin", container())]))
    ),
    "zip-declaring-a-bomb": _declared_bomb,
    "encrypted-members": _encrypted,
    "empty-archive": _empty_archive,
    "zip-extract-version-7": _extract_version_7,
    "empty-member-name": _empty_member_name,
    "metadata-disagrees-with-file-name": _metadata_disagrees,
    "unplaceable-ar-member": _unplaceable_ar_member,
    # archwheel sets TZ itself: it was replaced silently; nvcc's own --time moved the record
    "recipe-sets-tz": _recipe_with_env('TZ = "Europe/Paris"'),
    "recipe-own-nvcc-time": _recipe_with_env('NVCC_APPEND_FLAGS = "--time /tmp/mine.csv"'),
    "zip-declaring-a-billion-members": lambda folder: str(
        zip_declaring(folder / "many-1.0-py3-none-any.whl", [("many/a.txt", b"x")], 10**9)
    ),
}

COMMANDS: dict[str, Callable[[str, Path], list[str]]] = {
    "audit": lambda x, _: ["audit", x],
    "audit-json": lambda x, _: ["audit", x, "--format", "json"],
    "can-run": lambda x, _: ["can-run", x, "--cc", "8.0"],
    "can-load": lambda x, _: ["can-load", x, "--with", x],
    "diff": lambda x, _: ["diff", x, x],
    "manifest": lambda x, _: ["manifest", x],
    "verify": lambda x, _: ["verify", x],
    "build-recipe": lambda x, _: ["build", "--recipe", x, "--plan"],
    "matrix": lambda x, folder: ["matrix", x, "--index", str(folder / "index"), "--plan"],
    "publish": lambda x, folder: ["publish", x, "--index", str(folder / "index")],
    "clean-index": lambda x, folder: [
        "clean",
        "--engine",
        "none",
        "--temp",
        str(folder / "none"),
        "--index",
        x,
        "--dry-run",
    ],
    "recheck-index": lambda x, _: ["matrix", "--recheck", "--index", x],
    "arch": lambda x, _: ["arch", x],
    "doctor-interpreter": lambda x, _: ["doctor", "--interpreter", x, "--timeout", "20"],
    "smoke": lambda x, _: ["smoke", x, "--timeout", "20", "--install-timeout", "20"],
    "smoke-snippet": lambda x, _: [
        "smoke",
        "--backend",
        "existing",
        "--interpreter",
        sys.executable,
        "--snippet",
        x,
        "--timeout",
        "20",
    ],
    "smoke-interpreter": lambda x, _: [
        "smoke",
        "--backend",
        "existing",
        "--interpreter",
        x,
        "--timeout",
        "20",
    ],
}


@pytest.mark.parametrize("bad", sorted(BAD_INPUTS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_bad_input_is_an_internal_error(
    command: str, bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if bad == "proc-file" and not Path("/proc/self/status").exists():
        pytest.skip("no /proc here")
    argument = BAD_INPUTS[bad](tmp_path)
    with watchdog(60):
        code = run_main(COMMANDS[command](argument, tmp_path))
    out, err = capsys.readouterr()
    assert "internal error" not in err, err[-2000:]
    assert code in DOCUMENTED, (code, err[-2000:])
    for raw in ("\x1b", "\x07"):
        assert raw not in err and raw not in out
    assert len(err) < 20_000, "an error line repeats a huge argument"
    if code != ExitCode.OK:
        assert err.strip() or out.strip()


API_CALLS: dict[str, Callable[[str], object]] = {
    "audit": archwheel.audit,
    "audit-expect": lambda x: archwheel.audit(x, expect="8.0", deep=True),
    "can_run": lambda x: archwheel.can_run(x, ccs=["8.0"]),
    "can_run-list": lambda x: archwheel.can_run([x, x], gpus=["A100"], driver="570.86.10"),
    "can_load": lambda x: archwheel.can_load(x, with_=[x]),
    "diff": lambda x: archwheel.diff(x, x),
}


@pytest.mark.parametrize("bad", sorted(BAD_INPUTS))
@pytest.mark.parametrize("call", sorted(API_CALLS))
def test_no_bad_input_escapes_the_python_api_as_another_exception(
    call: str, bad: str, tmp_path: Path
) -> None:
    """The Python API on the same shapes: a report, or an archwheel error with one line (an
    OSError on a path is an InputError), never a bare ValueError, OSError or TypeError."""
    if bad == "proc-file" and not Path("/proc/self/status").exists():
        pytest.skip("no /proc here")
    argument = BAD_INPUTS[bad](tmp_path)
    error: ArchwheelError | None = None
    with watchdog(60):
        try:
            API_CALLS[call](argument)
        except ArchwheelError as raised:
            error = raised
    assert error is None or "\n" not in error.one_line()


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("recipe-sets-tz", "[build] env.TZ: is set by archwheel itself"),
        ("recipe-own-nvcc-time", "[build] env.NVCC_APPEND_FLAGS: gives nvcc its own --time"),
    ],
)
def test_a_recipe_that_replaces_or_defeats_archwheel_is_refused_by_build_plan(
    bad: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(COMMANDS["build-recipe"](BAD_INPUTS[bad](tmp_path), tmp_path)) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


# Settings written wrong: refused before any command runs (exit 2, one line naming the
# variable), whatever the command reads (ARCHWHEEL_DEBUG=0 turned debugging on).
BAD_SETTINGS: dict[str, dict[str, str]] = {
    "debug-not-a-switch": {"ARCHWHEEL_DEBUG": "banana"},
    "debug-two": {"ARCHWHEEL_DEBUG": "2"},
    "keep-containers-on": {"ARCHWHEEL_KEEP_CONTAINERS": "on"},
    "pure-python-escape": {"ARCHWHEEL_PURE_PYTHON": "\x1b[31m1"},
}


@pytest.mark.parametrize("bad", sorted(BAD_SETTINGS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_setting_written_wrong_is_a_usage_error_for_every_command(
    command: str,
    bad: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for variable, value in BAD_SETTINGS[bad].items():
        monkeypatch.setenv(variable, value)
    with watchdog(60):
        code = run_main(COMMANDS[command](str(tmp_path / "x.whl"), tmp_path))
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err[-2000:]
    (variable,) = BAD_SETTINGS[bad]
    assert err.count("\n") == 1 and f"{variable}=" in err and "\x1b" not in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["doctor", "--timeout", "0"], "above 0"),
        (["doctor", "--timeout", "-5"], "above 0"),
        (["doctor", "--timeout", "nan"], "above 0"),
        (["doctor", "--timeout", "1e308"], "at most 604800"),
        (["smoke", "x.whl", "--timeout", "-1"], "above 0"),
        (["smoke", "x.whl", "--install-timeout", "1e308"], "at most 604800"),
        (["smoke", "--device", "-1"], "0 or more"),
        (["build", "--plan", "--ccache-volume", "/etc"], "is not a volume name"),
        (["build", "--plan", "--ccache-volume", "../x"], "is not a volume name"),
        (["matrix", "--plan", "--ccache-volume", ""], "is not a volume name"),
        (["build", "--plan", "--ccache-size", "1e400"], "is not a size"),
        (["base-image", "--suite=--foreign"], "is not a Debian suite name"),
        (["base-image", "--mirror=--keyring=/tmp/k"], "is not a mirror URL"),
        (["build", "--recipe", "example", "--plan", "--jobs", "10" * 12], "at most 1024"),
    ],
)
def test_numbers_out_of_range_are_usage_errors(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(argv) == ExitCode.USAGE
    assert words in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "x.whl", "--workers", "9" * 100_000],
        ["audit", "x.whl", "--format", "x" * 100_000],
        ["x" * 100_000],
        ["build", "--jobs", "9" * 100_000],
    ],
)
def test_argparse_errors_do_not_repeat_a_huge_value(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "..." in err
    assert len(err) < 2_000


def _small_wheel(folder: Path) -> Path:
    lib = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    return write_zip(folder / "demo-1.0-py3-none-any.whl", [("demo/libx.so", lib)])


@pytest.mark.parametrize("target", ["folder", "missing-folder"])
def test_output_to_a_folder_or_a_missing_folder_is_a_usage_error(
    target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = make_wheel(tmp_path, "demo")
    output = tmp_path if target == "folder" else tmp_path / "no" / "report.txt"
    for argv in (
        ["audit", str(wheel), "-o", str(output)],
        ["manifest", str(wheel), "-o", str(output)],
    ):
        assert run_main(argv) == ExitCode.USAGE
        err = capsys.readouterr().err
        assert "internal error" not in err and str(output) in err


def test_audit_output_is_written_atomically(tmp_path: Path) -> None:
    wheel = _small_wheel(tmp_path)
    target = tmp_path / "report.json"
    target.write_text("old")
    assert run_main(["audit", str(wheel), "--format", "json", "-o", str(target)]) == 0
    assert json.loads(target.read_text())["inputs"][0]["libraries"][0]["path"] == "demo/libx.so"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def test_a_wheel_deleted_while_scanned_is_one_kind_of_problem(tmp_path: Path) -> None:
    lib = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    members = [(f"pkg/lib{i}.so", lib) for i in range(300)]
    wheel = write_zip(tmp_path / "gone-1-py3-none-any.whl", members)
    reader = WheelReader(wheel)
    wheel.unlink()
    results = scan_members(wheel, reader.archive_size, reader.members, lambda *_: None, 1)
    messages = {
        (message or "") + " ".join(n.message for _, n in (scan.notes if scan else []))
        for scan, message in results.values()
    }
    assert all("cannot read the archive" in m for m in messages), messages
    assert not any("internal error" in m for m in messages)


def test_a_wheel_replaced_while_scanned_is_not_read(tmp_path: Path) -> None:
    """Another file put in the wheel's place after its directory was read (here of the same
    size, so that only its identity tells): no member is read from it."""
    lib = elf64([(".nv_fatbin", container(Entry(sm=80)))])
    other = elf64([(".nv_fatbin", container(Entry(sm=90)))])
    wheel = write_zip(tmp_path / "swap-1-py3-none-any.whl", [("pkg/liba.so", lib)])
    reader = WheelReader(wheel)
    swapped = write_zip(tmp_path / "swap-2.whl", [("pkg/liba.so", other)])
    assert swapped.stat().st_size == wheel.stat().st_size
    swapped.replace(wheel)
    results = scan_members(
        wheel, reader.archive_size, reader.members, lambda *_: None, 1, identity=reader.identity
    )
    assert results == {0: (None, "the archive changed while it was scanned: not read")}
    # The same file, untouched: read as usual.
    reader = WheelReader(wheel)
    ((scan, message),) = scan_members(
        wheel, reader.archive_size, reader.members, lambda *_: None, 1, identity=reader.identity
    ).values()
    assert message is None and scan is not None
    assert [e.arch for e in scan.libraries[0].entries] == ["sm_90"]


def test_problem_lines_per_input_are_bounded(tmp_path: Path) -> None:
    # Every member damaged: a problem each, but the input reports a bounded number of lines.
    broken = elf64([(".nv_fatbin", container(Entry(sm=80), declared=4096))])
    count = MAX_PROBLEMS_PER_INPUT + 100
    wheel = write_zip(
        tmp_path / "many-1-py3-none-any.whl", [(f"pkg/lib{i}.so", broken) for i in range(count)]
    )
    inventory = scan_wheel(wheel, workers=1)
    assert len(inventory.problems) == MAX_PROBLEMS_PER_INPUT + 1
    assert "more problems" in inventory.problems[-1].message
    assert len(inventory.libraries) == count


def test_symlinks_out_of_a_directory_input_are_not_followed(tmp_path: Path) -> None:
    inside = tmp_path / "input"
    (inside / "lib").mkdir(parents=True)
    outside = tmp_path / "elsewhere.so"
    outside.write_bytes(elf64([(".nv_fatbin", container(Entry(sm=90)))]))
    (inside / "lib" / "real.so").write_bytes(elf64([(".nv_fatbin", container(Entry(sm=80)))]))
    (inside / "lib" / "inner-link.so").symlink_to("real.so")
    (inside / "lib" / "out-link.so").symlink_to(outside)
    if Path("/proc/self/status").exists():
        (inside / "lib" / "proc-link.so").symlink_to("/proc/self/status")
    from archwheel.binary.scan.inputs import scan_directory

    with watchdog(60):
        inventory = scan_directory(inside)
    archs = {lib.path: [e.arch for e in lib.entries] for lib in inventory.libraries}
    assert archs == {"lib/inner-link.so": ["sm_80"], "lib/real.so": ["sm_80"]}
    refused = {p.member for p in inventory.problems if "outside the input" in p.message}
    assert "lib/out-link.so" in refused


def test_special_files_in_a_directory_are_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.so")
    from archwheel.binary.scan.inputs import scan_directory

    with watchdog(60):
        inventory = scan_directory(tmp_path)
    assert inventory.libraries == () and inventory.members_scanned == 0


def test_manifest_file_names_must_be_plain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = make_wheel(tmp_path, "demo")
    manifest = tmp_path / "manifest.json"
    assert run_main(["manifest", str(wheel), "-o", str(manifest)]) == 0
    doc = json.loads(manifest.read_text())
    doc["wheels"][0]["file"] = "../../../../dev/zero"
    manifest.write_text(json.dumps(doc))
    capsys.readouterr()
    with watchdog(60):
        assert run_main(["verify", str(manifest)]) == ExitCode.INCOMPLETE
    assert "must be a bare file name" in capsys.readouterr().err


def _recipe(folder: Path, source: str) -> Path:
    """The example recipe with its [source] table replaced."""
    text = (REPO / "recipes" / "example.toml").read_text()
    assert 'path = "../examples/cuda-kernels"' in text
    path = folder / "recipe.toml"
    path.write_text(text.replace('path = "../examples/cuda-kernels"', source))
    return path


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ('path = "/"', "filesystem root"),
        (
            'sdist = "file:///nonexistent/demo-1.0.tar.gz"\nsha256 = "' + "a" * 64 + '"',
            "does not exist",
        ),
        ('sdist = "file:///dev/zero"\nsha256 = "' + "a" * 64 + '"', "not a regular file"),
    ],
)
def test_recipe_sources_that_cannot_be_built_are_usage_errors(
    source: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = _recipe(tmp_path, source)
    with watchdog(60):
        code = run_main(["build", "--recipe", str(recipe), "--plan"])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert words in err


def test_zip_with_struct_noise_never_crashes(tmp_path: Path) -> None:
    # A zip whose one member is a fatbin header with every size field at its maximum.
    noise = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, (1 << 64) - 1) + b"\xff" * 64
    wheel = tmp_path / "noise-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/libn.so", noise)
    with watchdog(60):
        assert run_main(["audit", str(wheel)]) == ExitCode.INCOMPLETE


def test_an_installed_distribution_is_read_only_inside_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from archwheel.binary.scan.inputs import scan_installed

    site = tmp_path / "site"
    package = site / "demo"
    package.mkdir(parents=True)
    (package / "libreal.so").write_bytes(elf64([(".nv_fatbin", container(Entry(sm=80)))]))
    outside = tmp_path / "elsewhere.so"
    outside.write_bytes(elf64([(".nv_fatbin", container(Entry(sm=90)))]))
    (package / "liblink.so").symlink_to(outside)
    dist_info = site / "demo-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    record = [
        "demo/libreal.so,,",
        "demo/liblink.so,,",
        "../elsewhere.so,,",
        "../../../../../../../../proc/self/status,,",
    ]
    (dist_info / "RECORD").write_text("\n".join(record) + "\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    with watchdog(60):
        inventory = scan_installed("demo", sys.executable)
    assert [lib.path for lib in inventory.libraries] == ["libreal.so"]
    assert any("outside the environment" in p.message for p in inventory.problems)


def test_a_very_deep_directory_input_is_walked(tmp_path: Path) -> None:
    from archwheel.binary.scan.inputs import scan_directory

    folders = [tmp_path / "d"]
    for _ in range(1500):  # deeper than Python's recursion limit
        folders.append(folders[-1] / "d")
    try:
        for folder in folders:
            folder.mkdir()
        deep = folders[-1] / "libdeep.so"
        deep.write_bytes(elf64([(".nv_fatbin", container(Entry(sm=80)))]))
        with watchdog(60):
            inventory = scan_directory(tmp_path)
    finally:  # removed here: a recursive rmtree (pytest's clean-up) cannot go this deep
        (folders[-1] / "libdeep.so").unlink(missing_ok=True)
        for folder in reversed(folders):
            if folder.exists():
                folder.rmdir()
    [lib] = inventory.libraries
    assert lib.path.endswith("d/libdeep.so") and [e.arch for e in lib.entries] == ["sm_80"]


def test_output_into_a_fifo_or_through_a_link_is_written_not_replaced(tmp_path: Path) -> None:
    import stat
    import threading

    wheel = _small_wheel(tmp_path)
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    with watchdog(60):
        assert run_main(["audit", str(wheel), "--format", "json", "-o", str(fifo)]) == 0
        reader.join()
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still a FIFO: written into, not replaced
    assert json.loads(received[0])["inputs"][0]["libraries"][0]["path"] == "demo/libx.so"

    target = tmp_path / "real-report.txt"
    target.write_text("old")
    link = tmp_path / "report-link.txt"
    link.symlink_to(target)
    assert run_main(["audit", str(wheel), "-o", str(link)]) == 0
    assert link.is_symlink() and "demo/libx.so" in target.read_text()
