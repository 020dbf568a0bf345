"""The lines of a wheel's ``variant.json`` judged against its device code, shared by the text
and Markdown of ``audit``, ``can-run`` and ``doctor``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archwheel.verdicts.variants import ClaimsCheck


def variant_lines(check: ClaimsCheck | None) -> list[str]:
    """One line per claim the device code does not back, or one line saying every claim is
    backed (none: the input has no ``variant.json``)."""
    if check is None:
        return []
    if check.ok:
        labels = ", ".join(c.label for c in check.claims) or "no label"
        return [f"variant.json ({labels}): every claim is backed by the device code"]
    return [f"unbacked variant claim: {line}" for line in check.unbacked]
