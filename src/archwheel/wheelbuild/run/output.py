"""Where a build's output goes: the log file always, the caller's terminal through callbacks.

The build never prints: ``BuildOutput`` writes every line to the log and hands it on to the
callbacks its caller gave (the interfaces floor renders them; a library caller may give none).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TextIO

from archwheel.wheelbuild.compile.nvcc_progress import CompileProgress

_PROGRESS = re.compile(r"^\s*\[(\d+)/(\d+)\]")


class BuildOutput:
    """Where build output goes: the log file always, the terminal unless quiet.

    Lines like ``[12/345]`` (ninja, and the example backend) move the progress display; the
    CUDA compiles' progress read from nvcc's record (``compile_progress``, from the watcher's
    thread) goes to ``on_compile_progress``. Writes are made under one lock.
    ``shown`` is how an error message is written into the log (the interfaces floor escapes
    control characters, as on the terminal); build output itself is logged as it came.
    """

    def __init__(
        self,
        log: TextIO | None,
        *,
        printer: Callable[[str], None] | None = None,
        on_progress: Callable[[str, int, int], None] | None = None,
        on_stage: Callable[[str, str], None] | None = None,
        warner: Callable[[str], None] | None = None,
        shown: Callable[[str], str] = str,
        on_compile_progress: Callable[[CompileProgress], None] | None = None,
    ) -> None:
        self.log = log
        self.printer = printer
        self.warner = warner
        self.on_progress = on_progress
        self.on_stage = on_stage
        self.shown = shown
        self.on_compile_progress = on_compile_progress
        self.stage_name = ""
        self._lock = threading.RLock()

    @property
    def log_path(self) -> str | None:
        """The path of the log file, where it is one (its name); None otherwise."""
        name = getattr(self.log, "name", None)
        return name if isinstance(name, str) and not name.startswith("<") else None

    def _write(self, text: str) -> None:
        if self.log is not None:
            with self._lock:
                self.log.write(text + "\n")
                self.log.flush()

    def echo(self, text: str) -> None:
        """A command about to run (``+ docker ...``)."""
        self._write(text)
        if self.printer:
            self.printer(text)

    def compile_progress(self, progress: CompileProgress) -> None:
        """How far the CUDA compiles are (``run/compile_watch.py``): logged, then shown by
        ``on_compile_progress`` (or printed)."""
        text = f"compile: {progress.describe()}"
        with self._lock:
            self._write(text)
            if self.on_compile_progress:
                self.on_compile_progress(progress)
            elif self.printer:
                self.printer(text)

    def line(self, text: str) -> None:
        """One line of build output."""
        with self._lock:
            self._line(text)

    def _line(self, text: str) -> None:
        self._write(text)
        if self.printer:
            self.printer(text)
        m = _PROGRESS.match(text)
        if m and self.on_progress:
            self.on_progress(self.stage_name, int(m.group(1)), int(m.group(2)))

    def warn(self, text: str) -> None:
        """Something the user must see even with --quiet (said once by the caller)."""
        self._write(f"warning: {text}")
        if self.warner:
            self.warner(text)
        elif self.printer:
            self.printer(f"warning: {text}")

    def stage(self, name: str, description: str) -> None:
        """Start stage ``name``: logged, then shown by ``on_stage`` (or printed)."""
        self.stage_name = name
        self._write(f"== {name}: {description}")
        if self.on_stage:
            self.on_stage(name, description)
        elif self.printer:
            self.printer(f"== {name}: {description}")

    def failed(self, message: str) -> None:
        """The last line of the log: why the build stopped, as the terminal says it."""
        if self.log is not None:
            self.log.write(f"archwheel: error: {self.shown(message)}\n")
