"""Write a variant wheel: a copy of a wheel with its label in the file name and its
``.dist-info/variant.json``, RECORD updated; written atomically and deterministically.

Every member is copied in its order with its own zip header fields (name, time, compression,
attributes); ``variant.json`` goes in just before RECORD, dated like RECORD; RECORD gets its
line (``sha256=`` in the urlsafe base64 form, and the size) and keeps the others as they were.
The same wheel and label give the same bytes (docs/variants.md).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import shutil
import zipfile
from pathlib import Path

from archwheel.binary.variantname import with_label
from archwheel.effects.files import atomic_writer, open_regular
from archwheel.errors import InputError
from archwheel.verdicts.variants import VARIANT_JSON

MAX_RECORD_BYTES = 16 << 20  # a wheel's RECORD (torch's is about 2 MB)


def _record_line(path: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [path, f"sha256={digest}", str(len(data))]


def _dist_info(archive: zipfile.ZipFile, wheel: Path) -> str:
    records = [
        n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")
    ]
    if len(records) != 1:
        raise InputError(f"{wheel.name}: expected one .dist-info/RECORD, found {len(records)}")
    return records[0].rsplit("/", 1)[0]


def _new_record(old: bytes, variant_path: str, variant: bytes, record_path: str) -> bytes:
    rows = [
        row
        for row in csv.reader(io.StringIO(old.decode("utf-8")))
        if row and row[0] not in (variant_path, record_path)
    ]
    rows += [_record_line(variant_path, variant), [record_path, "", ""]]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8")


def write_variant_wheel(wheel: Path, label: str, variant_json: bytes, folder: Path) -> Path:
    """``folder/<wheel stem>-<label>.whl``: ``wheel`` with ``variant_json`` as its
    ``.dist-info/variant.json`` (replacing one it had) and RECORD updated."""
    target = folder / with_label(wheel.name, label)
    with open_regular(wheel) as handle, zipfile.ZipFile(handle) as source:
        dist_info = _dist_info(source, wheel)
        record_path = f"{dist_info}/RECORD"
        variant_path = f"{dist_info}/{VARIANT_JSON}"
        record_info = source.getinfo(record_path)
        if record_info.file_size > MAX_RECORD_BYTES:
            raise InputError(f"{wheel.name}: RECORD is larger than {MAX_RECORD_BYTES} bytes")
        record = _new_record(source.read(record_info), variant_path, variant_json, record_path)
        with atomic_writer(target) as out, zipfile.ZipFile(out, "w") as made:
            for info in source.infolist():
                if info.filename in (record_path, variant_path):
                    continue
                copied = _copy_info(info, info.filename)
                with (
                    source.open(info) as data,
                    made.open(
                        copied, "w", force_zip64=info.file_size >= zipfile.ZIP64_LIMIT
                    ) as sink,
                ):
                    shutil.copyfileobj(data, sink, 1 << 20)
            made.writestr(_copy_info(record_info, variant_path), variant_json)
            made.writestr(_copy_info(record_info, record_path), record)
    return target


def _copy_info(info: zipfile.ZipInfo, name: str) -> zipfile.ZipInfo:
    """A new header for ``name`` with ``info``'s time, compression and attributes (nothing
    taken from the clock or the machine: the same input makes the same bytes)."""
    copied = zipfile.ZipInfo(name, date_time=info.date_time)
    copied.compress_type = info.compress_type
    copied.external_attr = info.external_attr
    copied.create_system = info.create_system
    return copied
