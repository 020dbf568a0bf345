"""The inspection use case: read wheels, libraries and environments, and judge them.

What ``archwheel audit``, ``arch``, ``can-run``, ``can-load``, ``diff``, ``manifest`` and
``verify`` do, as calls a library user makes too (``archwheel.audit`` and its siblings call
them): ``audits`` scans inputs and audits them, ``arch_lists`` answers an arch list or a fleet,
``running`` says whether inputs run on GPUs, ``loading`` whether a wheel loads next to a torch
(with the environment probes that needs), ``diffing`` compares two builds (reading audit
documents), ``manifests`` makes and verifies manifests. The judgements are ``verdicts/``'s;
this floor reads what they judge. It imports no other use case; the build's gates call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.inspection.arch_lists import ArchFormsWithConsumers, answer_arch
    from archwheel.inspection.audits import audit_inputs
    from archwheel.inspection.build_files import prove_build_files, read_build_trees
    from archwheel.inspection.diffing import diff_builds, read_side
    from archwheel.inspection.loading import can_load
    from archwheel.inspection.manifests import Manifest, make_manifest, verify_manifest
    from archwheel.inspection.python_container import ImportCheck, can_load_in_base
    from archwheel.inspection.running import can_run
    from archwheel.inspection.torch_range import TorchRangeReport, can_load_range

__all__, __getattr__, __dir__ = lazy_exports(__name__)
