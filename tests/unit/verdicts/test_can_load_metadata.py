"""can-load reads a wheel's ``Requires-Dist`` as pip does, past a folded licence whose
continuation lines are whitespace-only (setuptools writes an empty line of the text so)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from tests.support.builders import write_zip
from tests.support.can_load_fakes import EXT, TAG, Fakes, validate_schema
from tests.support.cli import CliRun

# What setuptools writes for a project with a BSD licence text and a torch pin.
SETUPTOOLS_METADATA = (
    "Metadata-Version: 2.1\n"
    "Name: myext\n"
    "Version: 1.0+pt2.14.1cu130\n"
    "Summary: CUDA kernels for torch\n"
    "License: BSD 3-Clause License\n"
    "        \n"
    "        Copyright (c) 2024, the authors\n"
    "        \n"
    "        Redistribution and use in source and binary forms, with or without\n"
    "        modification, are permitted provided that the following conditions are met:\n"
    "        \n"
    "Classifier: Programming Language :: Python :: 3\n"
    "Requires-Python: >=3.9\n"
    "Description-Content-Type: text/markdown\n"
    "License-File: LICENSE\n"
    "Requires-Dist: torch==2.14.1\n"
    "\n"
    "# myext\n"
)


def _wheel(folder: Path, name: str, version: str, members: dict[str, bytes], meta: str) -> Path:
    dist = f"{name}-{version}.dist-info"
    return write_zip(
        folder / f"{name}-{version}-{TAG}.whl",
        [
            *members.items(),
            (f"{dist}/METADATA", meta.encode()),
            (f"{dist}/WHEEL", f"Wheel-Version: 1.0\nTag: {TAG}\n".encode()),
            (f"{dist}/RECORD", b""),
        ],
    )


def _torch_2_15_0(fakes: Fakes, folder: Path) -> Path:
    """The fake torch 2.14.1's libraries (the extension loads with them) named 2.15.0."""
    with zipfile.ZipFile(fakes.torch_new) as archive:
        members = {n: archive.read(n) for n in archive.namelist() if ".dist-info/" not in n}
    meta = "Metadata-Version: 2.1\nName: torch\nVersion: 2.15.0\n"
    return _wheel(folder, "torch", "2.15.0", members, meta)


def test_a_torch_pin_after_a_folded_licence_is_read(
    fakes: Fakes, cli_run: CliRun, tmp_path: Path
) -> None:
    """A wheel pinned ``torch==2.14.1`` against torch 2.15.0: it loads, and can-load says pip
    would refuse that torch (not "its metadata does not require torch")."""
    ext = _wheel(
        tmp_path,
        "myext",
        "1.0+pt2.14.1cu130",
        {f"myext/_ext.{EXT}": fakes.ext_so.read_bytes()},
        SETUPTOOLS_METADATA,
    )
    newer = _torch_2_15_0(fakes, tmp_path)
    code, out, err = cli_run("can-load", str(ext), "--with", str(newer), "--format", "json")
    assert code == 0, out + err
    doc = json.loads(out)
    validate_schema(doc, "can-load")
    assert doc["verdict"] == "loads"
    conflict = "metadata requires torch==2.14.1; the torch given is 2.15.0: NOT satisfied"
    assert [c.startswith(conflict) for c in doc["metadata_conflicts"]] == [True]
    assert not any("does not require torch" in f for f in doc["facts"])

    code, out, err = cli_run("can-load", str(ext), "--with", str(fakes.torch_new))
    assert code == 0, out + err
    assert "metadata requires torch==2.14.1; the torch given is 2.14.1: satisfied" in out
