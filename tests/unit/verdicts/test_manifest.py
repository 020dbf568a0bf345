"""archwheel manifest / verify: the round trip catches tampered files and mismatched environments.

Toy wheels (a CUDA extension with a real ELF + fatbin library, and the nvidia-* runtime package
it pins) are built here, installed by pip into a real virtual environment, then changed the way
deployments drift: a byte flipped in a wheel, another runtime version installed, a library
replaced on disk.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archwheel.errors import InputError
from archwheel.verdicts.manifest import (
    InstalledEnvironment,
    load_manifest,
    verify_environment,
)
from tests.support.builders import Entry, container, elf64, write_zip
from tests.support.cli import CliRun
from tests.support.inventory_builders import build_wheel, record_hash
from tests.support.schemas import manifest_schema
from tests.support.venvs import installed_version, make_venv, pip_install

LIBTOY = elf64(
    [
        (".text", b"\x90" * 64),
        (".nv_fatbin", container(Entry(sm=80), Entry(kind=1, sm=90, version=(9, 0)))),
    ]
)


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    """toyext 1.0+cu128 (pins nvidia-toyrt-cu12==1.2.3) and two versions of that runtime."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    build_wheel(
        folder,
        "toyext",
        "1.0+cu128",
        {"toyext/__init__.py": b"", "toyext/libtoy.so": LIBTOY},
        requires=[
            "nvidia-toyrt-cu12==1.2.3",
            'nvidia-onlywin-cu12==1.0; platform_system == "Windows"',
        ],
    )
    for version in ("1.2.3", "1.2.4"):
        build_wheel(
            folder,
            "nvidia-toyrt-cu12",
            version,
            {"nvidia/toyrt/lib/libtoyrt.so.12": f"runtime {version}".encode()},
        )
    return folder


def _toyext(folder: Path) -> Path:
    return next(folder.glob("toyext-*.whl"))


def test_manifest_records_what_the_wheel_is(wheels: Path, cli_run: CliRun, tmp_path: Path) -> None:
    out = tmp_path / "manifest.json"
    code, stdout, _ = cli_run("manifest", str(_toyext(wheels)), "-o", str(out))
    assert code == 0
    assert stdout.startswith(f"wrote {out}")
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, manifest_schema())
    (wheel,) = doc["wheels"]
    assert wheel["file"] == "toyext-1.0+cu128-py3-none-any.whl"
    assert wheel["name"] == "toyext"
    assert wheel["version"] == "1.0+cu128"
    assert wheel["cuda"]["version"] == "12.8"
    assert wheel["requires_cuda"]["nvidia-toyrt-cu12"] == {"specifier": "==1.2.3", "marker": None}
    assert wheel["native_libraries"] == {"toyext/libtoy.so": record_hash(LIBTOY)}
    assert wheel["archs"]["sass"] == ["sm_80"]
    assert wheel["archs"]["ptx"] == ["compute_90"]
    assert wheel["archs"]["libraries"] == [
        {"path": "toyext/libtoy.so", "sass": ["sm_80"], "ptx": ["compute_90"]}
    ]
    assert wheel["size"] == _toyext(wheels).stat().st_size


