"""How the compatibility verdicts look in can-run's and doctor's tables.

Apart from ``common`` so that ``archwheel audit``, which never judges compatibility, does not import
the compatibility verdicts at startup.
"""

from __future__ import annotations

from archwheel.verdicts.vocabulary import Verdict

VERDICT_STYLE = {
    Verdict.NATIVE: "green",
    Verdict.JIT: "yellow",
    Verdict.DRIVER_TOO_OLD: "red",
    Verdict.NO_KERNEL_IMAGE: "bold red",
    Verdict.LINK_ONLY: "dim",
    Verdict.NO_DEVICE_CODE: "dim",
}
VERDICT_LABEL = {
    Verdict.NATIVE: "native",
    Verdict.JIT: "JIT",
    Verdict.DRIVER_TOO_OLD: "DRIVER TOO OLD",
    Verdict.NO_KERNEL_IMAGE: "NO KERNEL IMAGE",
    Verdict.LINK_ONLY: "link-only",
    Verdict.NO_DEVICE_CODE: "no device code",
}
