"""A label of one version never gets two sets of properties: ``publish_variants`` reads the
labels the index publishes under the index's lock, so a publish that waited for the lock sees
the label another publish gave meanwhile. Real wheels, real threads, the real lock."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from archwheel.matrix.index import Candidate, PublishResult
from archwheel.matrix.variants import publish_variants
from tests.support.index_wheels import device_library, make_dist


def _wheels(tmp_path: Path) -> tuple[Path, Path]:
    """Two wheels of vext 1.0 with other file names (tags), both sm_80 SASS only: both label
    ``sm80``; built with CUDA 13.0 and 12.8 they prove other lower bounds."""
    library = {"_k.so": device_library(80)}
    a = make_dist(tmp_path / "a", "vext", "1.0", python_tag="py3", libraries=library)
    b = make_dist(tmp_path / "b", "vext", "1.0", python_tag="py311", libraries=library)
    return a, b


def _labels(index: Path) -> dict[str, object]:
    document = json.loads((index / "current" / "wheels" / "vext-1.0-variants.json").read_text())
    labels: dict[str, object] = document["variants"]
    return labels


def test_a_published_label_with_other_properties_is_refused(tmp_path: Path) -> None:
    a, b = _wheels(tmp_path)
    index = tmp_path / "index"
    assert not publish_variants(index, [Candidate(a, cuda="13.0")]).refused
    result = publish_variants(index, [Candidate(b, cuda="12.8")])
    (refusal,) = result.refused
    assert refusal.wheel == b.name
    assert "label sm80 of vext 1.0 is published with other properties" in refusal.reason
    assert _labels(index)["sm80"] == {
        "nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["80_real"]}
    }


def test_a_publish_waiting_for_the_lock_sees_the_label_given_meanwhile(tmp_path: Path) -> None:
    a, b = _wheels(tmp_path)
    index = tmp_path / "index"
    inside = threading.Event()  # the first publish holds the lock
    go_on = threading.Event()
    results: dict[str, PublishResult] = {}

    def held_landing(tree: Path) -> str:  # called while the first publish holds the lock
        inside.set()
        assert go_on.wait(60)
        return "<html></html>\n"

    def first() -> None:
        results["a"] = publish_variants(index, [Candidate(a, cuda="13.0")], landing=held_landing)

    def second() -> None:
        results["b"] = publish_variants(index, [Candidate(b, cuda="12.8")])

    one = threading.Thread(target=first)
    one.start()
    assert inside.wait(60)
    two = threading.Thread(target=second)
    two.start()
    # The second publish has made its variant wheel (its staging folder) and waits for the lock.
    deadline = time.monotonic() + 60
    while len(list(index.glob(".variants-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    assert two.is_alive()
    go_on.set()
    one.join(60)
    two.join(60)
    assert not results["a"].refused
    (refusal,) = results["b"].refused
    assert "label sm80 of vext 1.0 is published with other properties" in refusal.reason
    assert _labels(index)["sm80"] == {
        "nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["80_real"]}
    }