def test_round_trip_detects_a_tampered_file(wheels: Path, cli_run: CliRun) -> None:
    manifest = wheels / "manifest.json"
    assert cli_run("manifest", str(_toyext(wheels)), "-o", str(manifest))[0] == 0
    code, out, _ = cli_run("verify", str(manifest))
    assert code == 0
    assert out.startswith("OK: 1 file(s) match")

    wheel = _toyext(wheels)
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different bytes
    wheel.write_bytes(bytes(data))
    code, out, _ = cli_run("verify", str(manifest), "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert [m["what"] for m in doc["mismatches"]] == ["sha256"]
    assert "the file was changed or replaced" in doc["mismatches"][0]["message"]

    wheel.write_bytes(bytes(data[:-10]))
    code, out, _ = cli_run("verify", str(manifest), "--format", "json")
    assert code == 1
    assert [m["what"] for m in json.loads(out)["mismatches"]] == ["size", "sha256"]

    wheel.unlink()
    code, out, _ = cli_run("verify", str(manifest))
    assert code == 1
    assert "toyext-1.0+cu128-py3-none-any.whl: not found" in out


def test_verify_lists_files_not_in_the_manifest(wheels: Path, cli_run: CliRun) -> None:
    manifest = wheels / "manifest.json"
    cli_run("manifest", str(_toyext(wheels)), "-o", str(manifest))
    other = next(wheels.glob("nvidia_toyrt_cu12-1.2.3-*.whl"))
    code, out, _ = cli_run("verify", str(manifest), str(_toyext(wheels)), str(other))
    assert code == 1
    assert f"{other.name}: given but not in the manifest" in out


@pytest.mark.slow
def test_environment_matches_then_each_drift_is_listed(
    wheels: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    manifest = tmp_path / "manifest.json"
    cli_run("manifest", str(_toyext(wheels)), "-o", str(manifest))
    python = make_venv(tmp_path / "venv")
    pip_install(python, "--no-index", "--find-links", str(wheels), "toyext", offline=True)
    assert installed_version(python, "nvidia-toyrt-cu12") == "1.2.3"

    code, out, _ = cli_run("verify", str(manifest), "--env", "--python", str(python))
    assert code == 0, out
    assert "match" in out

    # Drift 1: another runtime version. Drift 2: a library replaced on disk.
    pip_install(
        python, "--no-index", "--find-links", str(wheels), "nvidia-toyrt-cu12==1.2.4", offline=True
    )
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    (site / "toyext" / "libtoy.so").write_bytes(LIBTOY + b"patched")
    code, out, _ = cli_run(
        "verify", str(manifest), "--env", "--python", str(python), "--format", "json"
    )
    assert code == 1
    doc = json.loads(out)
    assert doc["environment"] == str(python)
    assert [(m["what"], m["expected"], m["found"]) for m in doc["mismatches"]] == [
        ("requirement", "nvidia-toyrt-cu12==1.2.3", "1.2.4"),
        ("library", record_hash(LIBTOY), record_hash(LIBTOY + b"patched")),
    ]
    # The Windows-only pin does not apply on Linux and is not reported.
    assert all("onlywin" not in m["message"] for m in doc["mismatches"])


@pytest.mark.slow
def test_environment_without_the_package(
    wheels: Path, cli_run: CliRun, tmp_path: Path, bare_venv: Path
) -> None:
    manifest = tmp_path / "manifest.json"
    cli_run("manifest", str(_toyext(wheels)), "-o", str(manifest))
    code, out, _ = cli_run("verify", str(manifest), "--env", "--python", str(bare_venv))
    assert code == 1
    assert f"toyext 1.0+cu128 is not installed in {bare_venv}" in " ".join(out.split())


def test_environment_checks_torch_cuda() -> None:
    manifest = {
        "wheels": [
            {
                "name": "torch",
                "version": "2.7.0+cu128",
                "cuda": {"version": "12.8"},
                "requires_cuda": {},
                "native_libraries": {},
            }
        ]
    }
    env = InstalledEnvironment(
        python="/venv/bin/python",
        python_version="3.11.7",
        distributions={"torch": "2.7.0+cu126"},
        native_files={},
        torch_cuda="12.6",
        torch_import_error=None,
    )
    found = verify_environment(manifest, env)
    assert [(m.what, m.expected, m.found) for m in found] == [
        ("version", "2.7.0+cu128", "2.7.0+cu126"),
        ("cuda", "12.8", "12.6"),
    ]


# -- bad manifests ------------------------------------------------------------------------------

_GOOD: dict[str, Any] = {
    "schema_version": 1,
    "kind": "archwheel-manifest",
    "wheels": [
        {
            "file": "a-1-py3-none-any.whl",
            "sha256": "0" * 64,
            "size": 1,
            "name": "a",
            "version": "1",
            "cuda": {},
            "requires_cuda": {},
            "native_libraries": {},
        }
    ],
}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(kind="other"), "not an archwheel manifest"),
        (lambda d: d.update(schema_version=2), "schema_version 2 is not 1"),
        (lambda d: d.update(wheels=[]), "'wheels' must be a non-empty list"),
        (lambda d: d["wheels"][0].update(file="../../etc/passwd"), "must be a bare file name"),
        (lambda d: d["wheels"][0].update(sha256="xyz"), "not a hex sha256"),
        (lambda d: d["wheels"][0].update(sha256="a" * 64 + "\n"), "not a hex sha256"),
        (lambda d: d["wheels"][0].update(size="1"), "size: missing or not a int"),
        (lambda d: d["wheels"][0].update(native_libraries={"x.so": "md5=1"}), "not a sha256= hash"),
    ],
)
def test_bad_manifests_are_refused(mutate: Any, message: str) -> None:
    doc = json.loads(json.dumps(_GOOD))
    load_manifest(json.dumps(doc), "m.json")  # the good one loads
    mutate(doc)
    with pytest.raises(InputError, match=r"^m\.json") as info:
        load_manifest(json.dumps(doc), "m.json")
    assert message in info.value.one_line()


