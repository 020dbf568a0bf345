"""cuobjdump as an oracle: its listing parser, section attribution, the layout reader on hostile
input, finding and running the tool.

The listing samples below are cuobjdump 13.5's real output (see docs/maintainers/fixtures.md for the
commands). The runner on the nvcc fixture corpus, whose contents are derived from the nvcc flags,
and the layout reader are checked in tests/integration/nvcc/test_cuobjdump.py; facts about the
torch 2.14.1 wheel (cuda-facts.md section 6) in tests/integration/realwheel/test_cuobjdump.py.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from archwheel.binary.cuobjdump import (
    ListedImage,
    parse_listing,
    read_layout,
    split_by_section,
)
from archwheel.crosscheck.cuobjdump import (
    Cuobjdump,
    CuobjdumpInstaller,
    ensure_cuobjdump,
    find_cuobjdump,
    install_root,
    timeout_setting,
)
from archwheel.effects.engine import EngineSettings
from archwheel.effects.settings import Settings
from archwheel.errors import ToolError, UsageError
from archwheel.facts.arch import CodeKind
from tests.support.cuobjdump_support import NV, REL, listed

SASS, PTX = CodeKind.SASS, CodeKind.PTX

# -- parse_listing --------------------------------------------------------------------------------

NVSHMEM_DEFAULT = """\
ELF file    1: libtorch_nvshmem.1.sm_75.cubin
ELF file    2: libtorch_nvshmem.2.sm_80.cubin
ELF file    3: libtorch_nvshmem.3.sm_86.cubin
"""

ARCHIVE = """
member /tmp/orx/libk.a:k.o:
ELF file    1: libk.1.sm_75.cubin
ELF file    2: libk.2.sm_90a.cubin

