"""Shared-memory all-reduce / reduce-scatter / all-gather on 2, 3 and 4 gloo ranks (one host).

The cases and their tolerances are in ``tests/_shm_workers.py``: results equal the rank-order
sum bit for bit, agree across ranks byte for byte, match native gloo within stated bounds, and
no workspace file is left in /dev/shm.
"""

import pytest

from dsbench.kernels import registry, shm
from dsbench.procs.distributed import spawn_ranks

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("world", [2, 3, 4])
def test_shm_matches_native_and_ranks_agree(world):
    got = {}
    spawn_ranks(
        "tests._shm_workers:check_shm",
        world,
        {"seed": world},
        on_message=lambda rank, msg: got.__setitem__(rank, msg),
        timeout_s=240,
    )
    assert sorted(got) == list(range(world))
    failures = [f for rank in sorted(got) for f in got[rank]["failures"]]
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:20])
    assert len({msg["checks"] for msg in got.values()}) == 1
    assert got[0]["checks"] >= (120 if world == 4 else 60)


def test_shm_is_registered_for_every_collective_on_cpu_only():
    for op in ("allreduce", "reduce_scatter", "allgather"):
        impl = registry.get(op, "shm")
        assert impl.available("cpu") == (True, "")
        ok, why = impl.available("cuda")
        assert not ok and "GPU" in why
        assert impl.load() is getattr(shm, op)


def _every_rank(worker: str, world: int) -> dict:
    """What each rank sent from ``tests._shm_workers.<worker>``, checking that all did."""
    got = {}
    spawn_ranks(
        f"tests._shm_workers:{worker}",
        world,
        None,
        on_message=lambda rank, msg: got.__setitem__(rank, msg),
        timeout_s=240,
    )
    assert sorted(got) == list(range(world))
    return got


@pytest.mark.parametrize("world", [2, 3])
def test_every_cpu_allgather_works_in_place(world):
    """The engine all-gathers a bucket with the rank's own slice of the output as the input (no
    copy of it first): every registered CPU implementation must give the whole tensor then."""
    got = _every_rank("allgather_in_place", world)
    for rank, results in got.items():
        assert set(results) >= {"native", "ring", "shm"}, results
        assert all(v is True for v in results.values()), (rank, results)


def test_a_peer_that_never_arrives_ends_the_barrier_naming_it():
    """The barrier waits no longer than the process group's timeout (as gloo's would)."""
    if not shm._FLAG_BARRIER:
        pytest.skip("this host uses gloo's barrier for shm collectives")
    got = {}
    spawn_ranks(
        "tests._shm_workers:late_peer",
        2,
        {"away_s": 8},
        on_message=lambda rank, msg: got.__setitem__(rank, msg),
        timeout_s=120,
        collective_timeout_s=2,
    )
    assert "rank(s) [1]" in got[0] and "within 2 s" in got[0], got


@pytest.mark.parametrize("world", [2, 3])
def test_zero_copy_buffers_give_the_copying_paths_bits(world):
    """The buffers that the collectives read in place (kernels/shm.py, "Zero-copy buffers")."""
    got = _every_rank("zero_copy", world)
    failures = [f for rank in sorted(got) for f in got[rank]["failures"]]
    assert not failures, "\n".join(failures)
    assert all(msg["checks"] == 9 for msg in got.values())


@pytest.mark.parametrize("world", [2, 3])
def test_reduce_scatter_with_a_fused_landing(world):
    """The engine's landing fused into the sum ([Note: landing in the reduction]): divided by
    the world size and written into, or added to, the output, with its square-sum."""
    got = _every_rank("landing", world)
    failures = [f for rank in sorted(got) for f in got[rank]["failures"]]
    assert not failures, "\n".join(failures)
    assert all(msg["checks"] == 9 for msg in got.values())