def test_unreadable_manifest_exits_3(tmp_path: Path, cli_run: CliRun) -> None:
    path = tmp_path / "m.json"
    path.write_text("{not json")
    code, _, err = cli_run("verify", str(path))
    assert code == 3
    assert err.startswith(f"archwheel: error: {path}: not JSON")


def test_verify_lists_at_most_the_bounded_mismatches(
    wheels: Path, cli_run: CliRun, tmp_path: Path
) -> None:
    """A manifest naming many missing wheels: text and Markdown list MAX_MISMATCH_ROWS of them
    and a line for the rest; JSON lists every one."""
    from archwheel.interfaces.render.manifest import MAX_MISMATCH_ROWS

    manifest = tmp_path / "manifest.json"
    assert cli_run("manifest", str(_toyext(wheels)), "-o", str(manifest))[0] == 0
    doc = json.loads(manifest.read_text())
    (entry,) = doc["wheels"]
    count = MAX_MISMATCH_ROWS + 7
    doc["wheels"] = [{**entry, "file": f"gone{i:04d}-1.0-py3-none-any.whl"} for i in range(count)]
    manifest.write_text(json.dumps(doc))
    code, out, _ = cli_run("verify", str(manifest))
    assert code == 1
    listed = [line for line in out.splitlines() if ": not found" in line]
    assert len(listed) == MAX_MISMATCH_ROWS
    assert f"... and 7 more mismatches (at most {MAX_MISMATCH_ROWS} shown" in out
    code, out, _ = cli_run("verify", str(manifest), "--format", "markdown")
    assert code == 1
    assert len([line for line in out.splitlines() if ": not found" in line]) == MAX_MISMATCH_ROWS
    assert "and 7 more mismatches" in out
    code, out, _ = cli_run("verify", str(manifest), "--format", "json")
    assert len(json.loads(out)["mismatches"]) == count


def _members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def _manifest_entry(wheel: Path, tmp_path: Path, cli_run: CliRun) -> tuple[dict[str, Any], str]:
    """The one wheel's manifest entry, as `archwheel manifest -o` writes it, and stderr."""
    out = tmp_path / "manifest.json"
    code, _, err = cli_run("manifest", str(wheel), "-o", str(out))
    assert code == 0
    (entry,) = json.loads(out.read_text())["wheels"]
    return entry, err