member /tmp/orx/libk.a:k2.o:
PTX file    1: libk.1.sm_80.ptx
ELF file    3: libk.3.sm_80.cubin
"""


def test_parse_listing_reads_elf_and_ptx_lines_in_archwheel_spelling() -> None:
    text = NVSHMEM_DEFAULT + "PTX file    1: libtorch_nvshmem.1.sm_120.ptx\n"
    assert parse_listing(text) == (
        ListedImage(SASS, "sm_75", "libtorch_nvshmem.1.sm_75.cubin"),
        ListedImage(SASS, "sm_80", "libtorch_nvshmem.2.sm_80.cubin"),
        ListedImage(SASS, "sm_86", "libtorch_nvshmem.3.sm_86.cubin"),
        ListedImage(PTX, "compute_120", "libtorch_nvshmem.1.sm_120.ptx"),
    )


def test_parse_listing_keeps_a_and_f_where_cuobjdump_prints_them() -> None:
    text = (
        "ELF file    1: var.1.sm_90a.cubin\n"
        "PTX file    1: var.1.sm_90a.ptx\n"
        "PTX file    2: var.2.sm_120f.ptx\n"
        "ELF file   10: var.10.sm_120.cubin\n"
    )
    assert [i.arch for i in parse_listing(text)] == [
        "sm_90a",
        "compute_90a",
        "compute_120f",
        "sm_120",
    ]


def test_parse_listing_attributes_archive_members() -> None:
    images = parse_listing(ARCHIVE)
    assert [(i.member, i.kind, i.arch) for i in images] == [
        ("k.o", SASS, "sm_75"),
        ("k.o", SASS, "sm_90a"),
        ("k2.o", PTX, "compute_80"),
        ("k2.o", SASS, "sm_80"),
    ]


def test_parse_listing_reads_a_bare_cubin_line_without_index_and_odd_names() -> None:
    assert parse_listing("ELF file    1: k.sm_90.cubin\n")[0].arch == "sm_90"
    odd = "ELF file    7: my lib (copy).so.7.sm_100a.cubin\n"
    assert parse_listing(odd) == (ListedImage(SASS, "sm_100a", "my lib (copy).so.7.sm_100a.cubin"),)


def test_parse_listing_of_nothing_is_empty() -> None:
    assert parse_listing("") == ()
    assert parse_listing("\n\n") == ()


@pytest.mark.parametrize(
    "line",
    [
        "NVVM file    1: x.1.sm_90.nvvm",
        "ELF file    1: x.1.cubin",
        "ELF file    1: x.1.sm_90.bin",
        "Fatbin elf code:",
    ],
)
def test_parse_listing_refuses_lines_it_does_not_understand(line: str) -> None:
    with pytest.raises(ToolError, match="unexpected line in cuobjdump output"):
        parse_listing(NVSHMEM_DEFAULT + line + "\n")


# -- split_by_section -----------------------------------------------------------------------------


def test_split_attributes_the_difference_between_the_two_runs_to_relfatbin() -> None:
    every = listed((SASS, "sm_75"), (SASS, "sm_80"), (SASS, "sm_75"), (PTX, "compute_120"))
    default = listed((SASS, "sm_75"), (SASS, "sm_80"))
    counts = split_by_section(every, default, frozenset({NV, REL, ".text"}))
    assert counts == Counter(
        {(NV, SASS, "sm_75"): 1, (NV, SASS, "sm_80"): 1, (REL, SASS, "sm_75"): 1,
         (REL, PTX, "compute_120"): 1}
    )  # fmt: skip


@pytest.mark.parametrize("section", [NV, REL])
def test_split_with_one_fatbin_section_puts_everything_there(section: str) -> None:
    every = listed((SASS, "sm_90"), (PTX, "compute_90"))
    counts = split_by_section(every, [], frozenset({section, ".text"}))
    assert counts == Counter({(section, SASS, "sm_90"): 1, (section, PTX, "compute_90"): 1})


def test_split_of_a_raw_file_uses_the_raw_section_name() -> None:
    counts = split_by_section(listed((SASS, "sm_90")), [], frozenset(), raw_section="(fatbin)")
    assert counts == Counter({("(fatbin)", SASS, "sm_90"): 1})


def test_split_never_invents_a_section_for_images_it_cannot_place() -> None:
    counts = split_by_section(listed((SASS, "sm_90")), [], frozenset({".text"}))
    assert counts == Counter({("<unknown>", SASS, "sm_90"): 1})


def test_split_refuses_a_default_listing_larger_than_the_full_one() -> None:
    with pytest.raises(ToolError, match="more images without -all"):
        split_by_section(listed((SASS, "sm_90")), listed((SASS, "sm_90"), (SASS, "sm_90")),
                         frozenset({NV, REL}))  # fmt: skip


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x7fELF",
        b"\x7fELF\x02\x01" + b"\xff" * 58,  # section table far past the end
        b"!<arch>\n" + b"x" * 59,
        b"!<arch>\nname/           0           0     0     644     99999999  `\n",
        os.urandom(4096),
    ],
)
def test_read_layout_survives_truncated_and_hostile_headers(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "hostile.so"
    path.write_bytes(data)
    layout = read_layout(path)
    assert layout.kind in ("host-elf", "archive", "other", "fatbin", "cubin")
    assert not layout.sections - {""}


def test_read_layout_of_a_missing_file_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="cannot read"):
        read_layout(tmp_path / "missing.so")


def test_a_file_without_device_code_lists_nothing(cuobjdump: Cuobjdump) -> None:
    # The Python interpreter is an ELF without fatbins: cuobjdump exits 255, "no device code".
    assert cuobjdump.list_images(Path(sys.executable).resolve(), all_fatbins=True) == ()
    assert cuobjdump.inventory(Path(sys.executable).resolve()).total == 0


def test_a_missing_file_is_a_tool_error_naming_it(cuobjdump: Cuobjdump, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"cuobjdump failed on .*missing\.so \(exit 1\)"):
        cuobjdump.list_images(tmp_path / "missing.so", all_fatbins=True)


def fake_tool(tmp_path: Path, name: str, script: str) -> Path:
    """A stand-in for cuobjdump where the real one cannot misbehave on demand."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_cuobjdump_that_hangs_is_stopped_and_reported(tmp_path: Path) -> None:
    tool = Cuobjdump(fake_tool(tmp_path, "fake_cuobjdump_hangs", "exec sleep 60"), timeout_s=0.5)
    with pytest.raises(ToolError, match=r"did not finish on .* within 0.5 s"):
        tool.list_images(tmp_path / "x.so", all_fatbins=True)


