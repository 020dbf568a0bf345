from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from archwheel.binary.model import FatbinContainer, FatbinEntry

_M = TypeVar("_M", bound=tuple[object, ...])
# name, file kind, size, containers, entries, debug-section bytes
_Unit = tuple[str, str, int, tuple[FatbinContainer, ...], tuple[FatbinEntry, ...], int]

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
) -> list[_Unit] | None: ...
def scan_members(
    fd: int,
    archive_size: int,
    members: Sequence[tuple[str, int, int, int, int, int, str]],
    small_max: int,
    slack: int,
    max_containers: int,
    max_entries_per_container: int,
    max_entries: int,
    max_raw_cubins: int,
    /,
) -> list[list[_Unit] | bytes | Literal[False] | None]: ...
def plain_directory(
    directory: bytes,
    start_dir: int,
    concat: int,
    archive_size: int,
    member_type: type[_M],
    unicode_path: bool,
    entries: int,
    /,
) -> tuple[list[_M], int] | None: ...
def find_magics(chunk: bytes, /) -> tuple[list[int], list[int]]: ...
def retain_freed_memory(mmap_threshold: int, trim_threshold: int, /) -> bool: ...
def trim_freed_memory() -> bool: ...