def test_record_rows_of_libraries_the_wheel_does_not_hold_are_not_recorded(
    tmp_path: Path, cli_run: CliRun
) -> None:
    """A RECORD naming libraries the wheel does not hold (230000 such rows once made an 18 MB
    manifest that verify refused), and a library RECORD does not name: the manifest records
    the libraries held, with their bytes' hashes, and warns about both."""
    wheel = build_wheel(
        tmp_path, "odd", "1.0", {"odd/libheld.so": LIBTOY, "odd/libunlisted.so": LIBTOY}
    )
    members = _members(wheel)
    record_name = "odd-1.0.dist-info/RECORD"
    rows = [r for r in members[record_name].decode().splitlines() if "libunlisted" not in r]
    rows += [f"odd/libghost{i}.so,{record_hash(b'x')},1" for i in range(3)]
    members[record_name] = ("\n".join(rows) + "\n").encode()
    write_zip(wheel, list(members.items()))
    entry, err = _manifest_entry(wheel, tmp_path, cli_run)
    assert entry["native_libraries"] == {
        "odd/libheld.so": record_hash(LIBTOY),
        "odd/libunlisted.so": record_hash(LIBTOY),
    }
    assert "RECORD lists 3 native libraries the wheel does not hold" in err
    assert "1 native libraries have no sha256 in RECORD (first: odd/libunlisted.so)" in err


def test_the_manifest_records_the_bytes_hashes_where_record_lies(
    tmp_path: Path, cli_run: CliRun
) -> None:
    """RECORD is the builder's word: a wheel changed after it was built (or made to deceive)
    can keep its old RECORD, and pip installs it without checking. The manifest records what the
    member's bytes hash to, which is what lands on disk, and says where RECORD disagrees."""
    wheel = build_wheel(
        tmp_path, "liar", "1.0", {"liar/libone.so": LIBTOY, "liar/libtwo.so": LIBTOY}
    )
    members = _members(wheel)
    changed = LIBTOY + b"\0" * 16
    members["liar/libtwo.so"] = changed  # RECORD still has LIBTOY's hash
    write_zip(wheel, list(members.items()))
    assert record_hash(LIBTOY) in members["liar-1.0.dist-info/RECORD"].decode()
    entry, err = _manifest_entry(wheel, tmp_path, cli_run)
    assert entry["native_libraries"] == {
        "liar/libone.so": record_hash(LIBTOY),
        "liar/libtwo.so": record_hash(changed),
    }
    assert "RECORD's sha256 of 1 native libraries is not the hash of their bytes" in err
    assert "(first: liar/libtwo.so;" in err


def test_a_library_that_cannot_be_read_has_no_hash_recorded(
    tmp_path: Path, cli_run: CliRun
) -> None:
    wheel = build_wheel(tmp_path, "bad", "1.0", {"bad/libcrc.so": LIBTOY})
    data = bytearray(wheel.read_bytes())
    for signature, at in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):  # both CRC fields
        start = 0
        while (start := data.find(signature, start)) >= 0:
            name_at = start + (30 if signature == b"PK\x03\x04" else 46)
            if data[name_at : name_at + 13] == b"bad/libcrc.so":
                data[start + at : start + at + 4] = b"\xde\xad\xbe\xef"
            start += 4
    wheel.write_bytes(bytes(data))
    entry, err = _manifest_entry(wheel, tmp_path, cli_run)
    assert entry["native_libraries"] == {}
    assert entry["archs"]["audit_complete"] is False
    assert "bad/libcrc.so: cannot be read (CRC mismatch" in err


def test_a_manifest_verify_could_not_read_is_not_written(
    wheels: Path, cli_run: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from archwheel.inspection import manifests

    monkeypatch.setattr(manifests, "MAX_MANIFEST_BYTES", 600)  # toyext's manifest is larger
    out = tmp_path / "manifest.json"
    code, stdout, err = cli_run("manifest", str(_toyext(wheels)), "-o", str(out))
    assert code == 3
    assert "above the 600 that verify reads; not written" in err
    assert not out.exists()
    code, stdout, err = cli_run("manifest", str(_toyext(wheels)))
    assert code == 3 and stdout == ""
