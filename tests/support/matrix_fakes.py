"""A fake cell builder for the matrix tests: it makes, without a container, a real wheel whose
library holds exactly the cell's archs (synthetic fatbins), and can be told to fail a cell or
to leave an arch out (so that the index's audit refuses the wheel)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from archwheel.errors import BuildError
from archwheel.facts.arch import ArchList
from archwheel.matrix.plan import Cell
from archwheel.matrix.run import CellOutput
from tests.support.builders import Entry, container, elf64
from tests.support.index_wheels import make_dist


@dataclass
class FakeCellBuilder:
    """Builds cells as synthetic wheels; ``fail`` and ``drop_arch`` name cells by label."""

    fail: set[str] = field(default_factory=set)
    drop_arch: set[str] = field(default_factory=set)
    same_name: bool = False  # every cell makes the same file name (as real builds of one
    # recipe with different arch lists do)
    calls: list[Cell] = field(default_factory=list)

    def __call__(self, cell: Cell, out: Path) -> CellOutput:
        self.calls.append(cell)
        if cell.label in self.fail:
            raise BuildError(f"fake build of {cell.label} failed (as the test asked)")
        archs = ArchList.parse(cell.arch)
        entries = [Entry(sm=int(t.cc.number)) for t in sorted(archs.sass_targets)]
        entries += [
            Entry(kind=1, sm=int(t.cc.number), version=(9, 0)) for t in sorted(archs.ptx_targets)
        ]
        if cell.label in self.drop_arch:
            entries = entries[:-1]
        library = elf64([(".nv_fatbin", container(*entries))])
        tag = "".join(str(t.cc.number) for t in sorted(archs.sass_targets))
        torch = (cell.torch or "none").replace(".", "")
        local = "1" if self.same_name else f"pt{torch}sm{tag}"
        wheel = make_dist(
            out,
            cell.recipe,
            f"1.0+{local}",
            python_tag="cp" + cell.python.replace(".", ""),
            platform_tag="linux_x86_64",
            requires=(f"torch=={cell.torch}",) if cell.torch else (),
            libraries={"libkernels.so": library},
        )
        return CellOutput(wheel)
