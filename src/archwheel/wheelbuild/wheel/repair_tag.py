"""The platform tag of a repaired wheel, as ``auditwheel show`` judges it.

``[repair] platform`` names a manylinux tag, set only when auditwheel agrees (``platform_verdict``),
or ``"auto"``: the oldest manylinux tag auditwheel accepts for what was built (``best_platform``).
A build on Debian bookworm and one on trixie link against different glibc and libstdc++ symbol
versions (auditwheel: ``manylinux_2_34`` and ``manylinux_2_39`` for archwheel's example), so a
fixed tag fits one base only; ``auto`` follows the base, and one recipe serves both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

AUTO = "auto"
MANYLINUX = re.compile(r"^manylinux_([0-9]+)_([0-9]+)_([a-z0-9_]+)\Z")


def manylinux_glibc(tag: str) -> tuple[int, int, str] | None:
    """``manylinux_2_34_x86_64`` -> (2, 34, "x86_64"); None for any other tag."""
    m = MANYLINUX.match(tag)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def platform_verdict(
    report: Mapping[str, object], wanted: str, provided: Iterable[str]
) -> tuple[bool, str]:
    """Whether ``auditwheel show --json``'s ``report`` allows tag ``wanted``, and why not.

    Allowed when the symbol versions allow it (``sym_tag`` is ``wanted`` or an older glibc's
    tag is not needed: ``wanted``'s glibc >= ``sym_tag``'s) and every library the policy would
    have to eliminate is ``provided`` by a declared requirement or the driver.
    """
    want = manylinux_glibc(wanted)
    if want is None:
        return False, f"{wanted!r} is not a manylinux_X_Y_ARCH tag"
    sym = str(report.get("sym_tag", ""))
    have = manylinux_glibc(sym)
    if have is None:
        return False, f"the wheel's symbol versions allow no manylinux tag (auditwheel: {sym})"
    if have[2] != want[2]:
        return False, f"the wheel is for {have[2]}, not {want[2]}"
    if (want[0], want[1]) < (have[0], have[1]):
        return False, (
            f"its libraries need symbols of glibc {have[0]}.{have[1]} (auditwheel: {sym}), "
            f"newer than {wanted} allows"
        )
    upgrades = report.get("policy_upgrades", {})
    overall = str(report.get("overall_tag", ""))
    conforms = manylinux_glibc(overall)
    if conforms is not None and conforms[2] == want[2] and conforms[:2] <= want[:2]:
        return True, ""  # it conforms to an older glibc's policy already
    entry = upgrades.get(wanted) if isinstance(upgrades, dict) else None
    if not isinstance(entry, dict):
        return False, f"auditwheel knows no policy {wanted} for this wheel (overall: {overall})"
    needed = entry.get("libs_to_eliminate", [])
    extra = sorted(set(map(str, needed if isinstance(needed, list) else [])) - set(provided))
    if extra:
        return False, (
            f"{', '.join(extra)} would have to be bundled or provided by a declared requirement"
        )
    return True, ""


def best_platform(report: Mapping[str, object], provided: Iterable[str]) -> tuple[str | None, str]:
    """The oldest manylinux tag ``platform_verdict`` allows for ``report`` (``auditwheel show
    --json``) and ""; or None and why no tag is allowed.

    The candidates are the tags auditwheel names for the wheel: the policy it conforms to as it is
    (``overall_tag``) and the older ones it would reach if some libraries were provided
    (``policy_upgrades``); a library that a declared requirement (or the driver) provides counts
    as provided, as for a named tag.
    """
    given = set(provided)
    upgrades = report.get("policy_upgrades", {})
    names = {str(report.get("overall_tag", "")), str(report.get("sym_tag", ""))}
    if isinstance(upgrades, dict):
        names.update(map(str, upgrades))
    candidates = sorted(
        (found, name) for name in names if (found := manylinux_glibc(name)) is not None
    )
    if not candidates:
        return None, (
            "auditwheel names no manylinux tag for it "
            f"(overall: {report.get('overall_tag')}, symbols: {report.get('sym_tag')})"
        )
    why = ""
    for _, name in candidates:
        ok, why = platform_verdict(report, name, given)
        if ok:
            return name, ""
    return None, f"not even {candidates[-1][1]}: {why}"
