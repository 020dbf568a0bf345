"""The repair step (build/repair.py) on real wheels compiled here, and its pieces.

The wheels of ``tests/support/repair_wheels.py`` do not import when installed as built (no
RPATH, libgomp not in the wheel, the provider library in another wheel). Repaired, they are
installed into a fresh venv with only their declared requirements (from a local folder) and the
extension module is imported with no LD_LIBRARY_PATH; the process's own map of loaded files
shows libgomp coming from inside the wheel and the provider library from the nvidia-* wheel.
What the repair wrote is read back with archwheel's own ELF reader.
"""

from __future__ import annotations

import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from archwheel.binary.coremetadata import parse_core_metadata
from archwheel.binary.dynamic import read_file_dynamic
from archwheel.binary.dynamic_wheel import read_wheel_dynamic
from archwheel.binary.wheelmeta import read_wheel_metadata
from archwheel.errors import RecipeError
from archwheel.facts.catalog import load_facts
from archwheel.facts.pytorch_official import load_official
from archwheel.wheelbuild.recipes.recipe import parse_recipe
from archwheel.wheelbuild.wheel.repair import (
    RepairError,
    RepairSpec,
    add_requirements,
    repair_wheel,
    rpath_for,
    spec_for_recipe,
)
from archwheel.wheelbuild.wheel.repair_tag import platform_verdict
from tests.support.cli import CliRun
from tests.support.repair_wheels import DemoWheels, build_demo_wheels
from tests.support.venvs import make_venv, pip_install

FACTS = load_facts()

PROVIDER_PIN = "nvidia-fake-cu13==1.0"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoWheels:
    return build_demo_wheels(tmp_path_factory.mktemp("repair-wheels"))


def newest_glibc(demo: DemoWheels) -> tuple[int, int]:
    """The newest GLIBC_X.Y the demo's libraries and the libgomp to bundle need (archwheel's
    ELF reader, independent of auditwheel)."""
    newest = (2, 2)
    infos = [*read_wheel_dynamic(demo.demo), read_file_dynamic(demo.libgomp_dir / "libgomp.so.1")]
    for info in infos:
        for _file, versions in info.version_needs:
            for v in versions:
                m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", v)
                if m:
                    newest = max(newest, (int(m.group(1)), int(m.group(2))))
    return newest


def spec(demo: DemoWheels, **changes: object) -> RepairSpec:
    values: dict[str, object] = {
        "origin": "test: [repair]",
        "rpath_folders": ("nvidia/fake/lib",),
        "library_folder": "demo/lib",
        "bundle": ("libgomp.so.1",),
        "requirements": (PROVIDER_PIN,),
        "provided": frozenset({"libprovider.so.1"}),
    }
    values.update(changes)
    return RepairSpec(**values)  # type: ignore[arg-type]


def import_in_fresh_venv(folder: Path, wheel: Path, venv: Path) -> str:
    python = make_venv(venv)
    pip_install(python, "--no-index", "--find-links", str(folder), str(wheel), offline=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    code = "import demo._core as c; print('value', c.value());print(open('/proc/self/maps').read())"
    proc = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, env=env, check=False, cwd=venv
    )
    assert proc.returncode == 0, proc.stderr[-1500:]
    return proc.stdout


