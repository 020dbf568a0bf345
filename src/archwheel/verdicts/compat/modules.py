"""The modules of a library: the units the CUDA runtime picks one image from.

A fatbin *container* (one per translation unit) is a module; where the containers do not account
for every image, each section is one. The can-run judge and the variant properties both count
images per module, so the split lives here, below both.
"""

from __future__ import annotations

from dataclasses import dataclass

from archwheel.binary.model import FatbinEntry, LibraryInventory

# Sections whose images are device-link input, not loaded by the CUDA runtime.
RELOCATABLE_SECTIONS = frozenset({"__nv_relfatbin"})


@dataclass(frozen=True)
class Module:
    """The entries the runtime picks one image from: a fatbin container's, or (when containers
    do not account for every image) a whole section's."""

    section: str
    entries: tuple[FatbinEntry, ...]
    raw: bool = False  # the library's raw cubins, which it loads itself (cuModuleLoadData)

    @property
    def loadable(self) -> bool:
        """Whether the CUDA runtime loads this module (relocatable device code only feeds a device
        link)."""
        return self.section not in RELOCATABLE_SECTIONS


def split_modules(library: LibraryInventory) -> tuple[tuple[Module, ...], bool]:
    """The library's modules, and whether they are exactly its containers.

    They are when every image sits in a container and every container has images. Otherwise (a
    standalone cubin, a container whose entries could not be read) each section becomes one
    module, which can only overstate coverage, never invent a failure.
    """
    containers = sorted(library.containers, key=lambda c: (c.section, c.offset))
    contained = sum(len(c.entries) for c in containers)
    raw = library.raw_cubins
    # Raw cubins (ELF cubins outside any container, loaded by the library itself with
    # cuModuleLoadData) are one module together: the library picks among them per GPU, as the
    # runtime picks an image of a container. Which of them serve one kernel set is not recorded
    # (CUPTI keeps old archs in .rodata and new ones in .data), so this can overstate coverage;
    # beside fatbin modules it never fails a library (judge_library). Named after its sections.
    sections = ",".join(sorted({e.section for e in raw}))
    raw_modules = (Module(sections, raw, raw=True),) if raw else ()
    if contained + len(raw) == len(library.entries) and all(c.entries for c in containers):
        return tuple(Module(c.section, c.entries) for c in containers) + raw_modules, not raw
    by_section: dict[str, list[FatbinEntry]] = {}
    for entry in sorted(library.entries, key=lambda e: (e.section, e.offset)):
        by_section.setdefault(entry.section, []).append(entry)
    return tuple(Module(section, tuple(g)) for section, g in by_section.items()), False
