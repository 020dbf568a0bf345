"""``archwheel build`` end to end against a real Docker engine, on the example recipe.

The builds share one builder image and one compiler-cache volume made for this test session
(removed at the end), so the first build is cold and later ones reuse what they can. One
``archwheel matrix`` run builds the example for Python 3.11 (bookworm) and 3.13 (the trixie base
and its own builder image) into one index, and each published wheel is checked. Every
container archwheel starts here carries a label unique to the test, so the tests can prove that
none was left behind, or that none was created at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from archwheel.binary.scan.inputs import scan_path
from archwheel.facts.arch import CodeKind
from archwheel.matrix.index import read_index
from tests.support.containers_support import containers_created, containers_with_label
from tests.support.paths import ROOT

EXAMPLE = ROOT / "recipes" / "example.toml"
CLI = [sys.executable, "-m", "archwheel.interfaces.cli"]

pytestmark = [pytest.mark.docker, pytest.mark.nvcc, pytest.mark.slow]


@dataclass(frozen=True)
class Session:
    ccache_volume: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def session(docker_engine: str) -> Iterator[Session]:
    volume = f"archwheel-test-ccache-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    made = subprocess.run(
        [*CLI, "base-image"], env=env, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr[-2000:]
    yield Session(volume, env)
    subprocess.run(["docker", "volume", "rm", "--force", volume], capture_output=True, check=False)


def build_cmd(session: Session, out: Path, *args: str) -> list[str]:
    return [*CLI, "build", "--out", str(out), "--ccache-volume", session.ccache_volume, *args]


def run_build(
    session: Session, out: Path, *args: str, label: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(session.env)
    if label:
        env["ARCHWHEEL_RUN_LABEL"] = label
    return subprocess.run(
        build_cmd(session, out, *args),
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def images_in(wheel: Path) -> set[str]:
    inventory = scan_path(wheel)
    assert inventory.complete, [p.one_line() for p in inventory.problems]
    return {
        entry.target.name(entry.kind)
        for library in inventory.libraries
        for entry in library.entries
        if entry.kind in (CodeKind.SASS, CodeKind.PTX)
    }


def wheels_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix == ".whl" or p.name.endswith(".part"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def image_id(reference: str) -> str:
    return subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", reference],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


# -- the example for two arch lists --------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "expected"),
    [("8.0;9.0", {"sm_80", "sm_90"}), ("7.5;8.6+PTX", {"sm_75", "sm_86", "compute_86"})],
)
def test_example_builds_exactly_the_requested_archs(
    session: Session, tmp_path: Path, arch: str, expected: set[str]
) -> None:
    label = f"archwheel.test={uuid.uuid4().hex}"
    out = tmp_path / "dist"
    proc = run_build(
        session, out, "--recipe", "example", "--arch", arch, "--format", "json", label=label
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    wheel = Path(result["wheel"])
    assert wheel.parent == out
    assert wheel.name == "archwheel_example-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
    assert wheels_under(out) == [wheel]  # nothing partial, nothing rejected

    # The audit, run again here independently of the build's gate: exactly what was asked.
    assert images_in(wheel) == expected
    assert result["audit"]["ok"] is True

    provenance = json.loads(Path(result["provenance"]).read_text())
    assert provenance["wheel"] == {
        "file": wheel.name,
        "sha256": sha256(wheel),
        "size": wheel.stat().st_size,
    }
    assert result["sha256"] == sha256(wheel)
    assert provenance["recipe"]["sha256"] == sha256(EXAMPLE)
    assert provenance["recipe"]["name"] == "example"
    assert provenance["arch"]["requested"] == arch
    assert provenance["arch"]["variable"] == "CUDA_GENCODE_FLAGS"
    assert provenance["environment"]["CUDA_GENCODE_FLAGS"] == provenance["arch"]["value"]
    assert provenance["images"]["base"] == "archwheel/debian:bookworm"
    assert provenance["images"]["base_id"] == image_id("archwheel/debian:bookworm")
    assert provenance["images"]["builder_id"] == image_id(provenance["images"]["builder"])
    assert provenance["toolchain"]["nvcc"].startswith("13.0.")
    assert provenance["toolchain"]["source"] == "pypi"
    assert provenance["source"]["kind"] == "path"
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert provenance["source"]["commit"] == head.stdout.strip()
    assert provenance["source_date_epoch"] == int(provenance["environment"]["SOURCE_DATE_EPOCH"])
    assert provenance["network_during_compile"] is False
    assert provenance["compiler_cache"]["volume"] == session.ccache_volume
    assert set(provenance["timings_s"]) >= {"compile", "package", "audit", "total"}
    assert provenance["smoke"]["snippet"].startswith("import")
    assert (out / f"{wheel.name}.smoke.py").read_text().startswith("import")

    # Every zip entry carries SOURCE_DATE_EPOCH; the log was saved.
    stamp = time.gmtime(provenance["source_date_epoch"])[:6]
    with zipfile.ZipFile(wheel) as archive:
        assert {i.date_time for i in archive.infolist()} == {stamp}
    assert list((out / "logs").glob("example-*.log"))
    assert containers_with_label(["docker"], label) == []


# The example for each Python a fleet runs, from ONE matrix (the recipe's python axis 3.11 and
# 3.13) into one index: 3.11 on the recipe's bookworm base (the arch list of the builds above, so
# the compiler cache answers), 3.13 on the trixie base chosen for it (one arch: every compile
# there is cold, with another gcc). Two arch lists on the arch axis, each excluded for the other
# Python, keep the cost at the two builds this took before.
PYTHONS = [
    ("3.11", "8.0;9.0", "archwheel/debian:bookworm", "manylinux_2_34_x86_64"),
    ("3.13", "9.0", "archwheel/debian:trixie", "manylinux_2_39_x86_64"),
]


@dataclass(frozen=True)
class Fleet:
    """The one matrix run: its index, its JSON result and how long it took."""

    index: Path
    cells: dict[str, dict[str, Any]]  # the built cell of each Python
    seconds: float


@pytest.fixture(scope="module")
def fleet(session: Session, tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    base = tmp_path_factory.mktemp("fleet")
    index = base / "index"
    (py_a, arch_a, *_), (py_b, arch_b, *_) = PYTHONS
    argv = [*CLI, "matrix", "--recipe", "example", "--python", py_a, "--python", py_b,
            "--arch", arch_a, "--arch", arch_b,
            "--exclude", f"python={py_a},arch={arch_b}", "--exclude", f"python={py_b},arch={arch_a}",
            "--index", str(index), "--work", str(base / "work"),
            "--ccache-volume", session.ccache_volume, "--format", "json"]  # fmt: skip
    mark = time.monotonic()
    proc = subprocess.run(
        argv, env=session.env, capture_output=True, text=True, timeout=3600, check=False
    )
    seconds = time.monotonic() - mark
    print(f"archwheel matrix (3.11 + 3.13): {seconds:.0f} s, exit {proc.returncode}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    built = [c for c in result["cells"] if c["verdict"] != "excluded"]
    assert {(c["python"], c["arch"]) for c in built} == {(p, a) for p, a, *_ in PYTHONS}
    assert all(c["verdict"] == "published" for c in built), built
    # the plan chose each Python's base, as the build did (provenance, below)
    assert {c["python"]: c["base"] for c in built} == {p: b for p, _, b, _ in PYTHONS}
    return Fleet(index, {c["python"]: c for c in built}, seconds)


def test_one_matrix_publishes_the_example_for_each_python_into_one_index(fleet: Fleet) -> None:
    published = {entry.file: entry for entry in read_index(fleet.index)}
    names = {f"archwheel_example-0.1.0-py3-none-{platform}.whl" for *_, platform in PYTHONS}
    assert set(published) == names
    for python, arch, *_ in PYTHONS:
        (name,) = fleet.cells[python]["wheels"]
        assert published[name].cell_key == fleet.cells[python]["key"]
        assert published[name].expect == arch
        assert published[name].provenance


@pytest.mark.parametrize(("python", "arch", "base", "platform"), PYTHONS)
def test_the_example_for_each_python_is_tagged_checked_and_imports_in_a_fresh_venv(
    session: Session, fleet: Fleet, python: str, arch: str, base: str, platform: str
) -> None:
    """Each wheel of the one matrix, as published: built on the base that has its Python,
    tagged for what was built there (``[repair] platform = "auto"``), audited, can-load checked
    against that Python's torch, and imported in a fresh venv of that Python, where the library
    loads and says why no kernel runs here."""
    (name,) = fleet.cells[python]["wheels"]
    wheels = (fleet.index / "current" / "wheels").resolve()
    wheel = wheels / name
    assert wheel.name == f"archwheel_example-0.1.0-py3-none-{platform}.whl"
    assert json.loads((wheels / f"{name}.audit.json").read_text())["ok"] is True
    assert images_in(wheel) == {f"sm_{a.replace('.', '')}" for a in arch.split(";")}
    provenance = json.loads((wheels / f"{name}.provenance.json").read_text())
    assert provenance["wheel"]["sha256"] == sha256(wheel)
    assert provenance["audit"]["ok"] is True
    assert provenance["arch"]["requested"] == arch
    assert provenance["images"]["base"] == base
    assert provenance["images"]["base_id"] == image_id(base)
    assert provenance["toolchain"]["python"].startswith(python + ".")
    assert provenance["repair"]["platform"] == platform
    assert provenance["repair"]["auditwheel"]["sym_tag"] == platform
    assert provenance["compiler_cache"]["volume"] == session.ccache_volume

    # against the torch of that Python, on a system the wheel's tag admits (this machine's own
    # libstdc++ is older than a trixie build needs: it is not the stand-in)
    checked = subprocess.run(
        [*CLI, "can-load", str(wheel), "--torch", "2.14.1", "--python-version", python,
         "--no-host-libraries", "--format", "json"],
        env=session.env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    verdict = json.loads(checked.stdout)
    assert verdict["verdict"] == "loads"
    assert verdict["python"] == "cp" + python.replace(".", "")

    # A fresh venv of the build's Python, in the image that has it (Debian's own CPython; this
    # machine may have no such interpreter): only the wheel, installed offline from the index.
    probe = (
        "import sys, archwheel_example as ax\n"
        "print('python', '%d.%d' % sys.version_info[:2])\n"
        "try:\n    print('devices', ax.device_count())\n"
        "except ax.CudaError as exc:\n    print('cuda-error', exc.status, exc)\n"
    )
    script = (
        f"python{python} -m venv /tmp/fresh && "
        f"/tmp/fresh/bin/pip install --quiet --no-index --no-deps /wheels/{wheel.name} && "
        'cd /tmp && /tmp/fresh/bin/python -c "$0"'
    )
    imported = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--volume", f"{wheels}:/wheels:ro",
         "--entrypoint", "sh", provenance["images"]["builder"], "-c", script, probe],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr[-2000:]
    lines = imported.stdout.splitlines()
    assert lines[0] == f"python {python}"
    assert lines[1].startswith(("devices", "cuda-error"))


# -- failures before any container -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arch", "7.0;8.0"], "7.0 (Volta) was removed in CUDA 13.0"),
        (["--arch", "12.0;13.5"], "invalid arch '13.5'"),
        (["--python", "3.9"], "does not support Python 3.9"),
    ],
)
def test_bad_requests_fail_before_any_container(
    session: Session, tmp_path: Path, args: list[str], message: str
) -> None:
    label = f"archwheel.test={uuid.uuid4().hex}"
    since = time.time()
    proc = run_build(session, tmp_path / "dist", "--recipe", "example", *args, label=label)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert containers_created(["docker"], label, since) == []
    assert not (tmp_path / "dist").exists()


def test_broken_recipe_fails_before_any_container(session: Session, tmp_path: Path) -> None:
    recipe = tmp_path / "broken.toml"
    text = EXAMPLE.read_text().replace(
        "../examples/cuda-kernels", str(ROOT / "examples" / "cuda-kernels")
    )
    recipe.write_text(text.replace("memory_per_job_gib", "memory_per_jb_gib"))
    label = f"archwheel.test={uuid.uuid4().hex}"
    since = time.time()
    proc = run_build(session, tmp_path / "dist", "--recipe", str(recipe), label=label)
    assert proc.returncode == 2, proc.stderr
    assert f"{recipe}: [build] memory_per_jb_gib: unknown key" in proc.stderr
    assert "did you mean 'memory_per_job_gib'" in proc.stderr
    assert containers_created(["docker"], label, since) == []


# -- the audit gate ----------------------------------------------------------------------------


def test_wheel_missing_a_requested_arch_is_rejected_not_delivered(
    session: Session, tmp_path: Path
) -> None:
    # A recipe that ignores the requested list and always compiles 8.0;9.0 (cache hits from
    # the first test); asking for 12.0 too must fail the gate.
    recipe = tmp_path / "stubborn.toml"
    text = EXAMPLE.read_text().replace(
        "../examples/cuda-kernels", str(ROOT / "examples" / "cuda-kernels")
    )
    text = text.replace(
        "python -m pip wheel",
        'CUDA_GENCODE_FLAGS="-gencode=arch=compute_80,code=sm_80 '
        '-gencode=arch=compute_90,code=sm_90" python -m pip wheel',
    )
    recipe.write_text(text.replace('name = "example"', 'name = "stubborn"'))
    out = tmp_path / "dist"
    proc = run_build(session, out, "--recipe", str(recipe), "--arch", "8.0;9.0;12.0")
    assert proc.returncode == 5, proc.stderr[-3000:]
    assert "failed the audit gate" in proc.stderr
    assert "lacks sm_120" in proc.stderr
    rejected = out / "rejected" / "archwheel_example-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
    assert wheels_under(out) == [rejected]
    report = json.loads(rejected.with_name(rejected.name + ".audit.json").read_text())
    assert report["ok"] is False
    assert report["inputs"][0]["libraries"][0]["missing"] == ["sm_120"]
    assert (
        json.loads(rejected.with_name(rejected.name + ".provenance.json").read_text())["audit"][
            "ok"
        ]
        is False
    )


# -- interruptions ------------------------------------------------------------------------------


def start_build(session: Session, out: Path, label: str, arch: str) -> subprocess.Popen[str]:
    # Each interrupted build compiles an arch no other test compiles: its compile is cold (a
    # warm ccache would end it before the interrupt) and lasts long enough.
    return subprocess.Popen(
        build_cmd(session, out, "--recipe", "example", "--arch", arch),
        env={**session.env, "ARCHWHEEL_RUN_LABEL": label},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_compile(proc: subprocess.Popen[str]) -> list[str]:
    """Read output until the compile step is under way (nvcc running)."""
    seen: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 600
    for line in proc.stdout:
        seen.append(line)
        if "archwheel-example: 7 sources" in line:
            time.sleep(3)  # nvcc processes are running now
            return seen
        assert time.monotonic() < deadline, "".join(seen[-20:])
    raise AssertionError("build ended before compiling: " + "".join(seen[-30:]))


@pytest.mark.parametrize(
    ("how", "code", "arch"),
    [("kill-container", 5, "8.6"), ("sigint", 130, "8.9"), ("sigterm", 143, "10.3")],
)
def test_interrupted_build_leaves_no_container_and_no_wheel(
    session: Session, tmp_path: Path, how: str, code: int, arch: str
) -> None:
    label = f"archwheel.test={uuid.uuid4().hex}"
    out = tmp_path / "dist"
    proc = start_build(session, out, label, arch)
    try:
        wait_for_compile(proc)
        running = containers_with_label(["docker"], label)
        assert len(running) == 1
        if how == "kill-container":
            subprocess.run(["docker", "kill", running[0]], check=True, capture_output=True)
        else:
            proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGTERM)
        rest, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, rest[-3000:]
    if how == "kill-container":
        assert "was stopped from outside while step 'compile' ran (exit 137)" in rest
        assert "out of memory" not in rest
    assert "Traceback" not in rest
    assert containers_with_label(["docker"], label) == []
    assert wheels_under(out) == []


def test_a_sigkilled_build_leaves_no_container_and_the_next_one_cleans_up_and_matches(
    session: Session, tmp_path: Path
) -> None:
    """SIGKILL (a CI job's hard timeout, the OOM killer): archwheel cannot clean up. The
    container ends with it (its PID 1 waits on a pipe the killed process held); the next build
    removes the work folders the killed one left, says so, and makes the same wheel as an
    undisturbed build."""
    label = f"archwheel.test={uuid.uuid4().hex}"
    proc = start_build(session, tmp_path / "killed", label, "7.5")
    try:
        wait_for_compile(proc)
        assert len(containers_with_label(["docker"], label)) == 1
        proc.kill()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30
    while containers_with_label(["docker"], label) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert containers_with_label(["docker"], label) == []  # nothing compiles on
    assert wheels_under(tmp_path / "killed") == []
    again = run_build(session, tmp_path / "again", "--recipe", "example", "--arch", "7.5",
                      "--format", "json")  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    removed = [line for line in again.stderr.splitlines() if "left by a build that did not" in line]
    assert any("archwheel-work-" in line for line in removed), again.stderr[-3000:]
    assert all(f"pid {proc.pid} on " in line for line in removed)
    undisturbed = run_build(session, tmp_path / "undisturbed", "--recipe", "example", "--arch",
                            "7.5", "--format", "json")  # fmt: skip
    assert undisturbed.returncode == 0, undisturbed.stderr[-3000:]
    assert json.loads(again.stdout)["sha256"] == json.loads(undisturbed.stdout)["sha256"]


# -- reproducibility ----------------------------------------------------------------------------


def test_check_reproducible_builds_twice_and_compares(session: Session, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    proc = run_build(
        session, out, "--recipe", "example", "--arch", "9.0", "--check-reproducible",
        "--format", "json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["reproducible"] is True
    provenance = json.loads(Path(result["provenance"]).read_text())
    check = provenance["reproducibility"]
    assert check["identical"] is True
    assert check["first_sha256"] == check["second_sha256"] == sha256(Path(result["wheel"]))
    assert provenance["environment"]["CCACHE_DISABLE"] == "1"  # both builds compiled everything
    assert images_in(Path(result["wheel"])) == {"sm_90"}


def test_base_image_is_made_once(session: Session) -> None:
    proc = subprocess.run(
        [*CLI, "base-image", "--format", "json"],
        env=session.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["created"] is False
    assert document["image_id"] == image_id("archwheel/debian:bookworm")


def test_a_base_image_that_is_not_the_pinned_one_is_refused_before_any_container(
    session: Session, tmp_path: Path
) -> None:
    real = image_id("archwheel/debian:bookworm")
    other = "sha256:" + ("0" if real[7] != "0" else "1") * 64
    recipe = tmp_path / "pinned.toml"
    text = EXAMPLE.read_text().replace(
        "../examples/cuda-kernels", str(ROOT / "examples" / "cuda-kernels")
    )
    recipe.write_text(
        text.replace('source = "pypi"', f'source = "pypi"\nbase_image_id = "{other}"', 1)
    )
    label = f"archwheel.test={uuid.uuid4().hex}"
    since = time.time()
    proc = run_build(session, tmp_path / "dist", "--recipe", str(recipe), label=label)
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("archwheel: error")]
    assert len(errors) == 1, proc.stderr
    assert "base_image_id pins archwheel/debian:bookworm to sha256:000" in errors[0] or (
        "to sha256:111" in errors[0]
    )
    assert f"is now {real[:19]}" in errors[0]
    assert containers_created(["docker"], label, since) == []
    # The check needs the engine, so it runs once the build (and its log, dist/logs/) started:
    # nothing else is placed.
    out = tmp_path / "dist"
    assert [p for p in out.rglob("*") if p.is_file() and p.parent != out / "logs"] == []
