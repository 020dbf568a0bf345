"""can-run: will these inputs run on those GPUs (and that driver)? (``archwheel can-run``,
``archwheel.can_run``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from archwheel.binary.scan.inputs import scan_path
from archwheel.binary.variantname import split_label
from archwheel.binary.wheelmeta import WheelMetadata, read_wheel_metadata
from archwheel.facts.catalog import CudaFacts, load_facts
from archwheel.facts.versions import CudaVersion, DriverVersion
from archwheel.verdicts.compat.gpus import Gpu
from archwheel.verdicts.compat.judge import judge_input
from archwheel.verdicts.compat.report import CanRunReport, InputVerdicts, build_report
from archwheel.verdicts.variant_claims import check_variant_file


def can_run(
    paths: Sequence[Path],
    gpus: Sequence[Gpu],
    *,
    driver: DriverVersion | None = None,
    cuda_runtime: CudaVersion | None = None,
    facts: CudaFacts | None = None,
) -> CanRunReport:
    """Scan every input and judge it on every GPU (and the driver, when given).

    The CUDA runtime an input targets is ``cuda_runtime`` when given, else what a wheel's
    metadata says (its ``nvidia-cuda-runtime`` pin, its ``+cuXYZ`` local version). A wheel's
    ``.dist-info/variant.json`` (anyone's) is judged against its device code: an installer
    picks the wheel for a GPU by those claims."""
    if facts is None:  # a library caller's: the use case loads them once, here
        facts = load_facts()
    judged: list[InputVerdicts] = []
    for path in paths:
        inventory = scan_path(path)  # InputError: missing, unreadable, not a regular file
        metadata: WheelMetadata | None = None
        if inventory.input_kind == "wheel" and path.suffix == ".whl":
            metadata = read_wheel_metadata(path)
        runtime = cuda_runtime or (metadata.cuda_runtime if metadata else None)
        source = (
            f"--cuda-runtime {cuda_runtime}"
            if cuda_runtime
            else (metadata.cuda_source if metadata else None)
        )
        verdicts = judge_input(
            inventory,
            gpus,
            driver=driver,
            runtime=runtime,
            runtime_source=source,
            name=metadata.name if metadata else None,
            version=metadata.version if metadata else None,
            facts=facts,
        )
        if inventory.variant_json is not None:
            label = split_label(path.name)[1]
            check = check_variant_file(inventory.variant_json, inventory.device_libraries, label)
            verdicts = replace(verdicts, variant=check)
        judged.append(verdicts)
    return build_report(judged, gpus, driver, facts)
