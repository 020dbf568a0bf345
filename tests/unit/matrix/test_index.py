"""The PEP 503 index: real wheels published, audited by archwheel itself, atomically swapped,
and resolved by real pip and uv in fresh virtual environments (offline, from file://)."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from urllib.parse import unquote

import pytest

from archwheel.facts.arch import ArchList
from archwheel.matrix.index import (
    CURRENT,
    TREES,
    Candidate,
    IndexEntry,
    publish,
    read_index,
    simple_url,
)
from archwheel.matrix.layout import KEEP_TREES
from tests.support.index_wheels import (
    device_library,
    fresh_venv,
    make_dist,
    pip_from_index,
    uv_from_index,
)

HERE = f"cp{sys.version_info.major}{sys.version_info.minor}"
OTHER = f"cp{sys.version_info.major}{sys.version_info.minor + 1}"
LINK = re.compile(
    r'<a href="([^"#]+)#sha256=([0-9a-f]{64})"(?: data-requires-python="([^"]*)")?[^>]*>'
)


def links(page: Path) -> list[tuple[Path, str, str | None]]:
    """(target file, sha256, data-requires-python) of every link on a page."""
    found = []
    for href, digest, requires in LINK.findall(page.read_text()):
        found.append(
            (page.parent / unquote(html.unescape(href)), digest, html.unescape(requires) or None)
        )
    return found


@pytest.fixture
def matrix_wheels(tmp_path: Path) -> list[Path]:
    """Two torch stand-ins and a matrix of an extension: two torch pins x two Python tags, and
    a newer version no Python here can install."""
    out = tmp_path / "wheels"
    wheels = [make_dist(out, "torch", v) for v in ("2.13.0", "2.14.1")]
    for torch, local in (("2.13.0", "pt213cu130"), ("2.14.1", "pt214cu130")):
        for tag in (HERE, OTHER):
            wheels.append(
                make_dist(
                    out,
                    "myext",
                    f"1.0+{local}",
                    python_tag=tag,
                    requires=(f"torch=={torch}",),
                    requires_python=">=3.10",
                )
            )
    wheels.append(
        make_dist(
            out, "myext", "2.0+pt214cu130", requires=("torch==2.14.1",), requires_python=">=3.99"
        )
    )
    return wheels


def test_published_pages_link_every_wheel_with_its_sha256(
    tmp_path: Path, matrix_wheels: list[Path]
) -> None:
    index = tmp_path / "index"
    result = publish(index, [Candidate(w) for w in matrix_wheels])
    assert result.ok and len(result.published) == len(matrix_wheels)
    root = index / CURRENT
    root_page = (root / "simple" / "index.html").read_text()
    assert 'href="myext/"' in root_page and 'href="torch/"' in root_page
    seen = set()
    for project in ("myext", "torch"):
        for target, digest, _ in links(root / "simple" / project / "index.html"):
            assert hashlib.sha256(target.read_bytes()).hexdigest() == digest
            seen.add(target.name)
            audit_json = json.loads(target.with_name(target.name + ".audit.json").read_text())
            assert audit_json["ok"] is True and audit_json["inputs"][0]["complete"] is True
    assert seen == {w.name for w in matrix_wheels}
    requires = {t.name: r for t, _, r in links(root / "simple" / "myext" / "index.html")}
    assert requires["myext-2.0+pt214cu130-py3-none-any.whl"] == ">=3.99"
    assert 'data-requires-python="&gt;=3.99"' in (root / "simple/myext/index.html").read_text()
    # the torch stand-ins declare no Requires-Python: no attribute
    assert all(r is None for _, _, r in links(root / "simple" / "torch" / "index.html"))


def test_find_links_page_per_torch_and_cuda(tmp_path: Path, matrix_wheels: list[Path]) -> None:
    index = tmp_path / "index"
    publish(index, [Candidate(w) for w in matrix_wheels])
    root = index / CURRENT
    pages = sorted(p.name for p in root.glob("torch-*.html"))
    assert pages == ["torch-2.13.0+cu130.html", "torch-2.14.1+cu130.html"]
    older = {t.name for t, _, _ in links(root / "torch-2.13.0+cu130.html")}
    assert older == {f"myext-1.0+pt213cu130-{tag}-none-any.whl" for tag in (HERE, OTHER)}
    newer = {t.name for t, _, _ in links(root / "torch-2.14.1+cu130.html")}
    assert "myext-2.0+pt214cu130-py3-none-any.whl" in newer and len(newer) == 3
    for target, digest, _ in links(root / "torch-2.14.1+cu130.html"):
        assert hashlib.sha256(target.read_bytes()).hexdigest() == digest


def test_a_wheel_that_fails_its_audit_is_not_published(tmp_path: Path) -> None:
    out = tmp_path / "wheels"
    good = make_dist(out, "kern", "1.0", platform_tag="linux_x86_64",
                     libraries={"libk.so": device_library(80, 90)})  # fmt: skip
    bad = make_dist(out, "kern", "1.1", platform_tag="linux_x86_64",
                    libraries={"libk.so": device_library(80)})  # fmt: skip
    empty = make_dist(out, "pure", "1.0")
    expect = ArchList.parse("8.0;9.0")
    index = tmp_path / "index"
    result = publish(index, [Candidate(good, expect=expect), Candidate(bad, expect=expect),
                             Candidate(empty, expect=expect)])  # fmt: skip
    assert [e.file for e in result.published] == [good.name]
    reasons = {r.wheel: r.reason for r in result.refused}
    assert "lacks sm_90" in reasons[bad.name]
    assert "no library has device code" in reasons[empty.name]
    assert [e.file for e in read_index(index)] == [good.name]
    assert not (index / CURRENT / "wheels" / bad.name).exists()
    assert "kern-1.1" not in (index / CURRENT / "simple" / "kern" / "index.html").read_text()


def test_provenance_is_published_beside_its_wheel_and_must_match(tmp_path: Path) -> None:
    out = tmp_path / "wheels"
    wheel = make_dist(out, "kern", "1.0", platform_tag="linux_x86_64",
                      libraries={"libk.so": device_library(80, 90)})  # fmt: skip
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    provenance = out / (wheel.name + ".provenance.json")
    provenance.write_text(json.dumps({"wheel": {"sha256": digest}, "arch": {"requested": "9.0"}}))
    other = make_dist(tmp_path / "other", "kern", "1.1", platform_tag="linux_x86_64",
                      libraries={"libk.so": device_library(80)})  # fmt: skip
    stale = tmp_path / "stale.provenance.json"
    stale.write_text(json.dumps({"wheel": {"sha256": digest}, "arch": {"requested": "8.0"}}))
    index = tmp_path / "index"
    result = publish(index, [Candidate(wheel, provenance), Candidate(other, stale)])
    assert [e.file for e in result.published] == [wheel.name]
    assert result.published[0].expect == "9.0"  # read from the provenance: audited against it
    assert "provenance is of another build" in result.refused[0].reason
    placed = index / CURRENT / "wheels" / (wheel.name + ".provenance.json")
    assert placed.read_bytes() == provenance.read_bytes()


def test_published_files_never_change(tmp_path: Path) -> None:
    index = tmp_path / "index"
    first = make_dist(tmp_path / "a", "pure", "1.0")
    assert publish(index, [Candidate(first)]).ok
    again = publish(index, [Candidate(first)])
    assert again.tree is None and [e.file for e in again.unchanged] == [first.name]
    changed = make_dist(tmp_path / "b", "pure", "1.0", requires=("numpy",))
    refused = publish(index, [Candidate(changed)])
    assert "with other bytes" in refused.refused[0].reason
    served = index / CURRENT / "wheels" / first.name
    assert served.read_bytes() == first.read_bytes()


def test_publishing_swaps_whole_trees_and_keeps_the_previous(tmp_path: Path) -> None:
    index = tmp_path / "index"
    trees = []
    for n in range(KEEP_TREES + 2):
        result = publish(index, [Candidate(make_dist(tmp_path / "w", "pure", f"1.{n}"))])
        assert result.tree is not None
        trees.append(result.tree)
        assert (index / CURRENT).is_symlink() and (index / CURRENT).resolve() == result.tree
    kept = sorted(p.name for p in (index / TREES).iterdir())
    assert kept == sorted(t.name for t in trees[-KEEP_TREES:])
    # earlier wheels travel into every new tree
    assert len(read_index(index)) == KEEP_TREES + 2
    previous = trees[-2]
    assert len(json.loads((previous / "index.json").read_text())["entries"]) == KEEP_TREES + 1


def test_a_reader_never_sees_a_half_published_index(tmp_path: Path) -> None:
    index = tmp_path / "index"
    publish(index, [Candidate(make_dist(tmp_path / "w", "pure", "0.0"))])
    stop = threading.Event()
    problems: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                tree = (index / CURRENT).resolve(strict=True)
                entries = json.loads((tree / "index.json").read_text())["entries"]
                page = (tree / "simple" / "pure" / "index.html").read_text()
                for entry in entries:
                    if entry["file"] not in page:
                        problems.append(f"{entry['file']} in the manifest, not on the page")
                    if not (tree / "wheels" / entry["file"]).is_file():
                        problems.append(f"{entry['file']} listed but absent")
                reads += 1
            except FileNotFoundError:
                continue  # the tree was collected between resolve and read: retry
            except Exception as exc:
                problems.append(repr(exc))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for n in range(1, 8):
            publish(index, [Candidate(make_dist(tmp_path / "w", "pure", f"0.{n}"))])
    finally:
        stop.set()
        thread.join()
    assert problems == [] and reads > 0
    assert len(read_index(index)) == 8


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_installers_resolve_the_right_cell(
    tmp_path: Path, matrix_wheels: list[Path], installer: str
) -> None:
    index = tmp_path / "index"
    assert publish(index, [Candidate(w) for w in matrix_wheels]).ok
    install = pip_from_index if installer == "pip" else uv_from_index
    for torch, local in (("2.13.0", "pt213cu130"), ("2.14.1", "pt214cu130")):
        python = fresh_venv(tmp_path / f"venv-{installer}-{torch}")
        proc = install(python, simple_url(index), "myext", f"torch=={torch}")
        assert proc.returncode == 0, proc.stderr[-2000:]
        # the right torch cell, for this Python (not the other tag, not the >=3.99 release)
        build = _run(python, "import myext; print(myext.BUILD)")
        assert build == f"'1.0+{local}'" or build == f"1.0+{local}"
        tag = _run(python, "import importlib.metadata as m; "
                   "print([l for l in m.distribution('myext').read_text('WHEEL').splitlines() "
                   "if l.startswith('Tag:')][0])")  # fmt: skip
        assert tag == f"Tag: {HERE}-none-any"


def _run(python: Path, code: str) -> str:
    import subprocess

    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_resolvers_read_metadata_without_the_wheel(
    tmp_path: Path, matrix_wheels: list[Path]
) -> None:
    """PEP 658/714: each link names <wheel>.metadata and its sha256; pip backtracking over the
    torch pins reads those, not the wheels (a torch extension wheel is hundreds of MB)."""
    index = tmp_path / "index"
    publish(index, [Candidate(w) for w in matrix_wheels])
    page = (index / CURRENT / "simple" / "myext" / "index.html").read_text()
    for href, digest in re.findall(r'href="([^"#]+)#sha256=[0-9a-f]{64}"[^>]*'
                                   r'data-core-metadata="sha256=([0-9a-f]{64})"', page):  # fmt: skip
        served = (index / CURRENT / "simple" / "myext" / unquote(html.unescape(href))).parent
        metadata = served / (Path(unquote(href)).name + ".metadata")
        assert hashlib.sha256(metadata.read_bytes()).hexdigest() == digest
        with zipfile.ZipFile(served / Path(unquote(href)).name) as wheel:
            (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
            assert wheel.read(name) == metadata.read_bytes()
    assert page.count("data-core-metadata=") == page.count("<a ") == 5
    python = fresh_venv(tmp_path / "venv")
    proc = pip_from_index(python, simple_url(index), "-v", "myext", "torch==2.13.0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ".whl.metadata" in proc.stdout


@pytest.mark.parametrize(
    ("torch", "cuda", "page"),
    [
        ("2.14.1", "13.0", "torch-2.14.1+cu130.html"),
        ("2.14.1+cu130", "13.0", "torch-2.14.1+cu130.html"),  # a recipe pinning the label
        ("2.13.0", None, "torch-2.13.0+cpu.html"),
        (None, "13.0", None),
    ],
)
def test_the_find_links_page_names_the_torch_version_once(
    torch: str | None, cuda: str | None, page: str | None
) -> None:
    entry = IndexEntry(
        file="x-1.0-py3-none-any.whl", project="x", version="1.0", sha256="0" * 64, size=1,
        requires_python=None, metadata_sha256=None, torch=torch, cuda=cuda, expect=None,
        cell_key=None, provenance=False, published_at="",
    )  # fmt: skip
    assert entry.find_links_page == page


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("file", "../../outside/myext-1.0-py3-none-any.whl", "is not a wheel file name"),
        ("file", "/etc/myext-1.0-py3-none-any.whl", "is not a wheel file name"),
        ("file", "notawheel.txt", "is not a wheel file name"),
        ("sha256", "x" * 64, "sha256 is not 64 hex digits"),
        ("project", "../../../outside", "project '../../../outside' is not the file's (myext)"),
        ("project", "other", "project 'other' is not the file's (myext)"),
        ("version", "2.0", "version is not the file's (1.0)"),
        ("metadata_sha256", '0" onmouseover="x', "metadata_sha256 is not 64 hex digits"),
        ("size", -1, "size is not a byte count"),
        ("size", True, "size is not a byte count"),
        ("cuda", 13, "'cuda' is not a string"),
        ("cuda", "x.y", "invalid CUDA version"),
        ("torch", "not a version", "Invalid version"),
        ("expect", "9.9", "unknown compute capability 9.9"),
        (None, None, "an entry is not an object"),
    ],
)
def test_a_ci_artifacts_manifest_is_checked_before_anything_is_read(
    tmp_path: Path, field: str | None, value: object, words: str
) -> None:
    """`publish --from-index` reads manifests that CI jobs left: an entry's file becomes a path,
    so it must be a wheel's file name (a '../' entry made archwheel read a wheel outside the
    folder); every other field has its type. Each defect is one InputError naming the file."""
    from archwheel.errors import InputError
    from archwheel.matrix.index import MANIFEST, WHEELS, candidates_from

    outside = tmp_path / "outside"
    wheel = make_dist(outside, "myext", "1.0")
    published = tmp_path / "job" / "index"
    publish(published, [Candidate(wheel)])
    tree = (published / CURRENT).resolve()
    artifacts = tmp_path / "artifacts"
    copy = artifacts / tree.name
    copy.mkdir(parents=True)
    (copy / WHEELS).mkdir()
    document = json.loads((tree / MANIFEST).read_text())
    assert len(_as_the_job_left_it(tree, copy, document)) == 1  # as the job left it: fine
    if field is None:
        document["entries"][0] = None
    else:
        document["entries"][0][field] = value
    (copy / MANIFEST).write_text(json.dumps(document))
    with pytest.raises(InputError) as caught:
        candidates_from(artifacts)
    assert words in caught.value.one_line()
    assert str(copy / MANIFEST) in caught.value.one_line()


def _as_the_job_left_it(tree: Path, copy: Path, document: dict[str, object]) -> list[Candidate]:
    import shutil

    from archwheel.matrix.index import MANIFEST, WHEELS, candidates_from

    for item in (tree / WHEELS).iterdir():
        shutil.copy(item, copy / WHEELS / item.name)
    (copy / MANIFEST).write_text(json.dumps(document))
    return candidates_from(copy.parent)


@pytest.mark.parametrize(
    ("provenance", "refused"),
    [
        ({"wheel": ["sha256"]}, None),  # not an object where one belongs: not believed
        ({"wheel": {"sha256": 5}, "arch": "8.0"}, None),
        ({"arch": {"requested": "9.9"}}, "its provenance's arch list: invalid arch '9.9'"),
        ([], "provenance is not a JSON object"),
    ],
)
def test_a_provenance_of_the_wrong_shape_is_not_believed(
    tmp_path: Path, provenance: object, refused: str | None
) -> None:
    """A provenance file beside a wheel comes from the same place as the wheel: values of the
    wrong type are not believed (a list where an object belongs was an internal error); one
    that cannot be read, or an arch list no audit can use, refuses the wheel."""
    wheel = make_dist(tmp_path / "w", "myext", "1.0")
    record = tmp_path / "w" / (wheel.name + ".provenance.json")
    record.write_text(json.dumps(provenance))
    result = publish(tmp_path / "index", [Candidate(wheel, record)])
    if refused is None:
        assert [e.file for e in result.published] == [wheel.name]
    else:
        assert [r.wheel for r in result.refused] == [wheel.name]
        assert refused in result.refused[0].reason


def test_an_index_whose_manifest_was_tampered_with_is_not_published_into(tmp_path: Path) -> None:
    """An index folder restored from a CI cache or artifact is input too: an entry whose
    project climbs out of the tree made publish create a folder and a page outside the index
    (each project is a folder of simple/). Now it is one InputError and nothing is written."""
    from archwheel.errors import InputError
    from archwheel.matrix.index import MANIFEST

    index = tmp_path / "index"
    publish(index, [Candidate(make_dist(tmp_path / "w", "myext", "1.0"))])
    manifest = (index / CURRENT).resolve() / MANIFEST
    document = json.loads(manifest.read_text())
    document["entries"][0]["project"] = "../../../../escaped"
    manifest.write_text(json.dumps(document))
    trees_before = sorted((index / TREES).iterdir())
    with pytest.raises(InputError) as caught:
        publish(index, [Candidate(make_dist(tmp_path / "w", "other", "1.0"))])
    assert "project '../../../../escaped' is not the file's (myext)" in caught.value.one_line()
    assert not list(tmp_path.rglob("escaped"))
    assert sorted((index / TREES).iterdir()) == trees_before


@pytest.mark.parametrize("link", ["wheel", "tree"])
def test_a_link_out_of_the_artifacts_folder_is_not_followed(tmp_path: Path, link: str) -> None:
    """`publish --from-index` reads a CI artifact folder: a wheel there that is a link to a
    wheel elsewhere on this machine published that wheel. Now it is one InputError, and
    nothing is published; a tree that is a linked folder is not walked into."""
    import shutil

    from archwheel.errors import InputError
    from archwheel.matrix.index import WHEELS, candidates_from

    wheel = make_dist(tmp_path / "made", "secretx", "1.0")
    published = tmp_path / "job"
    publish(published, [Candidate(wheel)])
    tree = (published / CURRENT).resolve()
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    if link == "wheel":
        copy = artifacts / "t1"
        shutil.copytree(tree, copy)
        (copy / WHEELS / wheel.name).unlink()
        (copy / WHEELS / wheel.name).symlink_to(wheel)
    else:
        (artifacts / "t1").symlink_to(tree, target_is_directory=True)
    with pytest.raises(InputError) as caught:
        candidates_from(artifacts)
    if link == "wheel":
        assert f"{wheel.name}: " in caught.value.one_line()
        assert "leads out of" in caught.value.one_line()
        assert "not followed" in caught.value.one_line()
    else:  # the walk of the folder does not enter a linked folder: nothing is read from it
        assert "holds no archwheel index" in caught.value.one_line()
    inside = artifacts / "inside"
    shutil.copytree(tree, inside)  # a real copy inside the folder is read as before
    if link == "wheel":
        shutil.rmtree(artifacts / "t1")
    else:
        (artifacts / "t1").unlink()
    assert [c.wheel.name for c in candidates_from(artifacts)] == [wheel.name]


# -- a wheel that serves several torches (a build's [torch] loads_with) ----------------------------


def _range_wheel(out: Path, passed: list[str]) -> Candidate:
    wheel = make_dist(
        out, "stableext", "1.0", python_tag=HERE, abi_tag=HERE, platform_tag="linux_x86_64",
        requires=("torch>=2.12.1,<2.15",),
    )  # fmt: skip
    provenance = wheel.with_name(wheel.name + ".provenance.json")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    provenance.write_text(
        json.dumps({"wheel": {"sha256": digest}, "torch_range": {"passed": passed}})
    )
    return Candidate(wheel, provenance, torch="2.14.1", cuda="13.0")


def test_a_range_wheel_is_on_the_find_links_page_of_every_torch_it_serves(tmp_path: Path) -> None:
    # 2.15.0 passed its check, but the wheel's Requires-Dist does not admit it: not served
    candidate = _range_wheel(tmp_path / "w", ["2.12.1", "2.13.0", "2.14.1", "2.15.0"])
    index = tmp_path / "index"
    result = publish(index, [candidate])
    assert result.ok, result.refused
    (entry,) = read_index(index)
    assert entry.serves == ("2.12.1", "2.13.0", "2.14.1")
    root = index / CURRENT
    for torch in ("2.12.1", "2.13.0", "2.14.1"):
        page = root / f"torch-{torch}+cu130.html"
        assert [t.name for t, _, _ in links(page)] == [candidate.wheel.name]
    assert not (root / "torch-2.15.0+cu130.html").exists()
    landing = (root / "index.html").read_text()
    assert "torch-2.12.1+cu130.html" in landing
    # pip installs it from the page of a torch it serves, next to that torch (a stand-in)
    torches = tmp_path / "torches"
    make_dist(torches, "torch", "2.12.1")
    python = fresh_venv(tmp_path / "venv")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-cache-dir",
         "--no-index", "--find-links", str(torches),
         "--find-links", (root / "torch-2.12.1+cu130.html").as_uri(), "stableext", "torch==2.12.1"],
        capture_output=True, text=True, check=False, timeout=300,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("passed", [["2.12"], ["not a version"], "2.13.0", [1], ["2.13.0"] * 65])
def test_a_range_the_index_cannot_believe_is_refused_or_ignored(
    tmp_path: Path, passed: object
) -> None:
    candidate = _range_wheel(tmp_path / "w", passed)  # type: ignore[arg-type]
    result = publish(tmp_path / "index", [candidate])
    if passed == ["2.12"]:  # a version, which the wheel's range does not admit: serves nothing
        assert result.ok and read_index(tmp_path / "index")[0].serves == ()
    else:
        (refusal,) = result.refused
        assert "torch_range" in refusal.reason
