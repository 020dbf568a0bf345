"""Worker process for parallel wheel scans: ``python -m archwheel.binary.scan.worker``.

Reads a pickled ``(wheel path, archive size, Member, deep, digest)`` on stdin, scans that
member, writes the pickled result on stdout and its progress (bytes inflated so far) as lines
on stderr. Started by ``archwheel.binary.scan.pool`` where forking is not safe.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from archwheel.binary.scan.binary import scan_member

PROGRESS_STEP = 16 << 20


def main() -> int:
    """Scan the one member described on stdin and write its pickled result on stdout."""
    path, archive_size, member, deep, digest = pickle.load(sys.stdin.buffer)  # noqa: S301 - our parent
    done = 0
    reported = 0

    def on_bytes(amount: int) -> None:
        nonlocal done, reported
        done += amount
        if done - reported >= PROGRESS_STEP:
            reported = done
            sys.stderr.write(f"{done}\n")
            sys.stderr.flush()

    result = scan_member(Path(path), archive_size, member, on_bytes, deep, digest=digest)
    sys.stdout.buffer.write(pickle.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
