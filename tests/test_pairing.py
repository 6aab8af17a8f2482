"""compare with only a baseline on the DeepSpeed axis: the contender's version (the installed
DeepSpeed's, else the next newer release), a dsbench ab pair over a series' sides over single
runs, and the notes that say why and what else there was."""

import pytest

from dsbench import compare, results
from dsbench.cli import main
from dsbench.compare import pairing
from tests.conftest import make_doc, make_row

CASES = ["train_step[stage=1]", "train_step[stage=2]"]
SWEEP = "20261206T012532Z-9d794f"
AB, AB_SOAK = "20261205T231404Z-96e32f", "20261206T004820Z-7973e7"


def _write(root, run_id, version, *, rounds=5, ab=None, sweep=None, suite="training", label=None):
    """A run of DeepSpeed ``version``: ``rounds`` launches of the cases; ``ab``: (id, side,
    pairing) of a ``dsbench ab`` pair; ``sweep``: the series' id. ``run_id`` sets the time."""
    rows = [make_row(i, [[100.0 + k + 0.01 * j for j in range(8)] for k in range(rounds)])
            for i in CASES]  # fmt: skip
    stamp = run_id[:15]
    created = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}"
    doc = make_doc(run_id, created + "+00:00", rows, label=label or run_id[-6:],
                   env={"packages": {"torch": "2.13.0+cpu", "deepspeed": version}})  # fmt: skip
    doc["suite"] = suite
    doc["launches"] = [{"order": k} for k in range(rounds)]
    if ab is not None:
        ab_id, side, how = ab
        doc["ab"] = {"id": ab_id, "side": side, "spec": f"deepspeed={version}", "rounds": rounds}
        if how:
            doc["ab"]["pairing"] = how
    if sweep is not None:
        doc["sweep"] = {"id": sweep, "spec": f"deepspeed={version}", "rounds": rounds}
    results.write_run(doc, root=root)


@pytest.fixture
def results_dir(tmp_path):
    """As results/ holds them: an older 26-round ab pair of 0.18.3 vs 0.18.4, a newer 5-round
    one (another suite), a newer release series of 0.18.3, 0.18.4 and 0.19.4, a single run."""
    _write(tmp_path, "20261205T221328Z-aaaaa1", "0.18.3", rounds=26, ab=(AB, "baseline", ""))
    _write(tmp_path, "20261205T221328Z-aaaaa2", "0.18.4", rounds=26, ab=(AB, "contender", ""))
    for rid, version, side in [("20261206T003243Z-bbbbb1", "0.18.3", "baseline"),
                               ("20261206T003430Z-bbbbb2", "0.18.4", "contender")]:  # fmt: skip
        _write(tmp_path, rid, version, ab=(AB_SOAK, side, ""), suite="soak")
    for rid, version in [("20261206T012941Z-ccccc1", "0.18.4"),
                         ("20261206T013051Z-ccccc2", "0.18.3"),
                         ("20261206T013651Z-ccccc3", "0.19.4")]:  # fmt: skip
        _write(tmp_path, rid, version, sweep=SWEEP)
    _write(tmp_path, "20261206T020000Z-ddddd1", "0.19.2", rounds=1)
    return tmp_path


def _installed(monkeypatch, version):
    monkeypatch.setattr(pairing, "installed_deepspeed", lambda: version)


def _ids(base, cont):
    return base.run.id[-6:], cont.run.id[-6:]


def test_installed_version_and_the_ab_pair_with_most_rounds(results_dir, monkeypatch, capsys):
    """The headline command: the installed 0.18.4, and of its two ab pairs the 26-round one,
    over the newer 5-round pair and the newer series' sides; the header says so, and names the
    other pairs."""
    _installed(monkeypatch, "0.18.4")
    base, cont, notes = compare.pick_runs(results.load_runs(results_dir), "0.18.3", None)
    assert _ids(base, cont) == ("aaaaa1", "aaaaa2")
    assert notes[0].endswith(f"the baseline side of dsbench ab {AB}")
    assert notes[1].endswith(f"the contender side of dsbench ab {AB}")
    assert notes[2] == (
        "0.18.3 vs 0.18.4: the installed DeepSpeed; a dsbench ab pair (26 launch rounds, the "
        "most rounds of 2 such pairs) preferred over the release series' sides"
    )
    assert notes[3] == (
        "also available: 0.18.3 vs 0.18.4 (ab pair, soak suite, 5 launch rounds); 0.18.3 vs "
        "0.18.4, 0.19.4 (series, 2 releases, 5 rounds); 0.18.3 vs 0.19.2 (1 single run) — "
        "pick with --contender"
    )
    args = ["compare", "--results", str(results_dir), "--baseline", "0.18.3"]
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())  # wrapped to the terminal
    assert "contender: run 20261205T221328Z-aaaaa2" in out
    assert "0.18.3 vs 0.18.4: the installed DeepSpeed; a dsbench ab pair" in out


def test_block_rounds_are_named_so(tmp_path, monkeypatch):
    _installed(monkeypatch, "0.18.4")
    _write(tmp_path, "20261205T221328Z-aaaaa1", "0.18.3", rounds=26, ab=(AB, "baseline", "blocks"))
    _write(tmp_path, "20261205T221328Z-aaaaa2", "0.18.4", rounds=26, ab=(AB, "contender", "blocks"))
    _write(tmp_path, "20261206T012941Z-ccccc1", "0.18.4", sweep=SWEEP)
    _write(tmp_path, "20261206T013051Z-ccccc2", "0.18.3", sweep=SWEEP)
    _, _, notes = compare.pick_runs(results.load_runs(tmp_path), "deepspeed=0.18.3", None)
    assert notes[2] == (
        "0.18.3 vs 0.18.4: the installed DeepSpeed; a dsbench ab pair (26 block rounds) "
        "preferred over the release series' sides"
    )


