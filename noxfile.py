"""archwheel's entry points. `nox -l` lists the sessions; `nox -s NAME -- ARGS` forwards ARGS.

Every session installs archwheel from this checkout into its own virtual environment. Sessions
that need something external (a container engine, a GPU) say so and fail with a reason.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]

ROOT = Path(__file__).resolve().parent
CACHE = ROOT / ".cache"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

# The built-in default input of `nox -s audit`: the real torch CUDA 13.0 wheel.
DEFAULT_WHEEL_SPEC = "torch==2.14.1"


def _install(session: nox.Session, *extras: str) -> None:
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec)


def _fetch_wheel(session: nox.Session, spec: str) -> Path:
    """`pip download --no-deps` one wheel into .cache/wheels (once) and return its path."""
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    name = spec.split("==", maxsplit=1)[0].replace("-", "_")
    version = spec.split("==")[1] if "==" in spec else ""
    found = sorted(dest.glob(f"{name}-{version}*.whl"))
    if not found:
        session.run(
            "python", "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "-d", str(dest), spec, external=True,
        )  # fmt: skip
        found = sorted(dest.glob(f"{name}-{version}*.whl"))
    if not found:
        session.error(f"pip download {spec} produced no wheel in {dest}")
    return found[-1]


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite (pytest). Extra arguments go to pytest, e.g. `-- -k fatbin -x`."""
    _install(session, "test")
    env = {"ARCHWHEEL_CACHE": str(CACHE)}
    # The heavy real builds (marker `heavy`: torch-scatter, TorchOpt) run in `nox -s heavy`,
    # the fault tests made of whole builds (marker `costly`) in `nox -s faults`.
    # `--durations`: the slowest tests end the log, for keeping CI under 60 minutes.
    session.run(
        "pytest", "-m", "not heavy and not costly", "--durations=40", *session.posargs, env=env
    )


@nox.session(python=PYTHON)
def faults(session: nox.Session) -> None:
    """Every fault test (tests/integration/faults/), the costly ones made of whole real builds
    included (a cache server answering garbage, hanging, killed mid-compile; SIGKILL in each build
    phase; dockerd stopped and started; full work, temporary, output and compiler-cache file
    systems; the index cut while a build makes its builder image; matrix runs at once and
    killed; about 8 minutes on 2 cores). Extra arguments go to pytest."""
    _install(session, "test")
    env = {"ARCHWHEEL_CACHE": str(CACHE)}
    session.run("pytest", "-m", "faults", "tests/integration/faults", *session.posargs, env=env)


@nox.session(python=PYTHON)
def heavy(session: nox.Session) -> None:
    """The heavy real builds left out of `tests` (torch-scatter 2.1.2, TorchOpt 0.7.3,
    causal-conv1d 1.7.0, beamgrad 2.3.0, DeepSpeed 0.19.8; about 50 minutes on 2 cores).
    Extra arguments go to pytest."""
    _install(session, "test")
    env = {"ARCHWHEEL_CACHE": str(CACHE)}
    session.run("pytest", "-m", "heavy", *session.posargs, env=env)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Lint and type-check: ruff check, ruff format --check, mypy --strict."""
    _install(session, "test", "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    # The compiled scan (src/archwheel/binary/_speedups.c): its warnings are errors too.
    include = sysconfig.get_paths()["include"]
    session.run(
        "gcc", "-fsyntax-only", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror",
        f"-I{include}", "src/archwheel/binary/_speedups.c", external=True,
    )  # fmt: skip


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site (mkdocs.yml) into site/, with `mkdocs build --strict`: a
    broken link or anchor, or a page left out of the nav, fails. Installs only the `docs`
    extra's tools, not archwheel: seconds, and nothing is fetched while it builds."""
    extras = nox.project.load_toml(ROOT / "pyproject.toml")["project"]["optional-dependencies"]
    session.install(*extras["docs"])
    session.run("mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"))


# The property tests of the scan and the zip reader, run on the compiled part built with
# sanitizers.
SANITIZED_TESTS = [
    "tests/unit/binary/test_speedups.py",
    "tests/unit/binary/test_speedups_zip.py",
    "tests/unit/binary/test_zipread.py",
    "tests/unit/binary/test_fuzz_chunking.py",
    "tests/unit/binary/test_fuzz_archives.py",
    "tests/unit/binary/test_scan.py",
    "tests/unit/binary/test_hostile_bounds.py",
]