def test_a_cuobjdump_killed_by_a_signal_is_reported(tmp_path: Path) -> None:
    tool = Cuobjdump(fake_tool(tmp_path, "fake_cuobjdump_killed", "kill -9 $$"))
    with pytest.raises(ToolError, match="killed by signal 9"):
        tool.list_images(tmp_path / "x.so", all_fatbins=True)


def test_a_cuobjdump_that_cannot_start_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="cannot run cuobjdump"):
        Cuobjdump(tmp_path / "no-such-cuobjdump").version()


def test_the_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    def from_environment() -> Cuobjdump:
        setting = Settings.from_environ(os.environ).cuobjdump_timeout
        return Cuobjdump(Path("cuobjdump"), timeout_s=timeout_setting(setting))

    monkeypatch.setenv("ARCHWHEEL_CUOBJDUMP_TIMEOUT", "12.5")
    assert from_environment().timeout_s == 12.5
    monkeypatch.setenv("ARCHWHEEL_CUOBJDUMP_TIMEOUT", "")
    assert from_environment().timeout_s > 60  # the default
    assert Cuobjdump(Path("cuobjdump")).timeout_s > 60  # no setting: the default
    # A value that is not a limit is the user's mistake, said as such (1e400 overflowed).
    for value in ("nonsense", "0", "-3", "nan", "inf", "1e400"):
        monkeypatch.setenv("ARCHWHEEL_CUOBJDUMP_TIMEOUT", value)
        with pytest.raises(UsageError, match="ARCHWHEEL_CUOBJDUMP_TIMEOUT"):
            from_environment()


def test_version_reads_the_release_line(cuobjdump: Cuobjdump) -> None:
    assert re.fullmatch(r"1[3-9]\.\d+\.\d+", cuobjdump.version())


# -- finding and installing -----------------------------------------------------------------------


def _find(environ: dict[str, str], search_path: list[str]) -> Path | None:
    """``find_cuobjdump`` with the settings and the variables of ``environ``."""
    return find_cuobjdump(Settings.from_environ(environ), environ, search_path)


def _cache_dir(environ: dict[str, str]) -> Path:
    """archwheel's cache folder, as the settings of ``environ`` resolve it."""
    return Settings.from_environ(environ).cache


def test_find_prefers_the_explicit_variable_then_path_then_cuda_home(
    cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    real = cuobjdump.executable
    on_path = tmp_path / "path-bin"
    on_path.mkdir()
    (on_path / "cuobjdump").symlink_to(real)
    cuda_home = tmp_path / "cuda"
    (cuda_home / "bin").mkdir(parents=True)
    (cuda_home / "bin" / "cuobjdump").symlink_to(real)
    base = {"ARCHWHEEL_CACHE": str(tmp_path / "cache")}
    env = {**base, "PATH": str(on_path), "CUDA_HOME": str(cuda_home)}
    assert _find({**env, "ARCHWHEEL_CUOBJDUMP": str(real)}, []) == real
    assert _find(env, []) == on_path / "cuobjdump"
    assert _find({**base, "PATH": "", "CUDA_HOME": str(cuda_home)}, []) == (
        cuda_home / "bin" / "cuobjdump"
    )


def _not_executable(folder: Path) -> str:
    path = folder / "cuobjdump-text"
    path.write_text("#!/bin/sh\n")
    return str(path)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda folder: str(folder / "missing"), "no such file"),
        (str, "a folder"),
        (lambda _: "/dev/null", "not a regular file"),
        (_not_executable, "not executable"),
    ],
)
def test_a_wrong_explicit_cuobjdump_is_a_usage_error_not_skipped(
    tmp_path: Path, make: Callable[[Path], str], why: str
) -> None:
    """ARCHWHEEL_CUOBJDUMP names the one to use: a wrong one was skipped for the one on PATH,
    or, with none, for a pip install from the index (13 s)."""
    on_path = tmp_path / "path-bin"
    on_path.mkdir()
    other = on_path / "cuobjdump"  # another executable, found first before
    other.write_text("#!/bin/sh\nexit 0\n")
    other.chmod(0o755)
    wrong = make(tmp_path)
    env = {"ARCHWHEEL_CACHE": str(tmp_path / "cache"), "PATH": str(on_path)}
    with pytest.raises(UsageError, match=f"ARCHWHEEL_CUOBJDUMP=.*: {why}") as info:
        _find({**env, "ARCHWHEEL_CUOBJDUMP": wrong}, [])
    assert "\n" not in info.value.one_line()
    with pytest.raises(UsageError, match=why):  # before any install is tried
        ensure_cuobjdump(
            Settings.from_environ({**env, "ARCHWHEEL_CUOBJDUMP": wrong}), install=True, environ=env
        )


