"""The grammars of Debian's source package names and versions (Debian Policy 5.6.1, 5.6.12),
which a recipe's ``[source] debian`` form is checked against before anything is fetched."""

from __future__ import annotations

import re

PACKAGE = re.compile(r"[a-z0-9][a-z0-9.+-]+\Z")  # Debian Policy 5.6.1
VERSION = re.compile(r"([0-9]+:)?[0-9A-Za-z][0-9A-Za-z.+~-]*\Z")  # Policy 5.6.12
