"""A build's jobs as a graph (``verdicts.compile_jobs``), from nvcc 13.0's own ``--time`` record
of one real compile (``nvcc --time t.csv -c k.cu -gencode arch=compute_80,code=sm_80 -gencode
arch=compute_90,code=sm_90``, the rows below as nvcc wrote them) and the build's timed calls."""

from __future__ import annotations

import csv
import io
import re

import pytest

from archwheel.verdicts.compile_jobs import (
    TimedCall,
    calls_from_records,
    measured_span,
    per_arch_graph,
    phases_from_rows,
    split_by_call,
    whole_call_graph,
)
from archwheel.verdicts.farm_schedule import critical_path, simulate

RECORD = """\
source file name , phase name , phase input files , phase output file , arch , tool, metric , unit
k.cu , gcc (preprocessing 4) , k.cu  , /tmp/tmpxft_00007154_00000000-5_k.cpp4.ii ,  , nvcc , 223.3280 , ms
k.cu , cudafe++ , /tmp/tmpxft_00007154_00000000-5_k.cpp4.ii  , /tmp/tmpxft_00007154_00000000-6_k.compute_90.cudafe1.cpp , compute_90 , nvcc , 438.1090 , ms
k.cu , gcc (preprocessing 1) , k.cu  , /tmp/tmpxft_00007154_00000000-8_k.compute_80.cpp1.ii , compute_80 , nvcc , 143.5710 , ms
k.cu , cicc ,  /tmp/tmpxft_00007154_00000000-8_k.compute_80.cpp1.ii  , /tmp/tmpxft_00007154_00000000-7_k.compute_80.ptx , compute_80 , nvcc , 418.2690 , ms
k.cu , ptxas , /tmp/tmpxft_00007154_00000000-7_k.compute_80.ptx  , /tmp/tmpxft_00007154_00000000-9_k.compute_80.cubin , sm_80 , nvcc , 19.8640 , ms
k.cu , gcc (preprocessing 1) , k.cu  , /tmp/tmpxft_00007154_00000000-10_k.compute_90.cpp1.ii , compute_90 , nvcc , 89.6890 , ms
k.cu , cicc ,  /tmp/tmpxft_00007154_00000000-10_k.compute_90.cpp1.ii  , /tmp/tmpxft_00007154_00000000-6_k.compute_90.ptx , compute_90 , nvcc , 250.0010 , ms
k.cu , ptxas , /tmp/tmpxft_00007154_00000000-6_k.compute_90.ptx  , /tmp/tmpxft_00007154_00000000-11_k.compute_90.cubin , sm_90 , nvcc , 13.1180 , ms
k.cu , fatbinary , /tmp/tmpxft_00007154_00000000-9_k.compute_80.cubin /tmp/tmpxft_00007154_00000000-11_k.compute_90.cubin  , /tmp/tmpxft_00007154_00000000-3_k.fatbin ,  , nvcc , 2.1260 , ms
k.cu , gcc (compiling) ,   , k.o , compute_90 , nvcc , 265.5870 , ms
 , nvcc (driver) ,  ,  ,  , nvcc , 1.2902 , ms
"""


def _rows(text: str) -> list[list[str]]:
    return [[f.strip() for f in row] for row in csv.reader(io.StringIO(text))]


def _k_call(start: float = 0.0, seconds: float = 1.9) -> TimedCall:
    return TimedCall("nvcc", start, start + seconds, "/w/k.o", ("/w/k.cu",), "k.cu")


def test_the_record_reads_every_phase_but_the_driver_row() -> None:
    phases = phases_from_rows(_rows(RECORD))
    assert [p.phase for p in phases] == [
        "gcc (preprocessing 4)",
        "cudafe++",
        "gcc (preprocessing 1)",
        "cicc",
        "ptxas",
        "gcc (preprocessing 1)",
        "cicc",
        "ptxas",
        "fatbinary",
        "gcc (compiling)",
    ]
    assert phases[3].seconds == pytest.approx(0.418269)
    assert phases[8].inputs == (
        "/tmp/tmpxft_00007154_00000000-9_k.compute_80.cubin",
        "/tmp/tmpxft_00007154_00000000-11_k.compute_90.cubin",
    )


