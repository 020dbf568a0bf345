"""Make a built wheel say which torch it was built against.

Two changes, both in the style users know from PyG and flash-attn wheels:

* a **local version label**: ``torch_scatter-2.1.2`` becomes ``2.1.2+pt2.14.1cu130`` (the
  recipe's ``[torch] local_version`` template; ``false`` leaves the version alone). The wheel's
  file name, its ``.dist-info`` (and ``.data``) folder and ``METADATA``'s ``Version`` change
  together; a version that already has a local label gets the new one appended after a dot;
* **Requires-Dist** pinning the torch the extension is ABI-bound to (``torch==2.14.1``),
  replacing an unconditional torch requirement the project declared itself.

Member contents other than ``METADATA`` are not touched; ``RECORD`` is rewritten by the
deterministic re-pack that follows (``build/reproducible.py``).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from archwheel.errors import BuildError


def new_version(version: str, label: str | None) -> str:
    """``version`` with the local label ``label`` (after a dot if it has one); as is without."""
    if not label:
        return version
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise BuildError(
            f"the built wheel's version {version!r} is not a PEP 440 version"
        ) from None
    return f"{version}.{label}" if parsed.local else f"{version}+{label}"


def rewrite_metadata(text: str, version: str, requirement: str | None) -> str:
    """``METADATA`` with ``Version`` replaced and the torch pin added to the headers."""
    head, sep, body = text.partition("\n\n")
    # Without a body the headers end with the text: its final newline is not an empty line
    # (else the pin appended below would follow one, in the body, where pip never reads it).
    lines = head.split("\n") if sep else head.rstrip("\n").split("\n")
    out: list[str] = []
    for line in lines:
        if line.startswith("Version:"):
            out.append(f"Version: {version}")
            continue
        if requirement and line.startswith("Requires-Dist:"):
            try:
                req = Requirement(line.partition(":")[2].strip())
            except InvalidRequirement:
                out.append(line)
                continue
            if canonicalize_name(req.name) == "torch" and req.marker is None:
                continue  # replaced by the exact pin below
        out.append(line)
    if requirement:
        out.append(f"Requires-Dist: {requirement}")
    return "\n".join(out) + (sep + body if sep else "\n")


def relabel_wheel(
    source: Path, target_dir: Path, label: str | None, requirement: str | None
) -> Path:
    """A copy of wheel ``source`` in ``target_dir`` with the label and the torch pin."""
    if not label and not requirement:
        return source
    parts = source.name[: -len(".whl")].split("-")
    if len(parts) < 5:
        raise BuildError(f"{source.name} is not a wheel file name (name-version-tags.whl)")
    name, version = parts[0], parts[1]
    version_new = new_version(version, label)
    old_prefix = f"{name}-{version}."
    new_prefix = f"{name}-{version_new}."
    target = target_dir / "-".join([name, version_new, *parts[2:]])
    target = target.with_name(target.name + ".whl")
    target_dir.mkdir(parents=True, exist_ok=True)
    metadata_name = f"{name}-{version}.dist-info/METADATA"
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        names = archive.namelist()
        if metadata_name not in names:
            raise BuildError(f"{source.name} has no {metadata_name}")
        for info in archive.infolist():
            data = archive.read(info)
            member = info.filename
            if member == metadata_name:
                text = rewrite_metadata(data.decode("utf-8"), version_new, requirement)
                data = text.encode("utf-8")
            top, slash, rest = member.partition("/")
            if slash and top.startswith(old_prefix) and top.endswith((".dist-info", ".data")):
                member = new_prefix + top[len(old_prefix) :] + "/" + rest
            copy = zipfile.ZipInfo(member, date_time=info.date_time)
            copy.external_attr = info.external_attr
            copy.create_system = info.create_system
            out.writestr(copy, data, compress_type=zipfile.ZIP_DEFLATED)
    return target