def test_find_looks_in_site_packages_for_the_pypi_wheel(
    cuobjdump: Cuobjdump, tmp_path: Path
) -> None:
    site = tmp_path / "site-packages"
    binary = site / "nvidia" / "cu13" / "bin" / "cuobjdump"
    binary.parent.mkdir(parents=True)
    binary.symlink_to(cuobjdump.executable)
    env = {"PATH": "", "ARCHWHEEL_CACHE": str(tmp_path / "cache")}
    assert _find(env, [str(tmp_path / "elsewhere"), str(site)]) == binary


def test_without_any_cuobjdump_and_no_install_the_error_says_how_to_get_one(
    tmp_path: Path,
) -> None:
    env = {"PATH": "", "ARCHWHEEL_CACHE": str(tmp_path / "cache")}
    if Path("/usr/local/cuda/bin/cuobjdump").is_file():
        pytest.skip("this machine has /usr/local/cuda/bin/cuobjdump, found as a last resort")
    assert _find(env, []) is None
    original = sys.path[:]
    try:
        sys.path[:] = []
        with pytest.raises(ToolError, match="cuobjdump not found") as info:
            ensure_cuobjdump(Settings.from_environ(env), install=False, environ=env)
    finally:
        sys.path[:] = original
    assert "nvidia-cuda-cuobjdump" in info.value.one_line()


def test_cache_dir_follows_archwheel_cache_then_xdg(tmp_path: Path) -> None:
    # $ARCHWHEEL_CACHE/archwheel, as every other cache of archwheel (it was
    # $ARCHWHEEL_CACHE itself here, a second cache folder beside effects.paths.cache_dir).
    assert _cache_dir({"ARCHWHEEL_CACHE": str(tmp_path)}) == tmp_path / "archwheel"
    assert _cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "archwheel"
    assert install_root(_cache_dir({"ARCHWHEEL_CACHE": str(tmp_path)})) == (
        tmp_path / "archwheel" / "cuobjdump"
    )


def test_every_cache_folder_of_archwheel_is_the_one_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cuobjdump's venv, the podman configuration and the build caches share one folder."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    environments: list[dict[str, str]] = [
        {"ARCHWHEEL_CACHE": str(tmp_path / "a")},
        {"XDG_CACHE_HOME": str(tmp_path / "x")},
        {"ARCHWHEEL_CACHE": str(tmp_path / "a"), "XDG_CACHE_HOME": str(tmp_path / "x")},
        {},
    ]
    folders = set()
    for env in environments:
        podman = EngineSettings.create(
            "podman", Settings.from_environ({**env, "ARCHWHEEL_PODMAN_RUNTIME": ""}), environ=env
        )
        conf = Path(podman.env["CONTAINERS_CONF"])
        assert conf.parent == _cache_dir(env)
        assert install_root(_cache_dir(env)).parent == _cache_dir(env)
        folders.add(_cache_dir(env))
    assert folders == {
        tmp_path / "a" / "archwheel",
        tmp_path / "x" / "archwheel",
        tmp_path / "home" / ".cache" / "archwheel",
    }


def test_a_failed_install_is_a_tool_error_with_pips_last_line(tmp_path: Path) -> None:
    installer = CuobjdumpInstaller(
        tmp_path / "cuobjdump", requirement="nvidia-cuda-cuobjdump==0.0.0.archwheel.no.such"
    )
    with pytest.raises(ToolError, match="could not pip install") as info:
        installer.install()
    assert "\n" not in info.value.one_line()
    assert installer.installed_binaries() == []
