"""Audit documents in the shape `archwheel audit --format json` writes, for the diff tests."""

from __future__ import annotations

TAG = "cp311-cp311-manylinux_2_28_x86_64"


def _document(libraries: dict[str, list[tuple[str, str, int]]]) -> dict[str, object]:
    """An audit document in the shape `archwheel audit --format json` writes."""
    return {
        "schema_version": 1,
        "ok": True,
        "complete": True,
        "inputs": [
            {
                "source": f"x-1.0-{TAG}.whl",
                "complete": True,
                "metadata": {"file": f"x-1.0-{TAG}.whl"},
                "libraries": [
                    {
                        "path": path,
                        "images": [
                            {"kind": k, "arch": a, "stored_bytes": n, "uncompressed_bytes": n}
                            for k, a, n in images
                        ],
                    }
                    for path, images in libraries.items()
                ],
            }
        ],
    }