def test_next_newer_release_where_the_installed_one_has_no_runs(results_dir, monkeypatch):
    """Installed 0.20.1 (no runs): the next newer release than 0.18.3 among the runs, 0.18.4,
    not the newest; ordered as versions, so 0.18.10 comes after 0.18.9, not before 0.18.4."""
    _installed(monkeypatch, "0.20.1")
    runs = results.load_runs(results_dir)
    base, cont, notes = compare.pick_runs(runs, "0.18.3", None)
    assert _ids(base, cont) == ("aaaaa1", "aaaaa2")
    assert notes[2].startswith(
        "0.18.3 vs 0.18.4: the next newer release with runs (the installed 0.20.1 has no runs)"
    )
    _write(results_dir, "20261206T030000Z-eeeee1", "0.18.10", sweep=SWEEP)
    _write(results_dir, "20261206T030001Z-eeeee2", "0.18.9", sweep=SWEEP)
    runs = results.load_runs(results_dir)
    base, cont, notes = compare.pick_runs(runs, "0.18.4", None)  # 0.18.3 is older
    assert (cont.run.fields["deepspeed"], notes[2][:16]) == ("0.18.9", "0.18.4 vs 0.18.9")
    assert "two sides of a release series (5 rounds)" in notes[2]
    # the newest release has none newer: the closest older one
    _, cont, notes = compare.pick_runs(runs, "0.19.4", None)
    assert cont.run.fields["deepspeed"] == "0.19.2"
    older = "the closest older release with runs (the installed 0.20.1 has no runs, none newer)"
    assert older in notes[2]


def test_installed_baseline_or_none_installed_falls_back_to_the_next_newer(
    results_dir, monkeypatch
):
    runs = results.load_runs(results_dir)
    _installed(monkeypatch, "0.18.3")
    _, cont, notes = compare.pick_runs(runs, "0.18.3", None)
    assert cont.run.fields["deepspeed"] == "0.18.4"
    assert "(the installed 0.18.3 is the baseline)" in notes[2]
    _installed(monkeypatch, None)
    _, cont, notes = compare.pick_runs(runs, "0.18.3", None)
    assert "the next newer release with runs (no DeepSpeed installed)" in notes[2]


def test_installed_version_with_only_series_sides_and_single_runs(results_dir, monkeypatch):
    """Installed 0.19.4: the series' 0.19.4 side with the series' 0.18.3 side, not with an ab
    pair's 0.18.3 side, preferred over a single run of 0.19.4."""
    _installed(monkeypatch, "0.19.4")
    _write(results_dir, "20261206T040000Z-fffff1", "0.19.4", rounds=1)
    base, cont, notes = compare.pick_runs(results.load_runs(results_dir), "0.18.3", None)
    assert _ids(base, cont) == ("ccccc2", "ccccc3")
    assert notes[0].endswith(f"two sides of the series {SWEEP}")
    assert notes[2] == (
        "0.18.3 vs 0.19.4: the installed DeepSpeed; two sides of a release series (5 rounds) "
        "preferred over 1 single run"
    )


def test_explicit_contender_is_untouched(results_dir, monkeypatch):
    """--contender given: selection's closest pair (fewest other differences, newest), as
    before; the installed DeepSpeed is not asked."""

    def no_lookup():
        raise AssertionError("the installed DeepSpeed was looked up")

    monkeypatch.setattr(pairing, "installed_deepspeed", no_lookup)
    runs = results.load_runs(results_dir)
    got = compare.pick_runs(runs, "0.18.3", "0.18.4")
    assert got == compare.selection.pick_runs(runs, "0.18.3", "0.18.4")
    base, cont, notes = got
    assert _ids(base, cont) == ("ccccc2", "ccccc1") and len(notes) == 2
    # another axis with no contender: selection's closest run, also as before
    before = compare.selection.pick_runs(runs, "label=aaaaa1", None)
    assert compare.pick_runs(runs, "label=aaaaa1", None) == before


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--baseline", "0.17.2"], "baseline selector '0.17.2' matches no run"),
        (["--baseline", "0.18.3", "--contender", "0.17.2"], "contender selector '0.17.2'"),
        (["--baseline", "deepspeed=0.18.3", "--contender", "dpspeed=0.18.4"], "'dpspeed'"),
    ],
)
def test_unmatched_selectors_stay_one_line_errors(results_dir, monkeypatch, capsys, argv, needle):
    _installed(monkeypatch, "0.18.4")
    assert main(["compare", "--results", str(results_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert "0.18.3, 0.18.4, 0.19.2, 0.19.4" in err or "did you mean" in err


@pytest.mark.parametrize(
    ("a", "b", "newer"),
    [("0.18.10", "0.18.9", True), ("0.18.4", "0.18.10", False), ("0.19.0rc1", "0.18.9", True),
     ("unknown", "0.18.3", False)],
)  # fmt: skip
def test_versions_are_ordered_as_versions(a, b, newer):
    assert pairing._newer(a, b) is newer
