"""A real headless browser for the HTML reports: Debian's ``chromium`` (``.ci/run`` installs it).

Missing, a test that needs it skips, or fails under ``ARCHWHEEL_STRICT=1`` (CI).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.components import require
from tests.support.paths import CACHE

ARTIFACTS = CACHE / "artifacts"


@dataclass(frozen=True)
class Rendered:
    dom: str  # the DOM after the page loaded (--dump-dom)
    log: str  # the browser's own log, console messages included
    screenshot: Path


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    require(found is not None, "chromium is not installed (apt-get install chromium)")
    assert found is not None
    return found


def render(page: Path, screenshot_name: str, *, width: int = 1200, height: int = 1400) -> Rendered:
    """Open ``page`` in headless chromium without a network: the DOM, the log, a screenshot
    (kept under $ARCHWHEEL_CACHE/artifacts)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / screenshot_name
    shot.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="archwheel-chromium-") as profile:
        common = [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
            # no network: every host resolves to nothing, so a page that fetched would break
            "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={width},{height}",
        ]  # fmt: skip
        dom = subprocess.run(
            [*common, "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        shot_run = subprocess.run(
            [*common, f"--screenshot={shot}", page.resolve().as_uri()],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
    return Rendered(dom.stdout, dom.stderr + shot_run.stderr, shot)
