"""arch: an arch list's normalized forms and what each consumer makes of it, its coverage of
given GPUs, or the smallest list for a fleet (``archwheel arch``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archwheel.binary.scan.inputs import scan_path
from archwheel.errors import InputError
from archwheel.facts.arch_consumers import load_grammars
from archwheel.facts.arch_grammars import ConsumerView, consumer_views, parse_arch_list
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import CudaVersion
from archwheel.verdicts.compat.gpus import resolve_gpus
from archwheel.verdicts.recommend import (
    ArchForms,
    Recommendation,
    buildable_with,
    coverage_of,
    estimate_size,
)
from archwheel.verdicts.recommend import recommend as recommend_for


@dataclass(frozen=True)
class ArchFormsWithConsumers:
    """The normalized forms plus, per consumer, what to set and what it makes of the text."""

    forms: ArchForms
    views: tuple[ConsumerView, ...]
    torch: str

    def to_json_dict(self) -> dict[str, object]:
        """The ``arch`` JSON document: the normalized forms, the torch they were read for, and each
        consumer's view."""
        doc = self.forms.to_json_dict()
        doc["torch"] = self.torch
        doc["consumers"] = [v.to_json_dict() for v in self.views]
        return doc


def answer_arch(
    archlist: str | None,
    *,
    cuda: CudaVersion | None = None,
    torch: str | None = None,
    gpus: Sequence[str] = (),
    ccs: Sequence[str] = (),
    ptx: bool = False,
    variant: str = "plain",
    reference: Path | None = None,
    facts: CudaFacts | None = None,
) -> ArchFormsWithConsumers | Recommendation:
    """The forms of ``archlist`` (read as ``torch`` reads it, checked against ``cuda``) and
    what each consumer makes of it; with GPUs (names ``gpus``, compute capabilities ``ccs``)
    its coverage of them; without a list, the smallest one that serves them (``ptx``: add PTX
    of the highest target; ``variant``: plain, a or f cubins). ``reference``: a wheel whose
    per-arch bytes estimate the size of the list."""
    if facts is None:  # a library caller's: the use case loads them once, here
        facts = load_facts()
    if archlist is not None:
        archs = parse_arch_list(archlist, torch=torch, facts=facts)
        if cuda is not None:
            archs.check_toolkit(facts.toolkit(cuda), facts)
        if not gpus and not ccs:
            newest = load_grammars().for_torch(torch).torch
            views = consumer_views(archlist, archs, torch=newest, cuda=cuda, facts=facts)
            return ArchFormsWithConsumers(ArchForms.of(archs, cuda, facts), views, newest)
        resolved = resolve_gpus(gpus, ccs, facts=facts)
        rec = Recommendation(
            gpus=resolved,
            toolkit=cuda,
            variant="given",
            ptx=bool(archs.ptx_targets),
            arch_list=archs,
            coverage=coverage_of(archs, resolved, cuda),
            problems=(),
            buildable_with=buildable_with(archs, facts),
        )
        return _with_size(rec, reference)
    resolved = resolve_gpus(gpus, ccs, facts=facts)
    rec = recommend_for(resolved, cuda=cuda, ptx=ptx, variant=variant, facts=facts)
    return _with_size(rec, reference)


def _with_size(rec: Recommendation, reference: Path | None) -> Recommendation:
    if reference is None or rec.arch_list is None:
        return rec
    if not reference.is_file():
        raise InputError(f"{reference}: no such file", hint="--reference takes a wheel file")
    inventory = scan_path(reference)
    size = estimate_size(rec.arch_list, inventory, reference.stat().st_size)
    return dataclasses.replace(rec, size=size)
