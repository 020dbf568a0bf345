"""Where things are: the checkout, the cache folder, the data files tests read by path."""

from __future__ import annotations

import os
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
ROOT = SUPPORT.parent.parent
CACHE = Path(os.environ.get("ARCHWHEEL_CACHE", ROOT / ".cache"))
# small files tests run or build from (tests/support/data)
DATA = SUPPORT / "data"
