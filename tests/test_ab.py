"""dsbench ab and noise: sides, alternation, merged launches, one-line errors; and an A/B of
two commits end to end whose slowdown is counted, not timed (the verdicts' power on simulated
rounds is in test_stats; on real launches it is a benchmark, `make bench-power`)."""

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks import ab_sensitivity as power
from dsbench import ab, results
from dsbench.ab import plan
from dsbench.cli import main
from dsbench.errors import UsageError
from dsbench.stats import centre, sequential
from tests.conftest import FIXTURE_RESULTS, make_doc, make_row

ROOT = Path(__file__).resolve().parents[1]


def test_rounds_alternate_abba():
    assert ab.order(3) == [0, 1, 1, 0, 0, 1]
    assert ab.order(4, sides=1) == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("nope=1", "unknown side kind 'nope'"),
        ("commit", "side 'commit' has no value after '='"),
        ("commit=no-such-ref-xyz", "unknown commit 'no-such-ref-xyz'"),
        ("deepspeed=latest", "'latest' is not a DeepSpeed version"),
        ("python=/no/such/python3", "/no/such/python3 is not an executable interpreter"),
        ("python=3.99", "no Python 3.99 on this machine .*pyenv install 3.99"),
        ("python=three", "give an interpreter path or a version such as 3.12"),
    ],
)
def test_bad_sides_are_one_line_errors(text, needle):
    with pytest.raises(UsageError, match=needle) as exc:
        ab.parse_side(text)
    assert "\n" not in str(exc.value)


def test_asv_side_names_the_environments(tmp_path):
    with pytest.raises(UsageError, match="no asv environments under"):
        ab.parse_side("asv-env=py3.11", root=tmp_path)
    for i, ds in enumerate(("0.18.3", "0.18.4")):
        env = tmp_path / ".asv" / "env" / f"hash{i}"
        env.mkdir(parents=True)
        (env / "asv-env-info.json").write_text(
            '{"tool_name": "virtualenv", "python": "3.11", '
            f'"requirements": {{"deepspeed": "{ds}", "torch": "2.13.0"}}}}'
        )
    assert set(ab.asv_envs(tmp_path)) == {
        "virtualenv-py3.11-deepspeed0.18.3-torch2.13.0",
        "virtualenv-py3.11-deepspeed0.18.4-torch2.13.0",
    }
    side = ab.parse_side("asv-env=deepspeed0.18.4", root=tmp_path)
    assert side.python == str(tmp_path / ".asv/env/hash1/bin/python")
    assert side.axes >= {"python", "deepspeed"}
    with pytest.raises(UsageError, match=r"'py3.11' matches several asv environments"):
        ab.parse_side("asv-env=py3.11", root=tmp_path)


def test_cli_bad_side_exit_2_nothing_written(tmp_path, capsys):
    out = tmp_path / "res"
    args = ["ab", "--baseline", "commit=no-such-ref-xyz", "--contender", "current"]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown commit 'no-such-ref-xyz'" in err
    assert not out.exists()
    assert main(["ab", "--baseline", "current", "--contender", "current", "--rounds", "1"]) == 2
    assert "--rounds must be at least 2" in capsys.readouterr().err
    assert main(["noise", "--filter", "(", "--out", str(out)]) == 2
    assert "not a valid regular expression" in capsys.readouterr().err


