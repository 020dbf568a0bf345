"""sid against the archive: the table's row (sid's python3 and libc6, read with sid's sources on
archwheel/debian:trixie), and a real build for Python 3.14 on archwheel/debian:sid. Over the
network, and sid moves, so this is `heavy`, kept out of the normal run: a new CPython in sid
is a table update, not a failure of the build."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from archwheel.facts.base_pythons import load_base_pythons
from tests.support.cli import CliRun
from tests.support.paths import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.heavy]

SCRIPT = (
    # the base's own archive line, its suite turned to sid
    "sed -i 's/ trixie / sid /' /etc/apt/sources.list\n"
    # an archive copy's Release may be past its Valid-Until (a frozen mirror's is)
    "apt-get -o Acquire::Check-Valid-Until=false update >/dev/null\n"
    "apt-cache policy python3 libc6\n"
)


def test_sid_offers_the_python_and_glibc_the_table_says(docker_engine: str) -> None:
    sid = load_base_pythons().suite("sid")
    assert sid is not None
    proc = subprocess.run(
        [docker_engine, "run", "--rm", "--network", "host", "archwheel/debian:trixie",
         "sh", "-c", SCRIPT],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    python, libc = re.findall(r"Candidate: (\S+)", proc.stdout)
    assert python.startswith(f"{sid.python}."), proc.stdout
    assert libc.startswith(f"{sid.glibc[0]}.{sid.glibc[1]}-"), proc.stdout


# -- a real build for Python 3.14 on sid --------------------------------------------------------


def _sid_recipe(tmp_path: Path) -> Path:
    """The example recipe for 3.11 and 3.14 with CUDA 13.2 (13.0's math headers contradict
    sid's glibc 2.43: the plan refuses that pair)."""
    text = (ROOT / "recipes" / "example.toml").read_text()
    text = text.replace("../examples/", str(ROOT / "examples") + "/")
    text = re.sub(r"(?m)^versions = .*$", 'versions = ["3.11", "3.14"]', text)
    text = text.replace('cuda = "13.0"', 'cuda = "13.2"')
    path = tmp_path / "example-sid.toml"
    path.write_text(text)
    return path


def test_python_3_14_builds_on_a_sid_base_made_as_a_user_makes_it(
    docker_engine: str, tmp_path: Path, cli_run: CliRun
) -> None:
    """The sid base made as a user makes it: refused while the archive copy's Release is past
    its Valid-Until (the image that was there is kept), made with --allow-expired-release;
    then the example built for Python 3.14 on it (g++-15 for nvcc 13.2, sid's gcc being 16)
    and audited."""
    code, _, err = cli_run("base-image", "--suite", "sid", "--force")
    errors = [line for line in err.splitlines() if line.startswith("archwheel: error")]
    if code != 0:  # the archive copy here: sid's Release expired 2026-11-06
        assert code == 4 and len(errors) == 1, err
        assert "the sid archive's Release was valid until" in errors[0]
        assert "--allow-expired-release" in errors[0]
        code, _, err = cli_run("base-image", "--suite", "sid", "--force",
                               "--allow-expired-release")  # fmt: skip
    assert code == 0, err
    out = tmp_path / "out"
    code, stdout, err = cli_run("build", "--recipe", str(_sid_recipe(tmp_path)), "--arch", "9.0",
                                "--python", "3.14", "--out", str(out), "--format", "json")  # fmt: skip
    assert code == 0, err[-3000:]
    result = json.loads(stdout)
    wheel = Path(result["wheel"])
    # the example's library is loaded with ctypes (py3-none); repaired to the glibc it needs
    assert re.fullmatch(r"archwheel_example-0\.1\.0-py3-none-manylinux_2_\d+_x86_64\.whl",
                        wheel.name), wheel.name  # fmt: skip
    provenance = json.loads(Path(result["provenance"]).read_text())
    assert provenance["images"]["base"] == "archwheel/debian:sid"
    toolchain = provenance["toolchain"]
    assert toolchain["python"].startswith("3.14.") and toolchain["nvcc"].startswith("13.2.")
    assert toolchain["gcc"].startswith("16.")  # the suite's; nvcc compiled with g++-15
    assert provenance["environment"]["NVCC_CCBIN"] == "g++-15"
    assert provenance["audit"]["ok"] is True