def test_each_arch_is_its_own_chain_and_the_host_compile_comes_last() -> None:
    call = _k_call()
    link = TimedCall("link", 2.0, 2.2, "/w/k.so", ("/w/k.o",))
    graph = per_arch_graph([call, link], phases_from_rows(_rows(RECORD)))
    # a phase job is named "<call> NN <phase> <arch>": keyed here by "<phase> <arch>"
    key = {j.name: "link" if j.kind == "link" else re.sub(r"^.* \d\d ", "", j.name) for j in graph}
    jobs = {key[j.name]: j for j in graph}

    def deps(name: str) -> set[str]:
        return {key[d] for d in jobs[name].deps}

    assert deps("cicc compute_80") == {"gcc (preprocessing 1) compute_80"}
    assert deps("ptxas sm_80") == {"cicc compute_80"}
    assert deps("ptxas sm_90") == {"cicc compute_90"}
    assert deps("cudafe++ compute_90") == {"gcc (preprocessing 4)"}
    assert deps("fatbinary") == {"ptxas sm_80", "ptxas sm_90"}
    assert "fatbinary" in deps("gcc (compiling) compute_90")
    assert "cudafe++ compute_90" in deps("gcc (compiling) compute_90")
    assert deps("link") == {"gcc (compiling) compute_90"}
    # where each may run: the farm takes cicc, ptxas, cudafe++ and the host compile
    assert jobs["cicc compute_80"].where == "farm"
    assert jobs["gcc (compiling) compute_90"].where == "farm"
    assert jobs["gcc (preprocessing 1) compute_80"].where == "local"
    assert jobs["fatbinary"].where == "local"
    assert jobs["link"].where == "local"


def test_split_jobs_shorten_the_critical_path_of_one_call() -> None:
    call = _k_call(seconds=1.9)
    phases = phases_from_rows(_rows(RECORD))
    whole = whole_call_graph([call])
    split = per_arch_graph([call], phases)
    assert critical_path(whole) == pytest.approx(1.9)
    # driver + host preprocessing + cudafe++ + host compile: both arch chains (0.58 s and
    # 0.35 s up to their cubins) run beside cudafe++ (0.66 s with its preprocessing)
    driver = 1.9 - sum(p.seconds for p in phases)
    chain = driver + 0.223328 + 0.438109 + 0.265587
    assert critical_path(split) == pytest.approx(chain)
    assert simulate(split, machines=4, cores=2).wall == pytest.approx(chain)
    # the phases' time is the call's: nothing is lost or counted twice
    assert sum(j.seconds for j in split) == pytest.approx(1.9)


def test_interleaved_rows_of_two_calls_of_one_source_are_told_apart() -> None:
    rows = _rows(RECORD)[1:-1]
    other = [[f.replace("00007154", "00009999") for f in row] for row in rows]
    mixed = [r for pair in zip(rows, other, strict=True) for r in pair]
    first, second = _k_call(0.0), _k_call(0.5)
    groups = split_by_call([first, second], phases_from_rows(mixed))
    assert len(groups[0]) == len(groups[1]) == 10
    assert all(
        "00007154" in (p.output + " ".join(p.inputs)) or not p.inputs
        for p in groups[0]
        if p.phase != "gcc (compiling)"
    )


def test_calls_come_from_their_json_form_and_failed_ones_are_left_out() -> None:
    calls = calls_from_records(
        [
            {
                "kind": "compile",
                "start_ms": 0,
                "end_ms": 1500,
                "rc": 0,
                "output": "/w/a.o",
                "inputs": ["/w/a.cpp"],
                "source_as_given": "a.cpp",
            },
            {
                "kind": "compile",
                "start_ms": 10,
                "end_ms": 20,
                "rc": 1,
                "output": "/w/b.o",
                "inputs": ["/w/b.cpp"],
                "source_as_given": "b.cpp",
            },
            {
                "kind": "link",
                "start_ms": 1600,
                "end_ms": 2100,
                "rc": 0,
                "output": "/w/a.so",
                "inputs": ["/w/a.o"],
            },
        ]
    )
    assert [c.kind for c in calls] == ["compile", "link"]
    assert measured_span(calls) == pytest.approx(2.1)
    graph = whole_call_graph(calls)
    assert graph[1].deps == (graph[0].name,)
    assert (graph[0].where, graph[1].where) == ("farm", "local")


def test_an_object_written_twice_is_taken_from_the_call_that_wrote_it_last_before() -> None:
    # setuptools compiles csrc/scatter.cpp into one temporary path for two modules: each link
    # waits for the compile that wrote the object just before it, not for the other module's
    obj = "/w/build/temp/csrc/scatter.o"
    calls = [
        TimedCall("compile", 0.0, 10.0, obj, ("/w/csrc/scatter.cpp",)),
        TimedCall("link", 10.5, 11.0, "/w/cpu.so", (obj,)),
        TimedCall("compile", 11.0, 25.0, obj, ("/w/csrc/scatter.cpp",)),
        TimedCall("link", 25.5, 26.0, "/w/cuda.so", (obj,)),
    ]
    graph = whole_call_graph(calls)
    assert graph[1].deps == (graph[0].name,)
    assert graph[3].deps == (graph[2].name,)
    assert simulate(graph, machines=1, cores=2).wall == pytest.approx(14.5)
