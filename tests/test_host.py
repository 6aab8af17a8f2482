"""Hostile machines, simulated through the functions that read each fact (dsbench/procs/host.py): a
64 MiB /dev/shm, one core, a read-only results folder, a HOME that cannot be written, an ASCII
terminal, no python3.12, a source tree without git. Each gets one line, and what else the run
plans still runs."""

import io
import os
from pathlib import Path

import pytest

from dsbench import results
from dsbench.errors import UsageError
from dsbench.measure import suite_run
from dsbench.procs import host
from dsbench.suites import BENCHMARKS, Context, Skip, comm

MiB = 1024**2


@pytest.fixture
def small_shm(monkeypatch, tmp_path):
    """/dev/shm of 64 MiB free (Docker's default); the temp folder ``tmp_free`` bytes."""
    room = {"tmp": 10 * 1024 * MiB}
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))

    def free(folder):
        return 64 * MiB if str(folder) == host.SHM else room["tmp"]

    monkeypatch.setattr(host, "free_bytes", free)
    return room


def test_shm_cases_that_do_not_fit_a_small_dev_shm_move_to_the_temp_folder(small_shm, tmp_path):
    assert comm.shm_placement("allreduce", 1 * MiB, 2) == (host.SHM, "")
    folder, why = comm.shm_placement("allreduce", 64 * MiB, 2)
    assert folder == str(tmp_path)
    assert why == (
        f"workspace in {tmp_path}: /dev/shm has 64 MiB free, the workspace needs 384 MiB "
        "(twice its size)"
    )
    planned = [("allreduce", {"impl": i, "ranks": 2, "dtype": "float32", "size": s})
               for i in ("native", "shm") for s in (MiB, 64 * MiB)]  # fmt: skip
    assert comm.shm_line(planned) == (
        f"/dev/shm has 64 MiB free; the shm collectives at 64 MiB map their workspace in "
        f"{tmp_path} instead (page cache; their rows say so); `docker run --shm-size=1g` (or "
        "--ipc=host) gives a container more"
    )


def test_shm_cases_with_no_room_anywhere_skip_and_the_others_set_up(small_shm):
    small_shm["tmp"] = 100 * MiB
    ctx = Context(world_size=2)
    setup = BENCHMARKS["allreduce"].setup
    with pytest.raises(Skip, match=r"shared memory too small: /dev/shm has 64 MiB free.*"
                       r"--shm-size=1g"):  # fmt: skip
        setup({"impl": "shm", "ranks": 2, "dtype": "float32", "size": 64 * MiB}, ctx)
    fits = setup({"impl": "shm", "ranks": 2, "dtype": "float32", "size": MiB}, ctx)
    assert "shm_workspace" not in fits.notes
    native = setup({"impl": "native", "ranks": 2, "dtype": "float32", "size": 64 * MiB}, ctx)
    assert native.work.wire_bytes == 64 * MiB
    line = comm.shm_line([("allreduce", {"impl": "shm", "ranks": 2, "dtype": "float32",
                                         "size": 64 * MiB})])  # fmt: skip
    assert "the shm collectives at 64 MiB are skipped (no room in" in line


def test_a_big_dev_shm_says_nothing(monkeypatch):
    monkeypatch.setattr(host, "free_bytes", lambda folder: 100 * 1024 * MiB)
    planned = [("allgather", {"impl": "shm", "ranks": 2, "dtype": "float32", "size": 64 * MiB})]
    assert comm.shm_line(planned) is None


def test_ranks_sharing_one_core_are_one_line(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert host.usable_cores() == 1
    assert host.shared_cores(2) == "2 ranks share 1 core"
    assert host.shared_cores(1) is None
    ctx = Context(suite="smoke")
    from dsbench.measure.runner import plan

    lines = suite_run.host_lines(plan("smoke", ctx), ctx)
    assert [line for line in lines if "core" in line] == [
        f"2 ranks share 1 core (CPU affinity: 1 usable of {os.cpu_count()}): the multi-rank "
        "rows time ranks taking turns on a core, and say so in their notes; give the process "
        "more cores (taskset, docker --cpus) for figures comparable with other machines"
    ]
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert host.shared_cores(2) is None


def test_a_read_only_results_folder_falls_back_to_the_state_folder(monkeypatch, tmp_path):
    """./results cannot be made (a regular file stands there, as root ignores chmod)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DSBENCH_RESULTS", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "results").write_text("a file, not a folder")
    out, line = results.writable_results_dir(None)
    assert out == tmp_path / "state" / "dsbench" / "results"
    assert line == (
        f"cannot write result files in {tmp_path / 'results'} (Not a directory): writing them to "
        f"{out} instead; choose the folder with --out PATH or DSBENCH_RESULTS=PATH"
    )
    assert results.writable_results_dir("elsewhere") == (Path("elsewhere"), None)
    monkeypatch.setenv("DSBENCH_RESULTS", str(tmp_path / "mine"))
    assert results.writable_results_dir(None) == (tmp_path / "mine", None)


def test_a_home_that_cannot_be_written_moves_the_caches_to_a_temp_folder(monkeypatch, tmp_path):
    home = tmp_path / "home"
    home.write_text("a file: nothing can be made under it")
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    environ = {"MPLCONFIGDIR": "/chosen"}
    line = host.redirect_caches(environ)
    temp = host.user_temp("cache")
    assert environ == {
        "MPLCONFIGDIR": "/chosen",
        "DSBENCH_CACHE_DIR": str(temp / "dsbench_cache_dir"),
        "TRITON_CACHE_DIR": str(temp / "triton_cache_dir"),
    }
    assert line.startswith(f"HOME's caches cannot be written ({home}/.cache/dsbench (Not a ")
    assert f"dsbench's calibration and kernels, triton cache in {temp} instead" in line
    monkeypatch.setenv("HOME", str(tmp_path))
    assert host.redirect_caches({}) is None
    assert not (tmp_path / ".cache").exists()  # checked, not made


def test_an_ascii_terminal_prints_stand_ins():
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    host.printable_streams(stream)
    stream.write("0.23 ± 0.1, x1.05 × 2 é\n")
    stream.flush()
    assert raw.getvalue() == b"0.23 +- 0.1, x1.05 x 2 ?\n"


def test_no_python_312_says_how_to_get_one(monkeypatch, tmp_path):
    from dsbench.ab import sides

    monkeypatch.setattr(sides, "find_python", lambda version: None)
    with pytest.raises(UsageError) as err:
        sides._python_for("python=3.12", "3.12", tmp_path)
    assert str(err.value) == (
        "side 'python=3.12': no Python 3.12 on this machine (python3.12 is not on PATH); get "
        "one with `pyenv install 3.12` or `apt install python3.12 python3.12-venv`, or give "
        "its path: python=/usr/bin/python3.12"
    )


def test_a_tree_without_git_says_its_runs_carry_no_commit():
    lines = suite_run._source_line({"dsbench": {"version": "0.1.0", "commit": None}})
    assert len(lines) == 1 and lines[0].endswith("dsbench 0.1.0 without a commit id")
    assert suite_run._source_line({"dsbench": {"version": "0.1.0", "commit": "ab" * 20}}) == []