@nox.session(python=PYTHON)
def sanitize(session: nox.Session) -> None:
    """The compiled scan (src/archwheel/binary/_speedups.c) under AddressSanitizer and UBSan.

    Builds it with both in place of the installed one, runs the scan's property tests on it
    (`ARCHWHEEL_FUZZ_EXAMPLES`, default 1000 here) and puts the installed one back. A memory
    error or undefined behaviour stops the run with the sanitizer's report.
    """
    _install(session, "test")
    found = session.run(
        "python", "-c", "import archwheel.binary._speedups as m; print(m.__file__)", silent=True
    )
    target = Path(str(found).strip().splitlines()[-1])
    saved = target.with_name(target.name + ".saved")
    shutil.copy2(target, saved)
    try:
        session.run(
            "gcc", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
            "-fno-omit-frame-pointer", "-fPIC", "-shared", f"-I{sysconfig.get_paths()['include']}",
            "src/archwheel/binary/_speedups.c", "-lz", "-o", str(target), external=True,
        )  # fmt: skip
        # The build holds the sanitizers' checks (else the run below would prove nothing).
        session.run("bash", "-c", f"nm -D {target} | grep -q __asan_report_load", external=True)
        runtimes = [
            str(session.run("gcc", f"-print-file-name={lib}", silent=True, external=True)).strip()
            for lib in ("libasan.so", "libubsan.so")
        ]
        env = {
            "LD_PRELOAD": ":".join(runtimes),
            "ASAN_OPTIONS": "detect_leaks=0",  # CPython's own allocations are not ours to judge
            "ARCHWHEEL_FUZZ_EXAMPLES": os.environ.get("ARCHWHEEL_FUZZ_EXAMPLES", "1000"),
            "ARCHWHEEL_CACHE": str(CACHE),
        }
        session.run("pytest", "-q", "-p", "no:cacheprovider", *SANITIZED_TESTS, env=env)
    finally:
        shutil.move(saved, target)


@nox.session(python=PYTHON)
def audit(session: nox.Session) -> None:
    """Audit wheels or libraries: `nox -s audit -- WHEEL [--expect "8.0;9.0+PTX"] [--format json]`.

    Without arguments, audits the real torch 2.14.1 CUDA 13.0 wheel against its own arch list.
    """
    _install(session)
    args = list(session.posargs)
    if not args:
        wheel = _fetch_wheel(session, DEFAULT_WHEEL_SPEC)
        # The wheel's own declared list (the official cu130 TORCH_CUDA_ARCH_LIST). The audit
        # finds libraries that lack parts of it: exit code 1 is its verdict, not a failure of
        # this session, so the default job accepts it.
        session.run(
            "archwheel", "audit", str(wheel), "--expect", "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
            success_codes=[0, 1],
        )  # fmt: skip
        return
    session.run("archwheel", "audit", *args)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks that print ratios against baselines measured in the same run.

    `nox -s bench` runs all; `nox -s bench -- audit`, `-- build` or `-- matrix` runs one
    (`matrix` needs Docker and redis-server: a cold matrix vs the same with the remote cache warm;
    `farm-sim` replays recorded builds on simulated compile farms, `-- farm-sim --fresh` records
    them again with real builds in Docker; `arch-add` needs Docker: a variants matrix of two arch
    cells, then a third arch added).
    """
    _install(session, "test")
    env = {"ARCHWHEEL_CACHE": str(CACHE), "PYTHONUNBUFFERED": "1"}
    session.run("python", str(ROOT / "benchmarks" / "run.py"), *session.posargs, env=env)


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Build a wheel in a CUDA container, then audit it: `nox -s build -- --arch "8.0;9.0"`.

    Options: --recipe NAME, --python X.Y, --jobs N, --out DIR, --engine docker|podman,
    --check-reproducible. Needs a running container engine.
    """
    _install(session)
    session.run("archwheel", "build", *session.posargs)


@nox.session(python=PYTHON)
def matrix(session: nox.Session) -> None:
    """Plan and build a matrix into a PEP 503 index: `nox -s matrix -- matrix.toml --index DIR`.

    Options: --recipe, --torch, --python, --arch, --exclude AXIS=V,... (repeatable), --plan
    (print the plan, build nothing), --work DIR. Building needs a running container engine.
    """
    _install(session)
    session.run("archwheel", "matrix", *session.posargs)


@nox.session(name="base-image", python=PYTHON)
def base_image(session: nox.Session) -> None:
    """Make a Debian base image locally with debootstrap + `docker import` (no registry needed)."""
    _install(session)
    session.run("archwheel", "base-image", *session.posargs)


@nox.session(python=PYTHON)
def smoke(session: nox.Session) -> None:
    """Install wheels in an isolated environment and run real kernels on the GPU.

    `nox -s smoke -- WHEEL... [--backend venv|docker] [--timeout S]`. Without a GPU it says
    "no CUDA device" and exits with its documented code.
    """
    _install(session)
    session.run("archwheel", "smoke", *session.posargs, env={"PYTHONUNBUFFERED": "1"})


@nox.session(python=PYTHON)
def doctor(session: nox.Session) -> None:
    """Report this host's GPUs, driver and installed torch, with a verdict per GPU."""
    _install(session, "gpu")
    session.run("archwheel", "doctor", *session.posargs)


if __name__ == "__main__":  # pragma: no cover
    os.execvp("nox", ["nox", "-f", __file__, *sys.argv[1:]])
