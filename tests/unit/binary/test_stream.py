"""StreamMux: parsers served from one pass, across chunk boundaries, with replay."""

from __future__ import annotations

from archwheel.binary.stream import Need, Parser, ParserOutcome, StreamMux


def reader(requests: list[Need]) -> Parser:
    got = []
    for r in requests:
        got.append((yield r))
    return got


def run(
    data: bytes, chunk: int, parsers: list[Parser]
) -> tuple[dict[object, ParserOutcome], StreamMux]:
    outcomes: dict[object, ParserOutcome] = {}
    mux = StreamMux(lambda o: outcomes.__setitem__(o.token, o), window_bytes=chunk)
    for i, p in enumerate(parsers):
        mux.add(p, i)
    for i in range(0, len(data), chunk):
        mux.feed(data[i : i + chunk])
    mux.finish()
    return outcomes, mux


DATA = bytes(range(256)) * 64  # 16 KiB, every byte's value is its offset mod 256


def test_requests_across_chunks() -> None:
    outcomes, _ = run(DATA, 100, [reader([Need(0, 10), Need(95, 10), Need(1000, 500)])])
    assert outcomes[0].value == [DATA[0:10], DATA[95:105], DATA[1000:1500]]


def test_short_read_at_end() -> None:
    outcomes, _ = run(DATA, 4096, [reader([Need(len(DATA) - 4, 64)])])
    assert outcomes[0].value == [DATA[-4:]]


def test_past_request_served_from_window_or_missed() -> None:
    outcomes, mux = run(DATA, 1024, [reader([Need(8000, 8), Need(7990, 4), Need(10, 4)])])
    # 7990 lies in the window of recent chunks; 10 was dropped long ago: kept for replay.
    assert 0 not in outcomes
    assert len(mux.missed) == 1
    replay_outcomes: dict[object, ParserOutcome] = {}
    mux2 = StreamMux(lambda o: replay_outcomes.__setitem__(o.token, o))
    mux2.resume(mux.missed[0])
    mux2.feed(DATA)
    mux2.finish()
    assert replay_outcomes[0].value == [DATA[8000:8008], DATA[7990:7994], DATA[10:14]]


def test_many_requests_in_one_chunk_do_not_recurse() -> None:
    count = 20_000

    def walker() -> Parser:
        for i in range(count):
            yield Need(i * 4, 4)
        return "done"

    data = bytes(count * 4)
    outcomes, _ = run(data, len(data), [walker()])
    assert outcomes[0].value == "done"


def test_parser_errors_are_outcomes() -> None:
    def broken() -> Parser:
        yield Need(0, 4)
        raise ValueError("bad header")

    outcomes, _ = run(DATA, 100, [broken()])
    assert isinstance(outcomes[0].error, ValueError)


def test_absurd_request_is_refused() -> None:
    def greedy() -> Parser:
        try:
            yield Need(0, 1 << 40)
        except ValueError:
            return "refused"
        return "served"

    outcomes, _ = run(DATA, 100, [greedy()])
    assert outcomes[0].value == "refused"