def test_shim_imports_the_trees_kernels_and_profiles(tmp_path):
    side = ab.parse_side("current")
    shim = ab.make_shim(side.tree, tmp_path / "shim")
    code = (
        "import dsbench, dsbench.kernels.registry as r, dsbench.hardware_profiles as h; "
        "print(dsbench.__file__); print(r.__file__); print(h.__file__)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env=ab.side_environ(side, shim), check=True)  # fmt: skip
    files = [Path(x).resolve() for x in proc.stdout.split()]
    assert files == [
        ROOT / "dsbench" / "__init__.py",
        ROOT / "kernels" / "registry.py",
        ROOT / "hardware_profiles" / "__init__.py",
    ]


def _launch(tmp_path, k, rows):
    doc = make_doc(f"20261130T00000{k}Z-aaaaa{k}", f"2026-11-30T00:00:0{k}+00:00", rows)
    path = results.write_run(doc, root=tmp_path / str(k))
    la = ab.Launch(side=0, index=k, order=2 * k, path=path, started=doc["created"], wall_s=1.0)
    la.run = results.read_run(path)
    return la


def test_merged_launches_keep_each_launchs_samples(tmp_path):
    first, second = make_row("a", [1.0, 2.0, 3.0]), make_row("a", [4.0, 4.0])
    # a training row's memory: peaks, and the case measured alone in fresh ranks (nested)
    first["memory"] = {"host_peak_rss_bytes": 5, "fresh_process": {"host_peak_rss_bytes": 3}}
    second["memory"] = {"host_peak_rss_bytes": 4, "fresh_process": {"host_peak_rss_bytes": 7}}
    launches = [
        _launch(tmp_path, 0, [first, make_row("b", [1.0, 1.0])]),
        _launch(tmp_path, 1, [second, make_row("b", [], status="failed")]),
    ]
    doc = ab.merge_launches(launches, label="x", purpose="noise").to_json()  # as written
    results.validate(doc, "<merged>")
    a, b = doc["benchmarks"]
    assert a["samples"] == [1.0, 2.0, 3.0, 4.0, 4.0]
    assert a["rounds"] == [{"launch": 0, "n": 3}, {"launch": 1, "n": 2}]
    assert a["value"] == pytest.approx(centre([[1.0, 2.0, 3.0], [4.0, 4.0]]))  # sqrt(2 * 4)
    assert a["launch_values"] == [2.0, 4.0]
    assert a["memory"] == {"host_peak_rss_bytes": 5, "fresh_process": {"host_peak_rss_bytes": 7}}
    assert a["launch_memory"] == [first["memory"], second["memory"]]  # for compare to judge
    merged = results.validate(doc, "<merged>").benchmarks[0]
    assert merged.peak_memory() == ("peak RSS, case alone in fresh ranks", [3.0, 7.0])
    assert b["status"] == "failed" and b["error"].startswith("launch 1: boom")
    assert [x["order"] for x in doc["launches"]] == [0, 2] and doc["purpose"] == "noise"
    assert results.row_rounds(a) == [[1.0, 2.0, 3.0], [4.0, 4.0]]


def test_merged_rows_keep_the_key_order_of_their_launches():
    """Merging writes a row's keys where its launches had them, then launch_values, memory,
    launch_memory (where a launch measured memory) and launch_drifts (a soak row's drift)."""
    soak = sorted(FIXTURE_RESULTS.rglob("*-soak-dsbench-zero2.json"))[0]
    launches = []
    for k in range(2):
        la = ab.Launch(side=0, index=k, order=k, path=soak, started="2026-12-01T00:00:00+00:00")
        la.run = results.read_run(soak)
        launches.append(la)
    merged = ab.merge_launches(launches).to_json()["benchmarks"]
    for before, after in zip(launches[0].run.record.to_json()["benchmarks"], merged, strict=True):
        added = ["launch_values", "memory", *(["launch_memory"] if before.get("memory") else []),
                 *(["launch_drifts"] if "drift" in before else [])]  # fmt: skip
        assert list(after) == list(before) + [k for k in added if k not in before]
    failed = ab.merge_row([(0, launches[0].run.rows[merged[0]["id"]]), (1, None)],
                           centre, None, None).to_json()  # fmt: skip
    assert list(failed) == [*ab.HEADER_KEYS, "status", "error"]


@pytest.mark.slow
def test_an_ab_of_two_commits_calls_a_counted_slowdown_worse(tmp_path):
    """`dsbench ab --launches` until decided end to end over two commits of a throwaway clone:
    worktrees, alternating launches, a look after each pair of rounds, merged files, compare's
    verdict. The contender's AdamW step costs 20% more on the timing core's clock, which counts
    instead of measuring (benchmarks.ab_sensitivity's counted hook), so the verdict depends on
    the machinery alone: worse at 1/1.2, decided at the first look (3 rounds a side). What real
    launches of a real slowdown give on a machine is a benchmark: `make bench-power`
    (benchmarks/ab_sensitivity.py)."""
    repo = power.make_commits(ROOT, tmp_path, [0.2], counted=True)
    out = tmp_path / "twenty"
    out.mkdir()
    (row,) = power.measure(
        repo, 0.2, None, out, "--launches", "--max-rounds", "5", "--max-time", "60m"
    )  # a loaded machine's launches take minutes
    assert row["change"] == "worse", row
    assert float(row["ratio"]) == pytest.approx(1 / 1.2, rel=1e-3), row
    written = sorted((out / "results").rglob("*.json"))
    assert len(written) == 2
    runs = [results.read_run(p) for p in written]
    assert {r.ab.side for r in runs} == {"baseline", "contender"}
    assert all(len(r.launches) == 3 and r.ab.rounds == 3 for r in runs)
    seq = runs[0].ab.sequential.to_json()
    first = sequential.looks(5)[0]
    assert seq == {"spending": "pocock", "max_rounds": 5, "looks": 3, "level": first.level,
                   "stopped": "decided", "max_reps": None}  # fmt: skip
    assert os.path.isdir(repo / ".dsbench" / "worktrees")


@pytest.mark.slow
def test_block_rounds_pair_the_sides_and_call_a_counted_slowdown_worse(tmp_path):
    """`dsbench ab` with its default design end to end (block rounds until decided): per round
    a worker of each commit,
    the two timing AdamW in turns (8 pairs of blocks), merged files whose rows keep each
    round's blocks, compare judging block pairs. The step's cost is counted (x1.2 on the
    contender), so every pair says 1/1.2 and the first look decides."""
    repo = power.make_commits(ROOT, tmp_path, [0.2], counted=True)
    out = tmp_path / "blocks"
    out.mkdir()
    (row,) = power.measure(repo, 0.2, None, out, "--block-time", "0", "--max-rounds", "5",
                           "--max-time", "60m")  # fmt: skip
    assert row["change"] == "worse", row
    assert float(row["ratio"]) == pytest.approx(1 / 1.2, rel=1e-3), row
    assert row["basis"].startswith("paired t(2)"), row
    runs = [results.read_run(p) for p in sorted((out / "results").rglob("*.json"))]
    got = {(r.ab.pairing, r.ab.block_pairs, r.ab.block_time_s, r.ab.rounds) for r in runs}
    assert got == {("blocks", 8, 0.0, 3)}
    assert (row["design"], row["stopped"]) == ("blocks", "decided")
    assert power.summary_line(power.summary(0.2, [row])).startswith(
        "slowdown 0.2: worse on every row (1/1) in "
    )
    (case,) = [r for r in runs[0].rows.values() if r.ok]
    blocks = case.launch_blocks()
    assert [len(b) for b in blocks] == [ab.BLOCK_PAIRS] * 3  # a round's blocks kept apart
    assert {len(x) for b in blocks for x in b} == {ab.blocks.block_reps(1.2e-3)}  # 42 reps
    assert max(la.order for r in runs for la in r.launches) == 5
    # idle workers wait passively, and the sides' environment says so
    assert {r.env["env_vars"].get("OMP_WAIT_POLICY") for r in runs} == {"PASSIVE"}


def test_blocks_refuse_a_soak_and_sides_that_share_no_case(tmp_path, capsys):
    """--blocks with --soak, or sides whose workers share no case: one line, exit 2, nothing
    written."""
    sides = ["ab", "--baseline", "current", "--contender", "current", "--blocks",
             "--out", str(tmp_path)]  # fmt: skip
    assert main([*sides, "--soak=--model mlp"]) == 2
    assert "--blocks times a suite's cases in turns" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.json"))

    class Said:  # a worker that only says hello
        def __init__(self, cases, skipped):
            self.hello = {"cases": cases, "skipped": skipped}

        def read(self):
            return self.hello

    workers = [Said(["a"], {"b": "DeepSpeed is not installed"}), Said(["b"], {})]
    with pytest.raises(UsageError, match=r"no case to time in turns \(DeepSpeed is not installed"):
        ab.blocks._one_round(workers, 0, ab.BLOCK_PAIRS, check=True)


def test_a_case_with_short_blocks_gets_the_pairs_that_fit_in_its_block_time():
    """[Note: pairs by time]: with 3 s, 50 ms blocks get 30 pairs, a training step's 0.5 s
    blocks the 8 pairs at least, 1 ms blocks no more than the cap; the round asks for that
    many."""
    from dsbench.ab.blocks import MAX_PAIRS, case_pairs

    assert case_pairs(0.05, 8, 3.0) == 30 and case_pairs(0.5, 8, 3.0) == ab.BLOCK_PAIRS
    assert case_pairs(0.05) == ab.BLOCK_PAIRS  # the default: 8 pairs a case
    assert case_pairs(0.001, 8, 3.0) == MAX_PAIRS

    class Timer:  # a worker whose case takes 2.5 ms a call
        def __init__(self):
            self.blocks = 0

        def read(self):
            return {"cases": ["a"], "skipped": {}}

        def ask(self, op, **kw):
            self.blocks += op == "block"
            return {"per_call": 2.5e-3} if op == "setup" else {}

    workers = [Timer(), Timer()]
    ab.blocks._one_round(workers, 0, ab.BLOCK_PAIRS, check=True, turn_s=2.0)
    reps = ab.blocks.block_reps(2.5e-3)  # 20 reps and 2 untimed calls: 55 ms a block
    assert [w.blocks for w in workers] == [case_pairs((reps + 2) * 2.5e-3, 8, 2.0)] * 2 == [18] * 2


def _plan(*argv: str):
    """``dsbench ab``'s plan from its flags (:func:`dsbench.cli.ab.plan_of`)."""
    from dsbench.cli import build_parser
    from dsbench.cli.ab import plan_of

    args = build_parser(["ab"]).parse_args(["ab", "--baseline", "current", "--contender",
                                            "current", *argv])  # fmt: skip
    return plan_of(args)


@pytest.mark.parametrize(
    ("argv", "design", "stopping"),
    [
        # the default: in turns, until decided, up to the time limit
        ([], "Blocks", plan.UntilDecided()),
        (["--blocks", "--until-decided"], "Blocks", plan.UntilDecided()),  # spelled out
        (["--soak=--model mlp"], "Soak", plan.UntilDecided()),  # a soak: a launch is the unit
        (["--launches"], "Launches", plan.UntilDecided()),
        (["--rounds", "6"], "Blocks", plan.FixedRounds(6)),
        (["--launches", "--rounds", "6"], "Launches", plan.FixedRounds(6)),  # before issue 40
        (["--max-rounds", "40"], "Blocks", plan.UntilDecided(max_rounds=40)),
        (
            ["--max-time", "90s", "--spending", "obrien-fleming"],
            "Blocks",
            plan.UntilDecided(max_time="90s", spending="obrien-fleming"),
        ),
    ],
)
def test_the_design_and_stopping_rule_by_default_and_by_flag(argv, design, stopping):
    """[Note: the design of an A/B]: block rounds unless a launch is the unit or --launches
    says so; until decided, stopped by a 10-minute limit and no round cap, unless --rounds."""
    got = _plan(*argv)
    assert (type(got.design).__name__, got.stopping) == (design, stopping)
    assert plan.UntilDecided() == plan.UntilDecided(max_time="10m", spending="pocock")
    assert plan.planned_rounds(got.stopping) == (6 if "6" in argv else 40 if "40" in argv else None)


def test_each_design_holds_only_its_own_fields():
    """A soak has no suite, launch rounds no block time; --blocks given is a required design."""
    suite = plan.Suite(name="quick", filter="adamw", device="cpu")
    assert _plan("--filter", "adamw", "--device", "cpu").design == plan.Blocks(suite)
    assert _plan("--blocks", "--block-time", "3").design.block_time == 3.0
    assert _plan("--blocks").design.required and not _plan().design.required
    assert _plan("--launches", "--filter", "adamw", "--device", "cpu").design == plan.Launches(
        suite
    )
    assert _plan("--soak=--model mlp --steps 5").design == plan.Soak(("--model", "mlp", "--steps",
                                                                      "5"))  # fmt: skip
    assert {f.name for f in dataclasses.fields(plan.Soak)} == {"args"}
    assert {f.name for f in dataclasses.fields(plan.Launches)} == {"suite"}
    assert _plan("--soak=--model mlp").design.verb == ["soak", "--model", "mlp"]
    assert _plan().design.suite.worker_argv == ["--suite", "quick", "--device", "auto"]


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: plan.FixedRounds(1), "--rounds must be at least 2, got 1"),
        (lambda: plan.UntilDecided(max_rounds=2), "--max-rounds must be at least 3, got 2"),
        (lambda: plan.UntilDecided(max_time="ten"), "--max-time 'ten': give a duration such"),
        (lambda: plan.UntilDecided(max_time="0"), "--max-time '0': give a duration such as"),
        (
            lambda: plan.Blocks(plan.Suite(name="quick"), block_time=-1),
            "--block-time -1: give 0 to 600 seconds (default 0)",
        ),
        (lambda: plan.Soak.parse("--model mlp", filter="adamw"), "does not apply to --soak"),
        (lambda: plan.Soak.parse("--out=x"), "--soak: leave out --out"),
        (lambda: plan.Soak.parse("'unclosed"), "--soak ''unclosed': No closing quotation"),
    ],
)
def test_a_plan_out_of_range_cannot_be_built(build, needle):
    """The plan's types check their own values, with the flags' one-line errors."""
    with pytest.raises(UsageError) as exc:
        build()
    assert needle in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["--rounds", "6", "--until-decided"],
            "--rounds 6 runs a fixed number of rounds; "
            "--until-decided belongs to an A/B until decided (the default): give one of them",
        ),
        (["--rounds", "6", "--max-time", "5m"], "--max-time belongs to an A/B until decided"),
        (["--rounds", "6", "--max-rounds", "9"], "--max-rounds belongs to an A/B until decided"),
        (["--rounds", "6", "--spending", "pocock"], "--spending belongs to an A/B until"),
        (["--blocks", "--launches"], "--blocks and --launches are two designs: give one"),
        (["--blocks", "--soak=--model mlp"], "--blocks times a suite's cases in turns"),
        (["--launches", "--block-time", "3"], "it does not apply to --launches"),
        (["--soak=--model mlp", "--block-time", "3"], "it does not apply to --soak"),
        (["--block-time", "-1"], "--block-time -1: give 0 to 600 seconds"),
        (["--block-time", "700"], "--block-time 700: give 0 to 600 seconds"),
        (["--max-rounds", "2"], "--max-rounds must be at least 3, got 2"),
        (["--max-time", "ten"], "--max-time 'ten': give a duration such as 90s"),
        (["--rounds", "1"], "--rounds must be at least 2, got 1"),
        (["--soak=--model mlp", "--filter", "adamw"], "it does not apply to --soak"),
        (["--soak=--out=x"], "--soak: leave out --out; dsbench ab writes the rounds' files"),
        (["--max-time", "ten", "--soak=--out=x"], "--max-time 'ten'"),  # the flags' order kept
        (["--block-time", "-1", "--max-time", "ten"], "--block-time -1"),
    ],
)
def test_contradicting_flags_are_one_line_exit_2(tmp_path, capsys, argv, needle):
    ab_argv = ["ab", "--baseline", "current", "--contender", "current", "--out", str(tmp_path)]
    assert main([*ab_argv, *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert not list(tmp_path.rglob("*.json"))


def _launches(walls: list[float]) -> list[list[ab.Launch]]:
    return [[ab.Launch(side=s, index=k, order=2 * k + s, path=Path(f"{k}-{s}"), wall_s=w / 2)
             for k, w in enumerate(walls)] for s in (0, 1)]  # fmt: skip


def test_until_decided_plans_its_looks_from_the_time_left_not_a_round_cap():
    """[Note: looks over an open horizon]: 10 s rounds with 10 minutes left plan ~60 rounds a
    side and do not stop at 20; --max-rounds caps the horizon and stops there; a round that
    would end past the time limit makes this one the last."""
    from dsbench.stats.stopping import Looks

    def walls(rounds: int) -> list[list[float]]:
        return [[5.0] * rounds, [5.0] * rounds]

    until = Looks("pocock", deadline=600.0)
    final, horizon = until.horizon(walls(20), now=0.0)
    assert not final and horizon == 80  # 20 run, 60 more fit in the 10 minutes left
    capped = Looks("pocock", deadline=600.0, max_rounds=20)
    assert capped.horizon(walls(12), now=0.0) == (False, 20)
    assert capped.horizon(walls(20), now=0.0) == (True, 20) and capped.stopped == "max-rounds"
    assert until.horizon(walls(21), now=595.0) == (True, 21) and until.stopped == "max-time"
    look, final = Looks("pocock", deadline=600.0, max_rounds=3).due(walls(3), now=0.0)
    assert final and look.rounds == 3 and until.look == 0


def test_the_rounds_until_decided_record_their_rule():
    from dsbench.ab.looks import Rounds

    rounds = Rounds(plan.UntilDecided(max_time="5m", spending="obrien-fleming"),
                    plan.Blocks(plan.Suite(name="quick")), factor=1.05)  # fmt: skip
    block = rounds.block()
    assert (block.spending, block.stopped, block.looks, block.max_reps) == (
        "obrien-fleming", "max-time", 0, None)  # fmt: skip
    assert rounds.looks.deadline - time.monotonic() == pytest.approx(300.0, abs=5.0)


def test_max_reps_are_the_most_any_case_is_worth():
    from dsbench.stats.stopping import max_reps

    rng = np.random.default_rng(0)
    sides = [[list(m * np.exp(rng.normal(0, 0.01, 50))) for m in (1e-3, 1.2e-3)]] * 2
    n = max_reps([sides], launch_s=2.0)
    assert n == sequential.repetitions(sides, 2.0) and 8 <= n < 1000
    assert max_reps([sides, [[[], [1.0]], [[1.0], [1.0]]]], launch_s=2.0) is None  # no reps
    assert max_reps([], launch_s=2.0) is None


def test_a_side_that_cannot_take_turns_gets_launch_rounds_or_a_one_line_error(tmp_path):
    """A commit from before the worker: the default design falls back to launch rounds for
    it, saying why; --blocks with it is an error."""
    from dsbench.ab.pair import cannot_take_turns, turns_or_launches

    old = ab.SideEnv("commit=old", "commit", sys.executable, tmp_path)
    current = ab.parse_side("current")
    assert cannot_take_turns(current) is None
    design = _plan().design
    assert turns_or_launches(design, [current, current]) == (design, "")
    fallback, said = turns_or_launches(design, [current, old])
    assert said == ("side 'commit=old' has no dsbench/ab/worker.py (commits before December "
                    "2026), so it cannot take turns: launch rounds")  # fmt: skip
    assert fallback == plan.Launches(design.suite)
    with pytest.raises(UsageError, match=r"^--blocks: side 'commit=old' has no .*leave out --bl"):
        turns_or_launches(_plan("--blocks").design, [old, current])


def test_training_steps_take_their_memory_alone_in_fresh_ranks_every_block_round():
    """Which cases a block round gives a fresh launch of ranks for their peak memory: the
    training steps (interleaved, multi-rank), not AdamW or the collectives; the worker's row
    carries it as memory.fresh_process, which compare judges over the rounds."""
    from dsbench.ab.worker import fresh_memory_cases, with_fresh_memory
    from dsbench.records import Memory, Row
    from dsbench.records.rows import FRESH_RSS, case_peak
    from dsbench.suites import BENCHMARKS

    train = [b for b in BENCHMARKS if b.startswith("train_step")]
    assert fresh_memory_cases([f"{b}[model=mlp]" for b in train]) == len(train) > 0
    ids = ["adamw[impl=torch,params=1000000]", "allreduce[impl=ring,ranks=2]", "nope[x=1]"]
    assert fresh_memory_cases(ids) == 0
    row = Row(id="t", name="t", params={}, status="ok", memory=Memory(host_peak_rss_bytes=9))
    assert case_peak(row.memory) is None  # a resident worker's set holds earlier cases
    alone = with_fresh_memory(row, {"host_peak_rss_bytes": 5 * 2**20})
    assert case_peak(alone.memory) == (FRESH_RSS, 5 * 2**20)
    assert with_fresh_memory(row, None) is row


def test_blocks_time_cases_that_spawn_ranks_in_resident_groups(tmp_path):
    """A collective in block rounds: each side's worker keeps a group of 2 ranks resident and
    feeds it the coordinator's commands ([Note: ranks in turns]); every round keeps its 8 pairs
    of blocks, each block the slowest rank's times."""
    out = tmp_path / "ranks"
    argv = ["ab", "--baseline", "current", "--contender", "current", "--blocks", "--rounds", "2",
            "--block-time", "0", "--filter", r"allreduce\[.*impl=ring,ranks=2,size=1048576",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    runs = [results.read_run(p) for p in sorted(out.rglob("*.json"))]
    assert {(r.ab.pairing, r.ab.rounds) for r in runs} == {("blocks", 2)}
    for run in runs:
        (row,) = run.rows.values()
        assert row.ok, row
        assert [len(b) for b in row.launch_blocks()] == [ab.BLOCK_PAIRS] * 2


@pytest.mark.slow
def test_a_block_round_takes_a_training_steps_memory_alone_in_fresh_ranks(tmp_path):
    """A training step in a block round: timed by each side's resident ranks, and its peak
    memory taken at its set-up alone in fresh ranks, which the row carries (so compare judges
    its memory row over the rounds, as over launch rounds)."""
    from dsbench.records.rows import FRESH_RSS, case_peak

    case = (r"^train_step\[comm=native,dtype=float32,engine=dsbench,grad_accum=2,kernels=torch,"
            r"micro_batch=16,model=mlp,ranks=2,stage=1\]$")  # fmt: skip
    side = ab.parse_side("current")
    (base,), (cont,) = ab.run_block_rounds(
        [side, side], rounds=1, worker_argv=["--suite", "training", "--filter", case],
        workdir=tmp_path, progress=lambda line: None,
    )  # fmt: skip
    for launch in (base, cont):
        (row,) = launch.run.rows.values()
        assert row.ok, row
        kind, peak = case_peak(row.memory)
        assert kind == FRESH_RSS and peak > 50 * 2**20


def test_round_files_are_kept_when_anything_fails_after_the_rounds(capsys):
    from dsbench.ab import launch_folder

    with pytest.raises(RuntimeError), launch_folder("ab") as kept:
        (kept / "000-baseline.json").write_text("{}")
        raise RuntimeError("merge failed")
    assert (kept / "000-baseline.json").is_file()
    assert f"kept in {kept}" in capsys.readouterr().err
    with launch_folder("ab") as done:
        (done / "000-baseline.json").write_text("{}")
    assert not done.exists()


def test_an_edit_to_the_tree_during_the_rounds_stops_the_ab(tmp_path):
    """deepspeed=/python=/current sides run the checkout itself: a source edited between (or
    during) rounds would make the rounds measure different code."""
    for top in ab.SOURCE_DIRS:
        (tmp_path / top / "__pycache__").mkdir(parents=True)
        (tmp_path / top / "a.py").write_text("x = 1\n")
    before = ab.tree_fingerprint(tmp_path)
    assert sorted(before) == ["dsbench/a.py", "hardware_profiles/a.py", "kernels/a.py"]
    (tmp_path / "dsbench" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"compiled")
    (tmp_path / "notes.txt").write_text("not imported by a round")
    ab.check_unchanged(tmp_path, before)  # bytecode and other files do not count
    (tmp_path / "kernels" / "a.py").write_text("x = 2\n")
    (tmp_path / "dsbench" / "b.py").write_text("")
    with pytest.raises(
        ab.LaunchFailed, match=r"changed during the rounds \(dsbench/b.py, kernels/a.py\)"
    ):
        ab.check_unchanged(tmp_path, before)


def test_an_interrupted_ab_lets_the_rounds_process_finish_its_file(tmp_path):
    """SIGTERM to `dsbench ab` reaches the round's `dsbench run` as SIGTERM (it writes the
    cases it finished and stops its ranks), not as SIGKILL; then the interrupt goes on."""
    import signal
    import threading
    import time

    from dsbench.procs.interrupts import Interrupted, signals_raise

    marker = tmp_path / "partial.json"
    child = tmp_path / "round.sh"
    child.write_text(
        f"trap 'echo finished > {marker}; exit 143' TERM\n"
        "echo started; while :; do sleep 0.05; done\n"
    )
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    t0 = time.perf_counter()
    with signals_raise(), pytest.raises(Interrupted) as exc:
        timer.start()
        ab.run_child(["sh", str(child)], cwd=tmp_path)
    assert exc.value.exit_code == 143
    assert marker.read_text() == "finished\n"
    assert time.perf_counter() - t0 < 10


def _metric(value: float, ci99: list[float]) -> dict:
    return {"value": value, "unit": "u", "direction": "higher", "ci99": ci99}


def test_merged_secondary_metrics_describe_one_value(tmp_path):
    """A secondary metric over launches: its geometric mean, the 99% t-interval of that mean
    over the launches (which holds it), and % of peak of that same value; the first launch's
    interval beside the mean had put a merged value outside its own interval."""
    from scipy import stats as st

    launches = []
    for k, eff in enumerate((0.50, 0.60, 0.70)):
        row = make_row("a", [1.0, 1.0])
        peak = {"kind": "flops:float32", "value": 10.0, "unit": "TFLOP/s"}
        row["metrics"] = {
            "m": _metric(1.0, [1.0, 1.0]),
            "step_efficiency": _metric(eff, [eff - 0.01, eff + 0.01]),
            "tflops": {
                **_metric(2.0 * (k + 1), [1.0, 9.0]),
                "pct_of_peak": 20.0 * (k + 1),
                "peak": peak,
            },
        }
        launches.append(_launch(tmp_path, k, [row]))
    doc = ab.merge_launches(launches).to_json()
    results.validate(doc, "<merged>")
    eff = doc["benchmarks"][0]["metrics"]["step_efficiency"]
    logs = np.log([0.5, 0.6, 0.7])
    half = st.t.ppf(0.995, 2) * logs.std(ddof=1) / np.sqrt(3)
    assert eff["value"] == pytest.approx(np.exp(logs.mean()))
    assert eff["ci99"] == pytest.approx([np.exp(logs.mean() - half), np.exp(logs.mean() + half)])
    assert eff["ci99"][0] < eff["value"] < eff["ci99"][1]
    flops = doc["benchmarks"][0]["metrics"]["tflops"]
    assert flops["pct_of_peak"] == pytest.approx(100 * flops["value"] / 10.0)


def test_commit_refs_resolve_in_the_checkout_the_user_stands_in(tmp_path, monkeypatch):
    """From a second clone with a commit of its own, commit=HEAD is that clone's HEAD (the
    installed checkout's HEAD measured a 10% slowdown as x1.008); outside any dsbench
    checkout, refs resolve in the one dsbench runs from, and the note says so."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(ROOT), str(clone)], check=True)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", *ident, "commit", "--allow-empty", "-qm", "x"], cwd=clone, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    monkeypatch.chdir(clone / "dsbench")
    assert ab.commit_repo() == (clone, "")
    side = ab.parse_side("commit=HEAD")
    assert side.description == f"commit {head} (HEAD) of {clone}"
    assert side.tree == clone / ".dsbench" / "worktrees" / head[:12]
    monkeypatch.chdir(tmp_path)
    repo, note = ab.commit_repo()
    assert repo == ROOT and note.startswith(f"commit= refs resolve in {ROOT}, the checkout")
    assert f"{ROOT} at " in ab.tree_text(ROOT)


def test_the_comparison_says_how_many_pairs_a_case_got():
    from dsbench.compare.comparison import _pairs_text
    from dsbench.records import ABBlock

    assert _pairs_text(ABBlock(block_pairs=8)) == "8 pairs"  # before --block-time
    assert _pairs_text(ABBlock(block_pairs=8, block_time_s=0.0)) == "8 pairs"
    assert _pairs_text(ABBlock(block_pairs=8, block_time_s=3.0)) == (
        "8 or more pairs (as many as fit in 3 s)"
    )
