"""The housekeeping use case: find and remove what runs that did not end cleanly left behind.

What ``archwheel clean`` does, as a call: ``leftovers.find_leftovers`` lists the containers
(label ``archwheel.owner``) and temporary folders (an ``<folder>.owner`` record beside each)
whose maker is dead (``effects.owner``), ``remove_leftovers`` removes them, and ``cleaning.clean``
makes the command's decisions (which engine, the order, the report). Nothing without
an owner record is touched, nor anything a live run or another machine made. It shares its floor
with inspection, smoke, doctor and crosscheck and imports none of them nor the use cases above
(an index's unfinished trees are ``matrix``'s: the command hands ``clean`` its reader).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archwheel._lazy import lazy_exports

if TYPE_CHECKING:
    from archwheel.housekeeping.cleaning import CleanReport, CleanRequest, UnfinishedTrees, clean
    from archwheel.housekeeping.leftovers import Leftover, find_leftovers, remove_leftovers

__all__, __getattr__, __dir__ = lazy_exports(__name__)
