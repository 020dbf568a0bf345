"""``archwheel publish --variants``: real wheels (synthetic fatbins) published as variants, then
installed by the real uv 0.13.9 (wheel-variants preview, detection forced) and by pip."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from archwheel.matrix.variant_wheel import write_variant_wheel
from tests.support.cli import CliRun
from tests.support.index_wheels import device_library, fresh_venv, make_dist, pip_from_index
from tests.support.variant_wheels import (
    TAGS,
    arch_wheels,
    installed_libraries,
    uv_variant_install,
)


def _publish(cli_run: CliRun, index: Path, wheels: list[Path], *extra: str) -> tuple[int, str, str]:
    args = ["publish", *map(str, wheels), "--index", str(index), "--cuda", "13.0", "--variants"]
    return cli_run(*args, *extra)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[int, Path], Path]:
    return arch_wheels(tmp_path_factory.mktemp("wheels"), device_library)


@pytest.fixture
def published(cli_run: CliRun, tmp_path: Path, built: tuple[dict[int, Path], Path]) -> Path:
    per_arch, default = built
    index = tmp_path / "index"
    code, _out, err = _publish(cli_run, index, list(per_arch.values()), "--default", str(default))
    assert code == 0, err
    return index / "current"


def test_each_wheel_gets_its_label_variant_json_and_record(published: Path) -> None:
    wheels = published / "wheels"
    stem = f"vext-1.0-{TAGS['python_tag']}-{TAGS['abi_tag']}-{TAGS['platform_tag']}"
    for label in ("sm80", "sm90", "sm120"):
        with zipfile.ZipFile(wheels / f"{stem}-{label}.whl") as zf:
            variant = zf.read("vext-1.0.dist-info/variant.json")
            record = zf.read("vext-1.0.dist-info/RECORD").decode()
        assert list(json.loads(variant)["variants"]) == [label]
        digest = base64.urlsafe_b64encode(hashlib.sha256(variant).digest()).rstrip(b"=").decode()
        assert f"vext-1.0.dist-info/variant.json,sha256={digest},{len(variant)}" in record
    index_doc = json.loads((wheels / "vext-1.0-variants.json").read_text())
    assert sorted(index_doc["variants"]) == ["sm120", "sm80", "sm90"]
    assert index_doc["variants"]["sm90"]["nvidia"] == {
        "cuda_version_lower_bound": ["13.0"],
        "sm_arch": ["90_real"],
    }
    assert "vext-1.0-variants.json" in (published / "simple" / "vext" / "index.html").read_text()
    assert (wheels / f"{stem}.whl").is_file()  # the default, plain
    assert (published / "variant-sm80.html").is_file()


def test_variant_wheel_bytes_are_deterministic(tmp_path: Path) -> None:
    wheel = make_dist(tmp_path / "w", "vext", "1.0", libraries={"_k.so": device_library(80)})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write_variant_wheel(wheel, "sm80", b"{}\n", tmp_path / "a")
    b = write_variant_wheel(wheel, "sm80", b"{}\n", tmp_path / "b")
    assert a.name == "vext-1.0-py3-none-any-sm80.whl"
    assert a.read_bytes() == b.read_bytes()


def test_adding_an_arch_leaves_published_wheels_untouched(
    cli_run: CliRun, tmp_path: Path, built: tuple[dict[int, Path], Path]
) -> None:
    per_arch, _ = built
    index = tmp_path / "index"
    assert _publish(cli_run, index, [per_arch[80], per_arch[90]])[0] == 0
    first = index / "current" / "wheels"
    before = {p.name: p.stat().st_ino for p in first.glob("*.whl")}
    code, _, err = _publish(cli_run, index, [per_arch[120]])
    assert code == 0, err
    after = index / "current" / "wheels"
    assert {n: (after / n).stat().st_ino for n in before} == before  # hard links: same files
    labels = json.loads((after / "vext-1.0-variants.json").read_text())["variants"]
    assert sorted(labels) == ["sm120", "sm80", "sm90"]


def test_refusals_are_one_line(cli_run: CliRun, tmp_path: Path) -> None:
    plain = make_dist(tmp_path / "p", "vext", "1.0")
    code, out, _ = _publish(cli_run, tmp_path / "i1", [plain])
    assert code == 1
    assert "not a variant: no library has device code" in out
    a = make_dist(tmp_path / "a", "vext", "1.0", libraries={"_k.so": device_library(80)})
    b = make_dist(tmp_path / "b", "vext", "1.0", libraries={"_j.so": device_library(80)})
    code, out, _ = _publish(cli_run, tmp_path / "i2", [a, b])
    assert code == 1
    assert "the same variant properties (sm80)" in out


def test_default_needs_variants(cli_run: CliRun, tmp_path: Path) -> None:
    wheel = make_dist(tmp_path / "a", "vext", "1.0")
    code, _, err = cli_run("publish", str(wheel), "--index", str(tmp_path / "i"),
                           "--default", str(wheel))  # fmt: skip
    assert code == 2
    assert "--default applies to --variants" in err


@pytest.mark.parametrize(
    ("sm", "driver", "library"),
    [
        ("8.6", "13.0", "_k80.so"),  # sm_80 SASS runs on 8.6
        ("9.0", "13.0", "_k90.so"),
        ("12.0", "13.0", "_k120.so"),
        ("7.5", "13.0", "_kall.so"),  # no variant fits: the default wheel
        ("9.0", "12.8", "_kall.so"),  # the driver is older than the lower bound
    ],
)
def test_uv_installs_the_variant_that_runs(
    published: Path, tmp_path: Path, sm: str, driver: str, library: str
) -> None:
    index_url = (published / "simple").as_uri()
    proc, libraries = uv_variant_install(tmp_path / "v", ["--index-url", index_url], sm, driver)
    assert proc.returncode == 0, proc.stderr
    assert libraries == [library]


def test_uv_without_default_names_why_nothing_fits(
    cli_run: CliRun, tmp_path: Path, built: tuple[dict[int, Path], Path]
) -> None:
    per_arch, _ = built
    index = tmp_path / "index"
    assert _publish(cli_run, index, list(per_arch.values()))[0] == 0
    index_url = (index / "current" / "simple").as_uri()
    for sm, driver in (("7.5", "13.0"), ("9.0", "12.8")):
        proc, libraries = uv_variant_install(tmp_path / f"v{sm}-{driver}",
                                             ["--index-url", index_url], sm, driver)  # fmt: skip
        assert proc.returncode != 0
        assert libraries == []
        assert "variant" in proc.stderr


def test_pip_gets_the_default_and_a_per_arch_page(published: Path, tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "p1")
    proc = pip_from_index(python, (published / "simple").as_uri() + "/", "vext")
    assert proc.returncode == 0, proc.stderr
    assert installed_libraries(tmp_path / "p1") == ["_kall.so"]
    python = fresh_venv(tmp_path / "p2")
    page = (published / "variant-sm90.html").as_uri()
    proc = pip_from_index(python, page, "--no-index", "--find-links", page, "vext")
    assert proc.returncode == 0, proc.stderr
    assert installed_libraries(tmp_path / "p2") == ["_k90.so"]


def _provenance_beside(wheel: Path, cuda: str | None, requested: str) -> Path:
    """The provenance archwheel's build writes beside ``wheel`` (its real document shape), with
    the toolkit it compiled with (None: a toolchain that names none)."""
    from archwheel.wheelbuild.run.provenance import (
        ImageRecord,
        provenance_document,
        provenance_path,
    )

    toolchain = {"nvcc": "13.0.88", "cuda": cuda or "", "cuda_home": "/usr/local/cuda"}
    document = provenance_document(
        wheel_name=wheel.name, wheel_sha256="0" * 64, wheel_size=wheel.stat().st_size,
        recipe={"name": "vext"}, source={"kind": "path"},
        images=ImageRecord("archwheel/debian:bookworm", "sha256:1", "builder", "sha256:2"),
        toolchain=toolchain, arch={"requested": requested}, python="3.11", environment={},
        command="pip wheel .", source_date_epoch=0, engine={}, jobs={},
        network_during_compile=False, timings={}, compiler_cache={}, audit={"ok": True},
        reproducibility=None, smoke_snippet=None, started_at="2025-01-01T00:00:00Z",
    )  # fmt: skip
    path = provenance_path(wheel)
    path.write_text(json.dumps(document))
    return path


def test_archwheels_own_wheel_needs_no_cuda_flag(cli_run: CliRun, tmp_path: Path) -> None:
    # A wheel archwheel built: the toolkit and the arch list come from the provenance beside it.
    wheel = make_dist(tmp_path / "w", "vext", "1.0", libraries={"_k.so": device_library(90)})
    _provenance_beside(wheel, "13.0", "9.0")
    index = tmp_path / "index"
    code, out, err = cli_run("publish", str(wheel), "--index", str(index), "--variants")
    assert code == 0, out + err
    document = json.loads((index / "current" / "wheels" / "vext-1.0-variants.json").read_text())
    assert document["variants"]["sm90"]["nvidia"]["cuda_version_lower_bound"] == ["13.0"]
    assert (index / "current" / "wheels" / "sm90" / (wheel.name + ".provenance.json")).is_file()


@pytest.mark.parametrize("with_provenance", [False, True])
def test_a_wheel_without_a_known_cuda_says_where_it_looked(
    cli_run: CliRun, tmp_path: Path, with_provenance: bool
) -> None:
    wheel = make_dist(tmp_path / "w", "vext", "1.0", libraries={"_k.so": device_library(90)})
    if with_provenance:
        _provenance_beside(wheel, None, "9.0")
    code, out, _ = cli_run("publish", str(wheel), "--index", str(tmp_path / "i"), "--variants",
                           "--format", "json")  # fmt: skip
    assert code == 1
    (refusal,) = json.loads(out)["refused"]
    where = "its provenance names no toolkit" if with_provenance else "no provenance beside it"
    assert refusal["reason"].endswith(
        f"{where}, no CUDA runtime in its METADATA: give it --cuda X.Y"
    )