@pytest.mark.slow
def test_unrepaired_wheel_does_not_import(demo: DemoWheels, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(
        python, "--no-index", "--find-links", str(demo.folder), str(demo.demo), offline=True
    )
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run(
        [str(python), "-c", "import demo._core"], capture_output=True, text=True, env=env,
        check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "libcore.so" in proc.stderr


@pytest.mark.slow
def test_repaired_wheel_loads_on_a_clean_venv(demo: DemoWheels, tmp_path: Path) -> None:
    glibc = newest_glibc(demo)
    tag = f"manylinux_{max(glibc[0], 2)}_{max(glibc[1], 17)}_x86_64"
    out = tmp_path / "out"
    report = repair_wheel(demo.demo, out, spec(demo, platform=tag), library_dirs=[demo.libgomp_dir])
    assert report.wheel.parent == out
    assert report.wheel.name.endswith(f"-{tag}.whl")
    assert sorted(p.name for p in out.iterdir()) == [report.wheel.name]  # nothing else left

    infos = {i.path: i for i in read_wheel_dynamic(report.wheel)}
    module = next(p for p in infos if p.startswith("demo/_core"))
    assert infos[module].rpath == ("$ORIGIN/../nvidia/fake/lib", "$ORIGIN", "$ORIGIN/lib")
    assert infos["demo/lib/libcore.so"].rpath == ("$ORIGIN/../../nvidia/fake/lib", "$ORIGIN")
    assert infos["demo/lib/libgomp.so.1"].soname == "libgomp.so.1"
    meta = read_wheel_metadata(report.wheel)
    assert [p.name for p in meta.requires] == ["nvidia-fake-cu13"]
    assert meta.tags == (
        f"{report.wheel.name.split('-')[2]}-{report.wheel.name.split('-')[3]}-{tag}",
    )
    with zipfile.ZipFile(report.wheel) as zf:
        assert zf.testzip() is None
        record = zf.read("demo-1.0.dist-info/RECORD").decode()
    assert "demo/lib/libgomp.so.1,sha256=" in record

    maps = import_in_fresh_venv(demo.folder, report.wheel, tmp_path / "venv")
    assert "value 701" in maps
    site = next(p for p in (tmp_path / "venv" / "lib").glob("python*/site-packages"))
    loaded = {line.split()[-1] for line in maps.splitlines() if "/" in line}
    assert str(site / "demo" / "lib" / "libgomp.so.1") in loaded
    assert str(site / "nvidia" / "fake" / "lib" / "libprovider.so.1") in loaded
    assert not any(p.endswith("libgomp.so.1.0.0") for p in loaded)  # not the system's


@pytest.mark.slow
def test_auditwheel_refuses_a_tag_older_than_the_symbols(demo: DemoWheels, tmp_path: Path) -> None:
    glibc = newest_glibc(demo)
    older = f"manylinux_2_{glibc[1] - 1}_x86_64"
    out = tmp_path / "out"
    with pytest.raises(RepairError, match=f"does not agree .* conforms to {older}: .*glibc"):
        repair_wheel(demo.demo, out, spec(demo, platform=older), library_dirs=[demo.libgomp_dir])
    assert list(out.iterdir()) == []


@pytest.mark.slow
def test_auditwheel_refuses_a_library_nobody_provides(demo: DemoWheels, tmp_path: Path) -> None:
    glibc = newest_glibc(demo)
    tag = f"manylinux_{glibc[0]}_{glibc[1]}_x86_64"
    out = tmp_path / "out"
    with pytest.raises(RepairError, match=r"libprovider\.so\.1 would have to be bundled"):
        repair_wheel(
            demo.demo, out, spec(demo, platform=tag, provided=frozenset()),
            library_dirs=[demo.libgomp_dir],
        )  # fmt: skip
    assert list(out.iterdir()) == []


@pytest.mark.slow
def test_a_library_to_bundle_that_is_missing(demo: DemoWheels, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(RepairError, match=r"bundle: libnothere.so.3 was not found \(searched "):
        repair_wheel(demo.demo, out, spec(demo, bundle=("libnothere.so.3",)), library_dirs=[out])
    assert list(out.iterdir()) == []


# -- the pieces, without tools --------------------------------------------------------------------


def test_rpath_of_the_official_layout() -> None:
    variant = load_official().variant("2.14.1", "13.0")
    assert variant is not None
    s = RepairSpec("t", variant.rpath_folders, rpath_base="torch/lib", library_folder="torch/lib")
    nvidia = ":".join(f"$ORIGIN/../../{f}" for f in variant.rpath_folders)
    assert (
        rpath_for("torch/_C.cpython-311-x86_64-linux-gnu.so", s) == nvidia + ":$ORIGIN:$ORIGIN/lib"
    )
    assert rpath_for("torch/lib/libc10.so", s) == nvidia + ":$ORIGIN"


def test_add_requirements_replaces_same_name_and_keeps_extras() -> None:
    text = (
        "Metadata-Version: 2.1\nName: t\nVersion: 1\nRequires-Dist: filelock\n"
        'Requires-Dist: nvidia-nccl-cu13>=1\nRequires-Dist: pyyaml; extra == "yaml"\n'
        "Provides-Extra: yaml\n\nDescription body\nRequires-Dist: not-a-header\n"
    )
    new = add_requirements(text, ["nvidia-nccl-cu13==2.30.7", "b==1"])
    assert new.splitlines()[3:7] == [
        "Requires-Dist: filelock",
        "Requires-Dist: nvidia-nccl-cu13==2.30.7",
        "Requires-Dist: b==1",
        'Requires-Dist: pyyaml; extra == "yaml"',
    ]
    assert new.endswith("\n\nDescription body\nRequires-Dist: not-a-header\n")


def test_add_requirements_keeps_a_licence_with_form_feeds_one_field() -> None:
    """A licence text folded by setuptools keeps its form feeds and whitespace-only lines: the
    rewritten METADATA reads, as pip reads it, with every requirement a header."""
    text = (
        "Metadata-Version: 2.1\nName: t\nVersion: 1\nLicense: GPL\n        \n"
        "        \x0cEND OF TERMS\nRequires-Dist: filelock\n"
    )
    for body in ("", "\nbody\n"):
        new = parse_core_metadata(add_requirements(text + body, ["b==1"]))
        assert new.get_all("Requires-Dist") == ["filelock", "b==1"]
        assert new.get("License") == "GPL\n        \n        \x0cEND OF TERMS"
        assert new.body == body[1:]


def test_platform_verdict() -> None:
    report = {
        "overall_tag": "linux_x86_64",
        "sym_tag": "manylinux_2_28_x86_64",
        "policy_upgrades": {"manylinux_2_28_x86_64": {"libs_to_eliminate": ["libcudart.so.13"]}},
    }
    assert platform_verdict(report, "manylinux_2_28_x86_64", {"libcudart.so.13"}) == (True, "")
    ok, why = platform_verdict(report, "manylinux_2_28_x86_64", set())
    assert not ok and "libcudart.so.13" in why
    ok, why = platform_verdict(report, "manylinux_2_17_x86_64", {"libcudart.so.13"})
    assert not ok and "glibc 2.28" in why
    assert not platform_verdict(report, "linux_x86_64", set())[0]
    conforming = {"overall_tag": "manylinux_2_34_x86_64", "sym_tag": "manylinux_2_34_x86_64",
                  "policy_upgrades": {}}  # fmt: skip
    assert platform_verdict(conforming, "manylinux_2_36_x86_64", set()) == (True, "")
    assert not platform_verdict(conforming, "manylinux_2_28_x86_64", set())[0]
    assert not platform_verdict(report, "manylinux_2_28_aarch64", set())[0]


RECIPE = {
    "schema_version": 1,
    "recipe": {"kind": "pytorch", "version": "2.14.1"},
    "source": {"path": "."},
    "toolchain": {"cuda": "13.0", "base_image": "archwheel/debian:bookworm", "source": "pypi"},
    "arch": {"default": "9.0"},
    "build": {"command": "true"},
}


def test_spec_from_the_official_pin_table(tmp_path: Path) -> None:
    recipe = parse_recipe(
        {**RECIPE, "repair": {"pins": "official"}}, origin=tmp_path / "r.toml", facts=FACTS
    )
    s = spec_for_recipe(recipe)
    assert s is not None
    assert s.pins == "2.14.1/cu130"
    assert s.platform == "manylinux_2_28_x86_64"
    assert s.bundle == ("libgomp.so.1",)
    assert "libcuda.so.1" in s.provided
    assert any(r.startswith("nvidia-cudnn-cu13==") for r in s.requirements)
    assert s.describe() == (
        "pin table 2.14.1/cu130; RPATH nvidia/cudnn/lib:nvidia/nvshmem/lib:nvidia/nccl/lib:"
        "nvidia/cusparselt/lib:nvidia/cu13/lib + $ORIGIN; bundle libgomp.so.1 into torch/lib; "
        f"{len(s.requirements)} Requires-Dist pins; tag manylinux_2_28_x86_64 if auditwheel agrees"
    )
    plain = parse_recipe(RECIPE, origin=tmp_path / "r.toml", facts=FACTS)
    assert spec_for_recipe(plain) is None


def test_missing_pin_table_is_refused(tmp_path: Path) -> None:
    data = {
        **RECIPE,
        "recipe": {"kind": "pytorch", "version": "2.15.0"},
        "repair": {"pins": "official"},
    }
    recipe = parse_recipe(data, origin=tmp_path / "r.toml", facts=FACTS)
    with pytest.raises(
        RecipeError,
        match=r"no pin table for PyTorch 2.15.0 with CUDA 13.0 .*known: 2.13.0/cu130, 2.14.1/cu128, 2.14.1/cu130",
    ):
        spec_for_recipe(recipe)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"pins": "latest"}, "is not a pin table"),
        ({"rpath_folders": ["/usr/local/cuda/lib64"]}, "relative to site-packages"),
        ({"library_folder": "../x"}, "a folder inside the wheel"),
        ({"requirements": ["not a requirement ("]}, "requirements"),
        ({"bundel": []}, "bundel: unknown key"),
        ({"bundle": ["../../etc/passwd"]}, "not a library file name"),
        ({"provided": ["libcudart"]}, "not a library file name"),
        ({"platform": "linux_x86_64"}, "not a manylinux tag"),
    ],
)
def test_bad_repair_tables(tmp_path: Path, table: dict[str, object], message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        parse_recipe({**RECIPE, "repair": table}, origin=tmp_path / "r.toml", facts=FACTS)


def test_bundle_without_library_folder(tmp_path: Path) -> None:
    recipe = parse_recipe(
        {**RECIPE, "repair": {"bundle": ["libgomp.so.1"]}}, origin=tmp_path / "r.toml", facts=FACTS
    )
    with pytest.raises(RecipeError, match="bundle needs library_folder"):
        spec_for_recipe(recipe)


def test_a_hostile_wheel_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    evil = tmp_path / "evil-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("evil-1.0.dist-info/METADATA", "Name: evil\n")
        zf.writestr("../outside.so", b"\x7fELF")
    out = tmp_path / "out"
    with pytest.raises(RepairError, match="unsafe member name"):
        repair_wheel(evil, out, RepairSpec("t"))
    assert list(out.iterdir()) == []
    assert not (tmp_path / "outside.so").exists()
    not_a_wheel = tmp_path / "x-1.0-py3-none-linux_x86_64.whl"
    not_a_wheel.write_bytes(b"not a zip")
    with pytest.raises(RepairError, match="not a readable wheel"):
        repair_wheel(not_a_wheel, out, RepairSpec("t"))
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    ("members", "words"),
    [
        (("evil/x", "evil/x/y.so"), "cannot unpack member 'evil/x/y.so': File exists"),
        (("evil/x/y.so", "evil/x"), "cannot unpack member 'evil/x': Is a directory"),
        ((f"evil/{'n' * 300}.so",), "File name too long"),
    ],
)
def test_members_the_file_system_cannot_hold_are_the_wheel_s_error(
    tmp_path: Path, members: tuple[str, ...], words: str
) -> None:
    """The wheel repaired is what the build left (an sdist's setup.py wrote it): members that
    conflict or that no file system holds were an OSError that named a staging path, not the
    wheel; now a RepairError naming the member, and the staging folder is removed."""
    wheel = tmp_path / "evil-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("evil-1.0.dist-info/METADATA", "Name: evil\n")
        for member in members:
            zf.writestr(member, b"data")
    out = tmp_path / "out"
    with pytest.raises(RepairError) as caught:
        repair_wheel(wheel, out, RepairSpec("t"))
    assert words in str(caught.value)
    assert wheel.name in str(caught.value)
    assert list(out.iterdir()) == []


