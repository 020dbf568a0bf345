from collections.abc import Callable

from archwheel.binary.model import FatbinContainer, FatbinEntry

def configure(
    entry_type: type[FatbinEntry],
    container_type: type[FatbinContainer],
    describe: Callable[[int, int, int, int, int], tuple[object, object, object, object]],
    origin: object,
) -> None: ...
def scan_whole(
    data: bytes,
    max_containers: int,
    max_entries_per_container: int,
    max_entries: int,
    max_raw_cubins: int,
    /,
) -> list[tuple[str, str, int, tuple[FatbinContainer, ...], tuple[FatbinEntry, ...]]] | None: ...
