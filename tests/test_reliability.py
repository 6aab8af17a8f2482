"""Reliability: a rank that dies or hangs is named first, with its signal and step; ``--steps``
is the job's total, so re-running the same command after a kill finishes the same job with the
same losses; a kill at any point of a checkpoint save leaves the previous checkpoint loadable;
a damaged checkpoint is a one-line error naming the file; ``dsbench run`` stopped by SIGTERM
keeps the benchmarks that finished and leaves nothing behind.

Faults come from ``$DSBENCH_FAULT`` (:mod:`dsbench.procs.faults`): a rank SIGKILLs itself at a named
point, which is what an external ``kill -9`` or the OOM killer does to it."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsbench import results
from dsbench.cli import main
from dsbench.errors import UsageError
from dsbench.procs import faults
from dsbench.procs.distributed import _failure_message
from dsbench.zero.checkpoint import consolidate, read_meta, verify
from tests.conftest import make_doc, make_row

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
CONFIG = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
    "zero_optimization": {"stage": 2},
}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(CONFIG))
    return path


def _train(config, *args, fault=None):
    cmd, kw = _train_command(config, args, fault)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def _train_command(config, args, fault) -> tuple[list[str], dict]:
    """``dsbench train``'s command line on 2 ranks and its environment, with ``fault`` in
    ``$DSBENCH_FAULT``."""
    env = {k: v for k, v in os.environ.items() if k != faults.ENV}
    if fault:
        env[faults.ENV] = fault
    cmd = [str(BIN / "dsbench"), "train", "--nproc", "2", "--config", str(config)]
    cmd += ["--model", "mlp", *args]
    return cmd, {"env": env}


def _train_at_once(config, jobs: list[tuple[tuple, str | None]]):
    """``_train(config, *args, fault=fault)`` for each (args, fault) of ``jobs``, launched
    together: independent jobs, each one's start-up (mostly imports) overlapping the others'.
    Their CompletedProcesses, in order."""
    procs = []
    try:
        for args, fault in jobs:
            cmd, kw = _train_command(config, args, fault)
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, **kw))  # fmt: skip
        outputs = [p.communicate(timeout=300) for p in procs]
        return [subprocess.CompletedProcess(p.args, p.returncode, *out)
                for p, out in zip(procs, outputs, strict=True)]  # fmt: skip
    finally:
        for p in procs:
            if p.poll() is None:  # another timed out: leave nothing running
                p.kill()
                p.communicate()


KILLS_IN_SAVES = ["kill@save.shard:rank=1:step=4", "kill@save.meta:rank=0:step=4",
                  "kill@save.rename:rank=0:step=4"]  # fmt: skip


@pytest.fixture(scope="module")
def first_launches(tmp_path_factory):
    """The jobs that start from nothing, launched together (independent, each one's start-up,
    mostly imports, overlapping the others'): the reference and the kills during saves.

    - "reference": the job of 5 steps, uninterrupted, saving a checkpoint after every step:
      the losses the interrupted jobs must reproduce, and checkpoints with the bytes a job of
      that many steps leaves (the same training, the same meta), which the tests that start
      from one copy (:func:`_checkpoint_of`) instead of training it again;
    - each of KILLS_IN_SAVES: the job of 4 steps saving every 2, killed during the save of
      step 4.

    {name: (the launch, its checkpoint folder)}."""
    root = tmp_path_factory.mktemp("first-launches")
    (root / "ds_config.json").write_text(json.dumps(CONFIG))
    jobs = {"reference": (("--steps", "5", "--save-every", "1"), None)}
    jobs |= {fault: (("--steps", "4", "--save-every", "2"), fault) for fault in KILLS_IN_SAVES}
    cks = [root / f"ck{i}" for i in range(len(jobs))]
    procs = _train_at_once(root / "ds_config.json", [
        ((*args, "--checkpoint", str(ck)), fault)
        for ck, (args, fault) in zip(cks, jobs.values(), strict=True)
    ])  # fmt: skip
    return dict(zip(jobs, zip(procs, cks, strict=True), strict=True))


@pytest.fixture(scope="module")
def reference(first_launches):
    proc, ck = first_launches["reference"]
    assert proc.returncode == 0, proc.stderr
    assert sorted(_losses(proc.stdout)) == [0, 1, 2, 3, 4]
    return {"stdout": proc.stdout, "ck": ck}


def _checkpoint_of(reference: dict, step: int, ck: Path) -> None:
    """``ck`` as ``dsbench train --steps STEP --checkpoint CK`` leaves it: the reference's
    checkpoint of that step, and ``latest`` naming it."""
    ck.mkdir(parents=True)
    shutil.copytree(reference["ck"] / f"global_step{step}", ck / f"global_step{step}")
    (ck / "latest").write_text(f"global_step{step}")


def _children(pid: int) -> dict[int, str]:
    """The live processes whose parent is ``pid``, with their command lines (from /proc)."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)"
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out[int(stat.parent.name)] = cmdline
    return out


def _ranks(pid: int) -> list[int]:
    """The ranks launcher ``pid`` runs: its forkserver's children ([Note: ranks forked from a
    server] in dsbench/procs/distributed.py), or its spawned children where there is no
    forkserver."""
    children = _children(pid)
    servers = [p for p, cmd in children.items() if "forkserver" in cmd]
    if servers:
        return sorted(r for server in servers for r in _children(server))
    return sorted(p for p, cmd in children.items() if "spawn_main" in cmd)


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _losses(stdout: str) -> dict[int, str]:
    return {int(m[1]): m[2] for m in re.finditer(r"step\s+(\d+)\s+loss (\S+)", stdout)}


# ---------------------------------------------------------------------------- naming the cause


def test_the_dead_rank_comes_before_the_survivors_connection_errors():
    """The pure rule: a rank that died without a word is the cause, whatever arrived first."""
    message = _failure_message(
        2,
        errors={0: "RuntimeError: [gloo/pair.cc:553] Connection closed by peer"},
        dead={1: -signal.SIGKILL},
        silent=[],
        where=lambda r: " at step 24" if r == 1 else " at step 25",
        timeout_s=60,
    )
    assert message == (
        "rank 1 of 2 killed by SIGKILL at step 24; after that, rank 0 failed: "
        "RuntimeError: [gloo/pair.cc:553] Connection closed by peer"
    )
    # an exit code, and a real error ahead of a consequence that reached the launcher first
    assert _failure_message(3, {}, {2: 7}, [], lambda r: "", 60) == (
        "rank 2 of 3 exited with code 7 without reporting"
    )
    message = _failure_message(
        2, {0: "RuntimeError: Connection reset by peer", 1: "ValueError: bad"}, {}, [],
        lambda r: "", 60,
    )  # fmt: skip
    assert message.startswith("rank 1 of 2 failed: ValueError: bad; after that, rank 0 failed")
    # every rank raising the same (a DeepSpeed release that cannot run the step): said once
    same = "RuntimeError: Output 0 of Split is a view and is being modified inplace."
    assert _failure_message(2, {0: same, 1: same}, {}, [], lambda r: "", 60) == (
        f"rank 0 of 2 failed: {same}; after that, rank 1 failed the same way"
    )


def test_a_sigkilled_rank_is_named_and_the_same_command_finishes_the_job(
    config, tmp_path, reference
):
    ck = tmp_path / "ck"
    job = ("--steps", "5", "--checkpoint", str(ck), "--save-every", "2")
    killed = _train(config, *job, fault="kill@step:rank=1:step=3")
    assert killed.returncode == 1
    first = killed.stderr.strip().splitlines()[0]
    assert first.startswith("dsbench: error: rank 1 of 2 killed by SIGKILL at step 3"), first
    assert "rank 0 failed" not in first.split(";")[0]  # the survivor's error comes after
    assert (ck / "latest").read_text() == "global_step2"
    resumed = _train(config, *job, "--resume")  # the same command, as a scheduler re-runs it
    assert resumed.returncode == 0, resumed.stderr
    assert "from step 2" in resumed.stdout
    assert sorted(_losses(resumed.stdout)) == [2, 3, 4]  # ends at --steps, not 2 + 5
    assert _losses(killed.stdout) | _losses(resumed.stdout) == _losses(reference["stdout"])
    assert (ck / "latest").read_text() == "global_step5"
    again = _train(config, *job, "--resume")
    assert again.returncode == 0, again.stderr
    assert "nothing left to train" in again.stdout and not _losses(again.stdout)


@pytest.mark.parametrize("engine", ["dsbench", "deepspeed"])
def test_a_hung_rank_is_named_once_its_peer_times_out(config, engine):
    """On DeepSpeed too: its data-parallel groups get the ranks' --timeout, not torch's default
    30 minutes (dsbench.engines.deepspeed)."""
    if engine == "deepspeed":
        pytest.importorskip("deepspeed")
    proc = _train(config, "--steps", "3", "--timeout", "3", "--engine", engine,
                  fault="hang@step:rank=1:step=1")  # fmt: skip
    assert proc.returncode == 1
    error = proc.stderr[proc.stderr.find("dsbench: error:") :]  # after DeepSpeed's warnings
    assert error.startswith(
        "dsbench: error: rank 1 of 2 stopped responding at step 1: rank 0 gave up waiting"
    ), proc.stderr


def test_a_benchmark_rank_killed_from_outside_is_named_with_its_case(tmp_path):
    proc = subprocess.Popen(
        [str(BIN / "dsbench"), "run", "--suite", "quick", "--filter",
         "allreduce.*native.*size=(1048576|4194304)]", "--out", str(tmp_path), "--no-compare"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("[1/2]"):  # the first size is done, the ranks time the second
            break
    ranks = _ranks(proc.pid)
    assert len(ranks) == 2, lines
    os.kill(ranks[-1], signal.SIGKILL)
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 1, "".join(lines) + rest
    (path,) = tmp_path.glob("*/*.json")
    row = json.loads(path.read_text())["benchmarks"][1]
    assert row["status"] == "failed"
    assert re.match(
        r"rank [01] of 2 killed by SIGKILL \(timing allreduce\[.*size=4194304\]\)", row["error"]
    ), row["error"]


# ---------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("fault", KILLS_IN_SAVES)
def test_a_kill_during_a_save_leaves_the_previous_checkpoint_latest_and_loadable(
    first_launches, fault
):
    proc, ck = first_launches[fault]
    assert proc.returncode == 1, proc.stderr
    assert "killed by SIGKILL at step 3 (saving the checkpoint of step 4)" in proc.stderr
    assert (ck / "latest").read_text() == "global_step2"
    path, meta = verify(ck, world=2, stage=2)  # every shard complete, digests match
    assert path.name == "global_step2" and meta["global_steps"] == 2
    assert consolidate(ck)  # loads every shard


@pytest.mark.parametrize("point", ["save.shard:rank=1"])
def test_a_kill_during_a_deepspeed_save_leaves_the_previous_checkpoint_latest(tmp_path, point):
    """DeepSpeed's own save has rank 0 write ``latest`` before the other ranks' files are
    written; dsbench's adapter updates it only once all are, so the restart resumes."""
    pytest.importorskip("deepspeed")
    config = tmp_path / "ds_config.json"
    config.write_text(json.dumps(CONFIG | {"bf16": {"enabled": True}}))
    ck = tmp_path / "ck"
    job = ("--engine", "deepspeed", "--steps", "5", "--save-every", "2", "--checkpoint", str(ck))
    proc = _train(config, *job, fault=f"kill@{point}:step=4")
    assert proc.returncode == 1
    assert "killed by SIGKILL at step 3 (saving the checkpoint of step 4)" in proc.stderr
    assert (ck / "latest").read_text() == "global_step2"
    resumed = _train(config, *job, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(_losses(resumed.stdout)) == [2, 3, 4]
    assert (ck / "latest").read_text() == "global_step5"


def test_a_kill_while_replacing_the_same_tag_keeps_the_old_copy(config, tmp_path, reference):
    ck = tmp_path / "ck"
    _checkpoint_of(reference, 2, ck)  # a job of 2 steps done; the same job run again:
    proc = _train(config, "--steps", "2", "--checkpoint", str(ck),
                  fault="kill@save.swap:rank=0:step=2")  # fmt: skip
    assert proc.returncode == 1
    assert not (ck / "global_step2").exists() and (ck / ".global_step2.old").is_dir()
    assert read_meta(ck)[1]["global_steps"] == 2  # latest still loads, from the old copy
    resumed = _train(config, "--steps", "3", "--checkpoint", str(ck), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(_losses(resumed.stdout)) == [2]
    assert (ck / "latest").read_text() == "global_step3"


@pytest.fixture(scope="module")
def saved(tmp_path_factory, reference):
    """One complete checkpoint of 2 ranks at step 1 (a job of 1 step's), copied by each test
    that damages it."""
    root = tmp_path_factory.mktemp("saved")
    (root / "ds_config.json").write_text(json.dumps(CONFIG))
    _checkpoint_of(reference, 1, root / "ck")
    return root


def _truncate(ck: Path) -> None:
    shard = ck / "global_step1" / "rank00001-of-00002.pt"
    shard.write_bytes(shard.read_bytes()[:1000])


def _flip(ck: Path) -> None:
    shard = ck / "global_step1" / "rank00000-of-00002.pt"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))


def _edit_meta(ck: Path, **changes) -> None:
    meta = ck / "global_step1" / "meta.json"
    meta.write_text(json.dumps(json.loads(meta.read_text()) | changes))


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (_truncate, r"global_step1/rank00001-of-00002.pt: incomplete or altered \(1000 bytes"),
        (_flip, r"global_step1/rank00000-of-00002.pt: corrupt"),
        (lambda ck: (ck / "global_step1" / "meta.json").write_text('{"form'),
         r"global_step1/meta.json: unreadable checkpoint metadata"),
        (lambda ck: _edit_meta(ck, format="other"), r"global_step1: not a dsbench ZeRO checkp"),
        (lambda ck: _edit_meta(ck, world_size="2"), r"meta.json: 'world_size' missing or not int"),
        (lambda ck: _edit_meta(ck, version=9), r"checkpoint format version 9 is not one this"),
        (lambda ck: (ck / "global_step1" / "rank00000-of-00002.pt").unlink(),
         r"rank00000-of-00002.pt: missing \(the shard of rank 0 of 2\)"),
        (lambda ck: (ck / "latest").write_text("global_step9"), r"global_step9: checkpoint folder"),
        (lambda ck: (ck / "latest").unlink(), r"no checkpoint \('latest' file missing\)"),
    ],
)  # fmt: skip
def test_a_damaged_checkpoint_is_one_line_naming_the_file(saved, tmp_path, capsys, damage, needle):
    ck = tmp_path / "ck"
    shutil.copytree(saved / "ck", ck)
    damage(ck)
    argv = ["train", "--nproc", "2", "--config", str(saved / "ds_config.json"), "--model", "mlp",
            "--steps", "2", "--checkpoint", str(ck), "--resume"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(needle, err), err


def test_a_version_1_checkpoint_without_digests_still_loads(saved, tmp_path):
    ck = tmp_path / "ck"
    shutil.copytree(saved / "ck", ck)
    meta = json.loads((ck / "global_step1" / "meta.json").read_text())
    del meta["shards"]
    (ck / "global_step1" / "meta.json").write_text(json.dumps(meta | {"version": 1}))
    assert verify(ck, world=2, stage=2)[1]["global_steps"] == 1
    assert consolidate(ck).keys() == consolidate(saved / "ck").keys()


def test_a_bad_fault_spec_is_one_line():
    with pytest.raises(UsageError, match=r"DSBENCH_FAULT 'kil@step': expected ACTION@POINT"):
        faults.parse("kil@step")
    assert faults.parse("kill@step:rank=1:step=3") == [
        {"action": "kill", "point": "step", "rank": 1, "step": 3}
    ]


# ---------------------------------------------------------------------------- interrupted runs


def _orphan_semaphores() -> set[str]:
    """multiprocessing's named semaphores in /dev/shm that no live process has open: left
    behind. Those of other programs running meanwhile are mapped by them (by inode: the creator
    maps the file under the temporary name glibc made it with)."""
    shm = Path("/dev/shm")
    inodes = {p.stat().st_ino: p.name for p in shm.glob("sem.mp-*")} if shm.is_dir() else {}
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            lines = maps.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith("/dev/shm/sem."):
                inodes.pop(int(fields[4]), None)
    return set(inodes.values())


def test_an_interrupted_run_is_a_result_file_and_a_bad_mark_is_named():
    rows = [make_row("adamw[p=1]", [1.0, 2.0, 3.0]), make_row("adamw[p=2]", [], status="x")]
    rows[1].update(status="interrupted", reason="not run: the run was stopped by SIGTERM")
    doc = make_doc("20261201T000000Z-aaaaaa", "2026-12-01T00:00:00+00:00", rows)
    results.validate(doc | {"interrupted": {"signal": "SIGTERM", "finished": 1}}, "f.json")
    with pytest.raises(results.ResultFileError, match=r"^f.json: 'interrupted' is not"):
        results.validate(doc | {"interrupted": "yes"}, "f.json")


def test_a_results_folder_that_cannot_be_written_is_refused_before_running(tmp_path, capsys):
    (tmp_path / "file").write_text("in the way")
    assert main(["run", "--suite", "smoke", "--out", str(tmp_path / "file" / "res")]) == 2
    err = capsys.readouterr().err
    assert err == f"dsbench: error: cannot write result files in {tmp_path}/file/res/testbox: " \
                  "Not a directory\n"  # fmt: skip


def test_sigterm_of_dsbench_run_keeps_the_finished_benchmarks(tmp_path):
    out = tmp_path / "results"
    before = _orphan_semaphores()
    proc = subprocess.Popen(
        [str(BIN / "dsbench"), "run", "--suite", "smoke", "--filter", "adamw|allreduce",
         "--out", str(out), "--no-compare"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = []
    for line in proc.stderr:  # one line per finished case (stderr is not a terminal)
        lines.append(line)
        if line.startswith("[2/"):  # adamw and the first all-reduce done; ranks at work
            break
    children = list(_children(proc.pid))  # the ranks and multiprocessing's resource tracker
    proc.send_signal(signal.SIGTERM)
    stdout, rest = proc.communicate(timeout=120)
    err = "".join(lines) + rest
    assert proc.returncode == 143, err
    table = " ".join(stdout.split())  # the table: a status and its numbered note
    assert re.search(
        r"interrupted \[(\d+)\].*\[\1\] not run: the run was stopped by SIGTERM", table
    )
    assert "interrupted by SIGTERM after 2 of 4 benchmark(s)" in err
    assert "leaked" not in err  # multiprocessing's tracker had nothing to clean up
    (path,) = out.glob("*/*.json")
    doc = json.loads(path.read_text())
    assert doc["interrupted"] == {"signal": "SIGTERM", "finished": 2}
    statuses = [r["status"] for r in doc["benchmarks"]]
    assert statuses == ["ok", "ok", "interrupted", "interrupted"], statuses
    assert results.read_run(path).record.interrupted.finished == 2  # validates and loads
    assert not list(out.rglob(".tmp-*"))
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children):
        assert time.monotonic() < deadline, "ranks left running"
        time.sleep(0.2)
    assert not (_orphan_semaphores() - before)