def test_an_extension_of_torch_takes_torch_folders_and_pin(tmp_path: Path) -> None:
    data = {
        **RECIPE,
        "recipe": {"kind": "extension", "version": "0.1"},
        "build": {"command": "true", "requirements": ["torch==2.14.1"]},
        "repair": {"pins": "official"},
    }
    s = spec_for_recipe(parse_recipe(data, origin=tmp_path / "r.toml", facts=FACTS))
    assert s is not None
    assert s.requirements == ("torch==2.14.1",)
    assert s.rpath_folders[0] == "torch/lib" and "nvidia/cu13/lib" in s.rpath_folders
    assert s.rpath_base is None and s.bundle == ()
    assert {"libtorch.so", "libc10.so", "libcudart.so.13", "libcuda.so.1"} <= s.provided
    assert rpath_for("myext/_C.so", s).startswith("$ORIGIN/../torch/lib:$ORIGIN/../nvidia/")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # an extension whose torch pin has no table (torch 2.9.0 with CUDA 13.0)
        ("[repair]\n", '[repair]\npins = "official"\n', "no pin table for PyTorch (no torch pin)"),
        ("requirements = []", 'requirements = ["torch==2.9.0"]', "no pin table for PyTorch 2.9.0"),
    ],
)
def test_the_build_command_refuses_a_missing_pin_table_before_anything(
    tmp_path: Path, cli_run: CliRun, old: str, new: str, message: str
) -> None:
    from tests.support.paths import ROOT

    text = (ROOT / "recipes" / "example.toml").read_text()
    text = text.replace("../examples/", str(ROOT / "examples") + "/")
    text = text.replace(old, new, 1)
    if "torch==" in new:
        text = text.replace("[repair]\n", '[repair]\npins = "official"\n', 1)
    path = tmp_path / "r.toml"
    path.write_text(text)
    out = tmp_path / "dist"
    code, _out, err = cli_run("build", "--recipe", str(path), "--out", str(out),
                              "--no-host-pip-config")  # fmt: skip
    errors = [ln for ln in err.splitlines() if ln.startswith("archwheel: error")]
    assert code == 2 and len(errors) == 1, err
    assert message in " ".join(err.split())
    assert not out.exists()
