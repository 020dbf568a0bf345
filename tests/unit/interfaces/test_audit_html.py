"""`archwheel audit --format html`: one self-contained page, opened in a real headless browser
(Debian's chromium, no network): the chart and every row are in the DOM, verdicts in colour,
the provenance one click away, and a screenshot kept as a test artifact."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.browser import render
from tests.support.builders import Entry, container, elf64
from tests.support.cli import CliRun
from tests.support.index_wheels import device_library, make_dist

LIBRARIES = {
    "libfull.so": device_library(80, 90, 100, 120),
    "libpair.so": device_library(80, 90),
    "libbig.so": elf64([(".nv_fatbin", container(
        Entry(sm=80, payload=b"\x7fELF" + bytes(300_000)),
        Entry(kind=1, sm=90, version=(9, 0), payload=b"//ptx" + bytes(500_000)),
    ))]),
}  # fmt: skip


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    made = make_dist(tmp_path, "kern", "1.0", platform_tag="linux_x86_64", libraries=LIBRARIES)
    provenance = {"wheel": {"file": made.name}, "recipe": {"name": "kern-recipe-for-the-test"}}
    made.with_name(made.name + ".provenance.json").write_text(json.dumps(provenance))
    return made


def test_the_page_is_self_contained_and_complete(
    cli_run: CliRun, wheel: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    code, out, _ = cli_run("audit", str(wheel), "--expect", "8.0;9.0", "--format", "html",
                           "-o", str(page))  # fmt: skip
    assert code == 1 and out == ""  # libbig.so lacks sm_90: the exit code is the audit's
    text = page.read_text()
    # nothing to fetch: no script, stylesheet, image or font from anywhere
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "<script" not in text and "@import" not in text
    assert text.count("<svg") == 1


def test_the_browser_renders_chart_rows_verdicts_and_provenance(
    cli_run: CliRun, wheel: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    cli_run("audit", str(wheel), "--expect", "8.0;9.0", "--format", "html", "-o", str(page))
    shown = render(page, "audit-report.png")
    dom = shown.dom
    assert "Uncaught" not in shown.log and "CONSOLE" not in shown.log
    chart = re.search(r'<figure class="arch-cost-chart".*?</figure>', dom, re.S)
    assert chart is not None and "<svg" in chart.group(0)
    for arch in ("sm_80", "sm_90", "sm_100", "sm_120", "compute_90"):
        assert arch in chart.group(0)  # every arch in the chart's legend
    rows = re.findall(r'<tr class="library" data-library="([^"]+)">(.*?)</tr>', dom, re.S)
    assert sorted(r[0] for r in rows) == sorted(f"kern/{name}" for name in LIBRARIES)
    verdicts = {path: re.search(r'class="verdict (verdict-\w+)"', row) for path, row in rows}
    assert {p: m.group(1) for p, m in verdicts.items() if m} == {
        "kern/libfull.so": "verdict-ok",
        "kern/libpair.so": "verdict-ok",
        "kern/libbig.so": "verdict-missing",
    }
    assert re.search(r'<details class="provenance"><summary>provenance</summary>', dom)
    assert "kern-recipe-for-the-test" in dom
    png = shown.screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    pixels = imread(str(shown.screenshot))
    assert pixels.shape[0] > 500 and pixels.std() > 0.05  # drawn, not a blank page


NAMES_THE_CHART_MUST_NOT_READ = (
    "kern/lib$\\frac$.so",  # mathtext matplotlib cannot parse: a ValueError, exit 4
    "kern/lib$x^2$.so",  # mathtext it can: typeset, not the name
    "kern/lib\x1b[31mred.so",  # a control character: a missing glyph
    "kern/lib</text><script>alert(1)</script>.so",
)


def test_the_chart_shows_every_name_as_it_is(cli_run: CliRun, tmp_path: Path) -> None:
    """The chart's labels are the input's names: shown as text (the literal form, as in the
    tables), never read as mathtext or markup."""
    import html

    from archwheel.interfaces.render.common import literal

    libraries = {name.removeprefix("kern/"): device_library(80) for name in
                 NAMES_THE_CHART_MUST_NOT_READ}  # fmt: skip
    wheel = make_dist(tmp_path, "kern", "1.0", platform_tag="linux_x86_64", libraries=libraries)
    page = tmp_path / "report.html"
    code, _, err = cli_run("audit", str(wheel), "--format", "html", "-o", str(page))
    assert code == 0, err
    svg = re.search(r"<svg.*?</svg>", page.read_text(), re.S)
    assert svg is not None and "<script" not in svg.group(0)
    labels = {html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg.group(0))}
    for name in NAMES_THE_CHART_MUST_NOT_READ:
        assert literal(name) in labels


def test_without_matplotlib_it_says_how_to_get_it(wheel: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from archwheel.interfaces.cli import main\n"
        f"sys.exit(main(['audit', {str(wheel)!r}, '--format', 'html', '-o', {str(page)!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert proc.returncode == 4
    assert "archwheel[report]" in proc.stderr and "Traceback" not in proc.stderr
    assert not page.exists()


def test_the_index_page_shows_every_wheel_with_chart_and_provenance(
    cli_run: CliRun, tmp_path: Path
) -> None:
    wheels = []
    for torch, archs in (("2.13.0", (80, 90)), ("2.14.1", (80, 90, 120))):
        made = make_dist(tmp_path / "w", "kern", f"1.0+pt{torch.replace('.', '')}cu130",
                         platform_tag="linux_x86_64", requires=(f"torch=={torch}",),
                         libraries={"libk.so": device_library(*archs)})  # fmt: skip
        digest = __import__("hashlib").sha256(made.read_bytes()).hexdigest()
        provenance = {"wheel": {"sha256": digest}, "recipe": {"name": f"recipe-torch-{torch}"}}
        made.with_name(made.name + ".provenance.json").write_text(json.dumps(provenance))
        wheels.append(made)
    index = tmp_path / "index"
    code, _, _ = cli_run("publish", *map(str, wheels), "--index", str(index), "--expect", "8.0;9.0")
    assert code == 0
    shown = render(index / "current" / "index.html", "matrix-index.png")
    assert "Uncaught" not in shown.log and "CONSOLE" not in shown.log
    chart = re.search(r'<figure class="arch-cost-chart".*?</figure>', shown.dom, re.S)
    assert chart is not None and "<svg" in chart.group(0) and "sm_120" in chart.group(0)
    rows = re.findall(r'<tr class="wheel" data-wheel="([^"]+)">(.*?)</tr>', shown.dom, re.S)
    assert sorted(r[0] for r in rows) == sorted(w.name for w in wheels)
    for (_, row), torch in zip(sorted(rows), ("2.13.0", "2.14.1"), strict=True):
        assert "verdict-ok" in row and f"recipe-torch-{torch}" in row
        assert '<details class="provenance">' in row
    assert "torch-2.13.0+cu130.html" in shown.dom and "torch-2.14.1+cu130.html" in shown.dom
    text = (index / "current" / "index.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
