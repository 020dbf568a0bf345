"""Where compile jobs ran, from sccache's statistics (the shape sccache 0.16.0 writes)."""

from __future__ import annotations

from archwheel.wheelbuild.compile.farm_record import FarmJobs, farm_jobs


def test_counts_per_server_local_and_errors() -> None:
    stats = {
        "compilations": 28,
        "dist_compiles": {"127.0.0.1:10502": 7, "127.0.0.1:10501": 16},
        "dist_errors": 1,
    }
    jobs = farm_jobs(stats)
    assert jobs == FarmJobs({"127.0.0.1:10502": 7, "127.0.0.1:10501": 16}, local=5, errors=1)
    assert jobs.distributed == 23
    assert jobs.to_json() == {
        "servers": {"127.0.0.1:10501": 16, "127.0.0.1:10502": 7},
        "local": 5,
        "errors": 1,
    }


def test_no_farm_or_malformed_counts_are_local_only() -> None:
    assert farm_jobs({"compilations": 4, "dist_compiles": {}, "dist_errors": 0}) == FarmJobs(
        {}, local=4
    )
    odd = {"compilations": True, "dist_compiles": ["x"], "dist_errors": -3}
    assert farm_jobs(odd) == FarmJobs()
    assert farm_jobs({"dist_compiles": {"a:1": "7", "b:2": 0}}) == FarmJobs()
