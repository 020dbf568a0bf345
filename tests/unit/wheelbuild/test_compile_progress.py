"""The first build's wait, shown: the CUDA compiles' progress read from a growing nvcc
``--time`` record (wheelbuild/compile/nvcc_progress.py, wheelbuild/run/compile_watch.py), and
the ``--format json`` event lines that carry it (interfaces/render/build.py), validated against
interfaces/schema/build-events.schema.json. The record is a real file appended to while the
watcher's thread reads it, with the rows nvcc 13 writes (tests/unit/verdicts/test_compile_jobs.py
has one measured call)."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import jsonschema
from rich.console import Console

from archwheel.interfaces.render.build import build_output
from archwheel.wheelbuild.compile.nvcc_progress import CompileProgress, RecordProgress, RecordReader
from archwheel.wheelbuild.compile.nvcc_record import RECORD_HEADER
from archwheel.wheelbuild.run.compile_watch import CompileWatch
from archwheel.wheelbuild.run.output import BuildOutput
from tests.support.schemas import build_events_schema


def rows(source: str, archs: tuple[str, ...] = ("80", "90")) -> str:
    """The rows one nvcc call of ``source`` appends, host object last."""
    stem = source.rsplit("/", 1)[-1].removesuffix(".cu")
    out = [
        f"{source} , gcc (preprocessing 4) , {source}  , /tmp/x-5_{stem}.cpp4.ii ,  , nvcc , 223.3 , ms"
    ]
    out.append(
        f"{source} , cudafe++ , /tmp/x.ii , /tmp/x.cudafe1.cpp , compute_90 , nvcc , 438.1 , ms"
    )
    for arch in archs:
        out.append(
            f"{source} , gcc (preprocessing 1) , {source} , /tmp/x.cpp1.ii , compute_{arch} , nvcc , 143.5 , ms"
        )
        out.append(
            f"{source} , cicc , /tmp/x.cpp1.ii , /tmp/x.ptx , compute_{arch} , nvcc , 418.2 , ms"
        )
        out.append(f"{source} , ptxas , /tmp/x.ptx , /tmp/x.cubin , sm_{arch} , nvcc , 19.8 , ms")
    out.append(f"{source} , fatbinary , /tmp/x.cubin , /tmp/x.fatbin ,  , nvcc , 2.1 , ms")
    out.append(f"{source} , gcc (compiling) ,   , {stem}.o , compute_90 , nvcc , 265.5 , ms")
    out.append(" , nvcc (driver) ,  ,  ,  , nvcc , 1.29 , ms")
    return "\n".join(out) + "\n"  # fmt: skip


def append(path: Path, text: str) -> None:
    with path.open("a") as handle:  # as nvcc appends (the header written first)
        handle.write(text)


def test_progress_counts_sources_phases_and_estimates_the_rest(tmp_path: Path) -> None:
    record = tmp_path / "nvcc-time.csv"
    record.write_text(RECORD_HEADER)
    reader, state = RecordReader(record), RecordProgress(total=4)
    state.add_lines(reader.new_lines(), 0.0)
    assert state.first_row_at is None  # the header alone: no nvcc finished a phase
    text = rows("csrc/cuda/a.cu")
    cut = text.index("gcc (compiling)") + 5
    append(record, text[:cut])  # the host object's row half written: not read until it ends
    state.add_lines(reader.new_lines(), 10.0)
    first = state.progress(10.0)
    assert (first.done, first.left_s) == (0, None)
    assert "no estimate before the first file is done" in first.describe()
    append(
        record, text[cut:] + rows("csrc/cuda/b.cu") + rows("CMakeFiles/3.28/CMakeCUDACompilerId.cu")
    )
    state.add_lines(reader.new_lines(), 40.0)
    now = state.progress(40.0)
    assert (now.done, now.total) == (2, 4)  # CMake's probe is not the project's
    assert dict(now.phases) == {"cicc": 4, "ptxas": 4, "fatbinary": 2, "host": 2}
    assert now.left_s == 30.0  # 2 sources in 30 s since the first row; 2 left
    assert now.describe() == (
        "compiled 2 of 4 .cu files (cicc 4, ptxas 4, fatbinary 2, host 2), about 30 s left; "
        "nvcc's seconds: front end 1.9, cicc 1.7, ptxas 0.1, fatbinary 0.0, host 0.5"
    )  # each phase's ms summed over the project's two calls (the probe's rows not counted)
    later = CompileProgress(3, 10, now.phases, 100.0, 400.0)
    assert later.describe().endswith("about 6 min 40 s left")


def test_a_host_compiler_named_for_nvcc_still_ends_a_source() -> None:
    """With ``NVCC_CCBIN=g++-15`` (archwheel's own choice on sid) or ``-ccbin``, nvcc names the
    host phases after that compiler (``g++-15 (compiling)``, as nvcc 13.0 writes them with
    NVCC_CCBIN=g++-12 here): the source is done and its times are the host's and front end's."""
    state = RecordProgress(total=1)
    named = rows("csrc/a.cu").replace("gcc (", "g++-15 (")
    state.add_lines(named.splitlines(), 1.0)
    done = state.progress(2.0)
    assert done.done == 1 and dict(done.phases)["host"] == 1
    assert {"front end", "host"} <= dict(done.seconds).keys()


def test_dry_run_rows_count_as_phases_but_measure_no_time() -> None:
    """The cache launcher's record rows come from ``nvcc --dryrun`` (0.001-0.005 ms each): the
    phases are counted, their seconds are not, and the line says nothing of seconds."""
    state = RecordProgress(total=1)
    dry = rows("csrc/a.cu").replace("223.3 , ms", "0.0050 , ms")
    for value in ("438.1", "143.5", "418.2", "19.8", "2.1", "265.5"):
        dry = dry.replace(f"{value} , ms", "0.0010 , ms")
    state.add_lines(dry.splitlines(), 1.0)
    done = state.progress(2.0)
    assert (done.done, done.seconds) == (1, ())
    assert "seconds" not in done.describe()
    assert done.to_json()["phase_seconds"] == {}
    # a row whose time is not a plain number (the work folder is the build's) is not a time
    odd = rows("csrc/b.cu", ("90",)).replace("418.2 , ms", "１２ , ms")
    odd = odd.replace("19.8 , ms", "nan , ms").replace("2.1 , ms", "2.1 , s")
    state.add_lines(odd.splitlines(), 3.0)
    seconds = dict(state.progress(3.0).seconds)
    assert "cicc" not in seconds and "ptxas" not in seconds and "fatbinary" not in seconds
    assert abs(seconds["host"] - 0.2655) < 1e-9


def test_the_reader_follows_no_link_and_reads_no_more_than_the_record(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.csv").write_text(RECORD_HEADER + rows("a.cu"))
    link = tmp_path / "nvcc-time.csv"
    link.symlink_to(tmp_path / "elsewhere.csv")
    assert RecordReader(link).new_lines() == []
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    assert RecordReader(fifo).new_lines() == []  # never waited on
    assert RecordReader(tmp_path / "missing.csv").new_lines() == []


def test_the_watcher_reports_on_change_and_throttles_the_rest(tmp_path: Path) -> None:
    """``poll`` at a clock the test sets: a report on the first rows, on each source done, and
    otherwise at most every ``every`` seconds while rows keep coming."""
    record = tmp_path / "nvcc-time.csv"
    record.write_text(RECORD_HEADER)
    clock = [0.0]
    reports: list[CompileProgress] = []
    watch = CompileWatch(record, 3, reports.append, every=10.0, clock=lambda: clock[0])
    assert watch.poll() is None  # nothing yet
    lines = rows("a.cu").splitlines(keepends=True)
    append(record, lines[0])
    clock[0] = 1.0
    assert watch.poll() is not None  # the first rows
    append(record, lines[1])
    clock[0] = 5.0
    assert watch.poll() is None  # a phase more, 4 s after the last report
    clock[0] = 11.5
    append(record, lines[2])
    assert watch.poll() is not None  # 10 s on, rows came
    clock[0] = 30.0
    assert watch.poll() is None  # nothing new: no report
    append(record, "".join(lines[3:]))
    clock[0] = 31.0
    done = watch.poll()
    assert done is not None and done.done == 1
    assert [r.done for r in reports] == [0, 0, 1]


def test_the_watchers_thread_reads_the_record_as_it_grows(tmp_path: Path) -> None:
    record = tmp_path / "nvcc-time.csv"
    record.write_text(RECORD_HEADER)
    reports: list[CompileProgress] = []
    with CompileWatch(record, 3, reports.append, interval=0.02):
        for done, name in enumerate(("a.cu", "b.cu", "c.cu"), 1):
            append(record, rows(f"csrc/{name}"))
            deadline = time.monotonic() + 10
            while not (reports and reports[-1].done == done) and time.monotonic() < deadline:
                time.sleep(0.01)
    assert [r.done for r in reports] == [1, 2, 3]
    assert reports[-1].left_s == 0.0


def test_a_failing_display_never_fails_the_build(tmp_path: Path) -> None:
    record = tmp_path / "nvcc-time.csv"
    record.write_text(RECORD_HEADER + rows("a.cu"))

    def broken(progress: CompileProgress) -> None:
        raise RuntimeError("terminal gone")

    watch = CompileWatch(record, 1, broken)
    assert watch.poll() is None
    assert watch.reported == 1


def test_format_json_carries_stage_and_progress_events_of_the_documented_schema(
    tmp_path: Path,
) -> None:
    """What ``build --format json`` writes on standard error while the compile step runs: a
    ``stage`` event, then ``compile-progress`` events from the watcher's thread as the record
    grows, each one JSON object on one line, valid against build-events.schema.json; the
    log keeps each report as a ``compile:`` line. Quiet: the events still come."""
    stream = io.StringIO()
    console = Console(file=stream, width=80, soft_wrap=True, highlight=False)
    log = io.StringIO()
    output = build_output(log, console, None, quiet=True, events=True)
    record = tmp_path / "nvcc-time.csv"
    record.write_text(RECORD_HEADER)
    output.stage("compile", "run the build command")
    with CompileWatch(record, 2, output.compile_progress, interval=0.02) as watch:
        append(record, rows("csrc/a.cu"))
        while watch.reported < 1:
            time.sleep(0.01)
        append(record, rows("csrc/b.cu"))
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    schema = build_events_schema()
    for event in events:
        jsonschema.validate(event, schema)
    assert events[0] == {"schema_version": 1, "event": "stage", "stage": "compile",
                         "description": "run the build command"}  # fmt: skip
    progress = [e for e in events if e["event"] == "compile-progress"]
    assert [(e["done"], e["total"]) for e in progress] == [(1, 2), (2, 2)]
    assert progress[-1]["phases"] == {"cicc": 4, "ptxas": 4, "fatbinary": 2, "host": 2}
    assert progress[-1]["left_s"] == 0.0
    assert progress[-1]["phase_seconds"] == {"front end": 1.9, "cicc": 1.67, "ptxas": 0.08,
                                             "fatbinary": 0.0, "host": 0.53}  # fmt: skip
    assert "compile: compiled 2 of 2 .cu files" in log.getvalue()
    # the schema refuses what is not an event of its own
    for bad in (
        {**progress[0], "done": -1},
        {**progress[0], "extra": 1},
        {**progress[0], "phase_seconds": {"link": 1.0}},
        {**progress[0], "phase_seconds": {"cicc": -1}},
        {**events[0], "event": "x"},
    ):
        try:
            jsonschema.validate(bad, schema)
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_text_output_prints_the_progress_line_unless_quiet() -> None:
    stream = io.StringIO()
    console = Console(file=stream, width=200, highlight=False)
    output = build_output(io.StringIO(), console, None, quiet=False)
    report = CompileProgress(
        1, 4, (("cicc", 2), ("ptxas", 2), ("fatbinary", 1), ("host", 1)), 20.0, 60.0
    )
    output.compile_progress(report)
    assert stream.getvalue().strip() == (
        "compile: compiled 1 of 4 .cu files (cicc 2, ptxas 2, fatbinary 1, host 1), about 60 s left"
    )
    plain: list[str] = []
    BuildOutput(None, printer=plain.append).compile_progress(report)
    assert plain[0].startswith("compile: compiled 1 of 4")
