"""Spawned ranks over gloo: agreed repetition counts, slowest-rank samples, failures named."""

import pytest

from dsbench.procs.distributed import RankFailure, spawn_ranks

pytestmark = pytest.mark.slow


def test_ranks_agree_and_report_the_slowest():
    got = {}
    spawn_ranks(
        "tests._dist_workers:time_allreduce",
        2,
        {"count": 1 << 16},
        on_message=lambda rank, msg: got.__setitem__(rank, msg),
        timeout_s=120,
    )
    assert set(got) == {0, 1}
    assert got[0]["n"] == got[1]["n"] >= 8
    assert got[0]["samples"] == got[1]["samples"]  # element-wise max over ranks, on every rank
    assert got[0]["ranks"] == 2


def test_a_failing_rank_is_named():
    with pytest.raises(RankFailure, match=r"rank 1 of 2 failed: ValueError: rank one is broken"):
        spawn_ranks(
            "tests._dist_workers:fail_on_rank_one", 2, None, timeout_s=60, collective_timeout_s=10
        )


def test_a_hanging_rank_is_named():
    # 12 s: room for rank 0 to start and finish on a loaded 2-core machine
    with pytest.raises(RankFailure, match=r"^rank 1 of 2 did not finish within 12 s$"):
        spawn_ranks("tests._dist_workers:hang_on_rank_one", 2, None, timeout_s=12)


def test_a_rank_stuck_outside_collectives_is_named_when_peers_time_out():
    with pytest.raises(RankFailure, match=r"rank 1 of 2 stopped responding: rank 0 gave up"):
        spawn_ranks(
            "tests._dist_workers:barrier_while_rank_one_sleeps",
            2,
            None,
            timeout_s=60,
            collective_timeout_s=3,
        )


def test_a_slow_starting_rank_is_not_a_hung_one():
    """Rank 1 imports its target 5 s later than rank 0; a 2 s collective timeout still holds
    only for collectives (the join waits for every rank: distributed.JOIN_TIMEOUT_S)."""
    got = {}
    spawn_ranks(
        "tests._slow_start_workers:barrier",
        2,
        None,
        on_message=lambda rank, msg: got.__setitem__(rank, msg),
        timeout_s=60,
        collective_timeout_s=2,
    )
    assert got == {0: "passed the barrier", 1: "passed the barrier"}
