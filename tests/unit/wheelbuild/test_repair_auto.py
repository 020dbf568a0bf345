"""``[repair] platform = "auto"``: the oldest manylinux tag auditwheel accepts for what was built.

On the real wheels of ``tests/support/repair_wheels.py`` (compiled here) with the real
``auditwheel``: the tag ``auto`` picks is accepted when asked for by name, and the next older
policy auditwheel knows is refused by name, so it is the oldest one; a library nobody provides
leaves no tag to pick. ``best_platform`` alone is checked on the report shapes auditwheel gives
for archwheel's example built on Debian bookworm and on trixie.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from archwheel.facts.catalog import load_facts
from archwheel.wheelbuild.recipes.recipe import parse_recipe
from archwheel.wheelbuild.wheel.repair import RepairError, RepairSpec, repair_wheel, spec_for_recipe
from archwheel.wheelbuild.wheel.repair_tag import best_platform, manylinux_glibc
from tests.support.index_wheels import make_dist
from tests.support.repair_wheels import DemoWheels, build_demo_wheels

FACTS = load_facts()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoWheels:
    return build_demo_wheels(tmp_path_factory.mktemp("repair-auto-wheels"))


def spec(**changes: object) -> RepairSpec:
    values: dict[str, object] = {
        "origin": "test: [repair]",
        "rpath_folders": ("nvidia/fake/lib",),
        "library_folder": "demo/lib",
        "bundle": ("libgomp.so.1",),
        "requirements": ("nvidia-fake-cu13==1.0",),
        "provided": frozenset({"libprovider.so.1"}),
    }
    values.update(changes)
    return RepairSpec(**values)  # type: ignore[arg-type]


def auditwheel_policies() -> list[str]:
    """The x86_64 manylinux tags the installed auditwheel knows, oldest first."""
    text = resources.files("auditwheel").joinpath("policy/manylinux-policy.json").read_text()
    names = [p["name"] for p in json.loads(text) if p["name"].startswith("manylinux_")]
    return sorted((f"{n}_x86_64" for n in names), key=lambda t: manylinux_glibc(t) or (0, 0, ""))


@pytest.mark.slow
def test_auto_is_the_oldest_tag_auditwheel_accepts(demo: DemoWheels, tmp_path: Path) -> None:
    report = repair_wheel(
        demo.demo, tmp_path / "auto", spec(platform="auto"), library_dirs=[demo.libgomp_dir]
    )
    chosen = report.platform
    assert report.wheel.name.endswith(f"-{chosen}.whl")
    policies = auditwheel_policies()
    assert chosen in policies
    # asked for by name, the same tag is accepted ...
    named = repair_wheel(
        demo.demo, tmp_path / "named", spec(platform=chosen), library_dirs=[demo.libgomp_dir]
    )
    assert named.wheel.name == report.wheel.name
    # ... and the policy just older than it is refused
    older = policies[policies.index(chosen) - 1]
    with pytest.raises(RepairError, match=f"does not agree .* conforms to {older}"):
        repair_wheel(
            demo.demo, tmp_path / "older", spec(platform=older), library_dirs=[demo.libgomp_dir]
        )


@pytest.mark.slow
def test_auto_with_a_library_nobody_provides_places_nothing(
    demo: DemoWheels, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with pytest.raises(
        RepairError,
        match=r'platform = "auto": auditwheel accepts no manylinux tag for demo-1\.0-.*: '
        r"not even manylinux_2_\d+_x86_64: libprovider\.so\.1 would have to be bundled",
    ):
        repair_wheel(
            demo.demo, out, spec(platform="auto", provided=frozenset()),
            library_dirs=[demo.libgomp_dir],
        )  # fmt: skip
    assert list(out.iterdir()) == []


def test_auto_leaves_a_wheel_without_native_code_as_built(tmp_path: Path) -> None:
    """Nothing for auditwheel to judge (it refuses such a wheel): the built tag stays."""
    wheel = make_dist(tmp_path / "built", "pure", "1.0")
    report = repair_wheel(
        wheel, tmp_path / "out", spec(platform="auto", bundle=(), library_folder=None)
    )
    assert report.platform == "any"
    assert report.wheel.name == "pure-1.0-py3-none-any.whl"
    assert dict(report.auditwheel) == {}


# auditwheel 6.8's answers for archwheel's example (`auditwheel show --json`), built on each base
BOOKWORM = {"overall_tag": "manylinux_2_34_x86_64", "sym_tag": "manylinux_2_34_x86_64",
            "policy_upgrades": {}}  # fmt: skip
TRIXIE = {"overall_tag": "manylinux_2_39_x86_64", "sym_tag": "manylinux_2_39_x86_64",
          "policy_upgrades": {}}  # fmt: skip
# a torch extension: libc10.so is not in any policy, but the torch requirement provides it
EXTENSION = {
    "overall_tag": "linux_x86_64",
    "sym_tag": "manylinux_2_28_x86_64",
    "policy_upgrades": {
        f"manylinux_2_{n}_x86_64": {"libs_to_eliminate": ["libc10.so"]} for n in (17, 28, 34)
    },
}


@pytest.mark.parametrize(
    ("report", "provided", "expected"),
    [
        (BOOKWORM, set(), "manylinux_2_34_x86_64"),
        (TRIXIE, set(), "manylinux_2_39_x86_64"),
        (EXTENSION, {"libc10.so"}, "manylinux_2_28_x86_64"),  # 2_17: symbols too new
    ],
)
def test_best_platform_follows_what_was_built(
    report: dict[str, object], provided: set[str], expected: str
) -> None:
    assert best_platform(report, provided) == (expected, "")


@pytest.mark.parametrize(
    ("report", "why"),
    [
        (EXTENSION, "not even manylinux_2_34_x86_64: libc10.so would have to be bundled or "
                    "provided by a declared requirement"),
        ({"overall_tag": "linux_x86_64", "sym_tag": "linux_x86_64", "policy_upgrades": {}},
         "auditwheel names no manylinux tag for it (overall: linux_x86_64, symbols: linux_x86_64)"),
    ],
)  # fmt: skip
def test_best_platform_says_why_there_is_none(report: dict[str, object], why: str) -> None:
    assert best_platform(report, set()) == (None, why)


def test_a_recipe_may_ask_for_auto(tmp_path: Path) -> None:
    recipe = parse_recipe(
        {
            "schema_version": 1,
            "recipe": {"kind": "extension", "name": "x", "version": "1.0"},
            "source": {"path": "."},
            "toolchain": {"cuda": "13.0", "base_image": "archwheel/debian:bookworm",
                          "source": "pypi"},
            "arch": {"variable": "X", "format": "gencode", "default": "9.0"},
            "build": {"command": "true"},
            "repair": {"platform": "auto"},
        },
        origin=tmp_path / "r.toml",
        facts=FACTS,
    )  # fmt: skip
    repair = spec_for_recipe(recipe)
    assert repair is not None and repair.platform == "auto"
    assert "tag: the oldest manylinux tag auditwheel accepts" in repair.describe()
