"""The human rendering of ``archwheel build-files``: the count, the deviations, the additions."""

from __future__ import annotations

from rich.console import Console

from archwheel.interfaces.render.common import MAX_LIBRARY_ROWS, plain, safe
from archwheel.verdicts.build_files import BuildFilesProof


def proof_lines(proof: BuildFilesProof) -> list[str]:
    """The proof as lines: what was read, each deviation and addition, and the verdict."""
    languages = ", ".join(f"{n} {lang}" for lang, n in sorted(proof.languages.items()))
    lines = [
        f"{safe(proof.path)}: {proof.builds} build statements"
        + (f" ({languages} compile rules)" if languages else ""),
        f"requested {proof.requested}: each CUDA step must carry {' '.join(proof.expected)}"
        + (f" (PyTorch {proof.torch}" if proof.torch else " (PyTorch release unknown")
        + (f", nvcc {proof.nvcc})" if proof.nvcc else ", nvcc version unknown)"),
        f"{proof.cuda_steps} CUDA steps: {proof.exact} exact, {proof.with_additions} exact with "
        f"PyTorch's own additions, {len(proof.deviations)} deviating",
    ]
    for d in proof.deviations[:MAX_LIBRARY_ROWS]:
        said = f"  deviates: {safe(d.source or d.output)}: found {' '.join(d.found) or 'nothing'}"
        said += f", expected {' '.join(d.expected)}"
        if d.missing:
            said += f"; missing {' '.join(d.missing)}"
        if d.extra:
            said += f"; extra {' '.join(d.extra)}"
        if d.problems:
            said += f"; {'; '.join(safe(p) for p in d.problems)}"
        lines.append(said)
    if len(proof.deviations) > MAX_LIBRARY_ROWS:
        lines.append(f"  ... and {len(proof.deviations) - MAX_LIBRARY_ROWS} more deviating steps")
    for a in proof.additions[:MAX_LIBRARY_ROWS]:
        lines.append(f"  addition: {safe(a.source)}: {a.image} ({a.rule}, {a.rule_source})")
    lines.extend(f"  problem: {safe(p)}" for p in proof.problems[:MAX_LIBRARY_ROWS])
    if proof.ok:
        lines.append(f"PROVED: every CUDA step carries exactly {proof.requested}"
                     + (" plus PyTorch's own additions" if proof.additions else ""))  # fmt: skip
    elif proof.cuda_steps == 0:
        lines.append("NOT PROVED: the build file holds no CUDA compile step")
    else:
        lines.append(f"NOT PROVED: {len(proof.deviations)} CUDA steps deviate from the request")
    return lines


def render_table(proof: BuildFilesProof, out: Console) -> None:
    """Print the proof's lines."""
    for line in proof_lines(proof):
        out.print(plain(line), soft_wrap=True)
