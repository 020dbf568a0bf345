"""The checked-in JSON schemas (``archwheel/interfaces/schema``) that tests validate output with."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import jsonschema


def _load(name: str) -> dict[str, Any]:
    text = resources.files("archwheel.interfaces").joinpath(f"schema/{name}").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def audit_schema() -> dict[str, Any]:
    return _load("audit.schema.json")


def manifest_schema() -> dict[str, Any]:
    return _load("manifest.schema.json")


def smoke_schema() -> dict[str, Any]:
    return _load("smoke.schema.json")


def validate_smoke(document: Mapping[str, Any]) -> None:
    """Validate a smoke report against its schema."""
    # Round-trip through strict JSON first: NaN or Infinity would not survive it.
    strict = json.loads(json.dumps(document, allow_nan=False))
    jsonschema.validate(strict, smoke_schema())


def matrix_plan_schema() -> dict[str, Any]:
    return _load("matrix-plan.schema.json")


def matrix_result_schema() -> dict[str, Any]:
    return _load("matrix-result.schema.json")


def publish_schema() -> dict[str, Any]:
    return _load("publish.schema.json")


def matrix_recheck_schema() -> dict[str, Any]:
    return _load("matrix-recheck.schema.json")


def build_events_schema() -> dict[str, Any]:
    return _load("build-events.schema.json")
