"""Machine identity by hardware: two machines under one host name (``vm``: an Intel Xeon with
AMX and a 300 MiB LLC, an AMD EPYC with a 32 MiB L3) never compare, never share a history."""

import json

import pytest

from dsbench import compare, results
from dsbench.cli import main
from dsbench.cli.run import _compare_with_previous
from dsbench.envinfo import collect, collect_env
from dsbench.publish.data import axes, history, pairings
from dsbench.publish.data.facts import machine_labels, run_groups
from dsbench.records import fingerprint
from tests.conftest import FIXTURE_RESULTS, make_doc, make_row

XEON_CPU = {"model": "Intel(R) Xeon(R) Processor", "logical_cpus": 2, "llc_bytes": 300 * 2**20,
            "flags": ["avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16",
                      "amx_tile"]}  # fmt: skip
EPYC_CPU = {"model": "AMD EPYC", "logical_cpus": 2, "l2_bytes": 512 * 2**10,
            "llc_bytes": 32 * 2**20, "flags": ["avx2", "fma"]}  # fmt: skip
MEMORY = 25276059648  # 23.54 GiB, as a 24 GiB VM reports it


def _env(cpu: dict, memory: int = MEMORY, **more) -> dict:
    return {"cpu": dict(cpu), "memory": {"total_bytes": memory}, "backend": "cpu", **more}


def _launches(start: float, n_launches: int = 6) -> list[list[float]]:
    factors = (1.0, 1.003, 0.997, 1.002, 0.998, 1.001)[:n_launches]
    return [[f * (start + 0.001 * i) for i in range(10)] for f in factors]


def _rows(scale: float) -> list[dict]:
    return [
        make_row("gemm[size=512]", _launches(100.0 * scale)),  # GFLOP/s-like, higher is better
        make_row("adamw[params=1000000]", _launches(50.0 * scale)),
    ]


def _write(root, run_id, minute, env, scale, *, label=None, deepspeed=None, machine="vm"):
    env = dict(env)
    if deepspeed:
        env["packages"] = {"torch": "2.13.0+cpu", "deepspeed": deepspeed}
    doc = make_doc(run_id, f"2026-12-06T00:{minute:02d}:00+00:00", _rows(scale), label=label,
                   env=env, machine=machine)  # fmt: skip
    return results.write_run(doc, root=root)


def test_old_files_fingerprint_derived_from_their_environment():
    (path,) = list((FIXTURE_RESULTS / "vm").glob("*staged-baseline.json"))
    run = results.read_run(path)
    assert "hardware" not in run.env  # written before fingerprints
    hw = run.hardware
    assert hw.known and hw.cpu == "Intel(R) Xeon(R) Processor" and hw.cpus == 2
    assert hw.memory_gib == 24 and hw.llc_bytes == 480 * 2**20 and "amx_tile" in hw.isa
    assert hw.l2_bytes is None and hw.gpus == ()  # not recorded then; a CPU run
    assert hw.name == "Intel Xeon Processor (2 CPUs, 24 GiB, LLC 480 MiB, AMX)"
    assert len(hw.id) == 8


def test_memory_jitter_and_a_driver_are_not_other_hardware():
    a = fingerprint.from_env(_env(XEON_CPU, 25276059648, driver="550.54"))
    b = fingerprint.from_env(_env(XEON_CPU, 25324961792, driver="560.28"))  # 47 MiB more
    assert fingerprint.like(a, b) and a.id == b.id  # the driver is a confounder, not identity
    c = fingerprint.from_env(_env(XEON_CPU, 2 * 25276059648))
    assert fingerprint.differences(a, c) == ["memory (24 GiB vs 47 GiB)"]


def test_differences_name_what_differs():
    xeon, epyc = fingerprint.from_env(_env(XEON_CPU)), fingerprint.from_env(_env(EPYC_CPU))
    assert fingerprint.differences(xeon, epyc) == [
        "CPU (Intel(R) Xeon(R) Processor vs AMD EPYC)",
        "LLC (300 MiB vs 32 MiB)",
        "ISA (amx_bf16 amx_tile avx512_bf16 avx512_fp16 avx512f vs -)",
    ]
    # one Xeon model name, two LLCs: the VM hides the model, the cache tells them apart
    other = fingerprint.from_env(_env(dict(XEON_CPU, llc_bytes=480 * 2**20)))
    assert fingerprint.differences(xeon, other) == ["LLC (300 MiB vs 480 MiB)"]
    # a field one side does not record (an older file's L2) is not a difference
    no_l2 = fingerprint.from_env(_env(dict(EPYC_CPU, l2_bytes=None)))
    assert fingerprint.like(no_l2, epyc) and no_l2.id != epyc.id


def test_unknown_hardware_never_matches_a_known_one():
    unknown = fingerprint.from_env({"backend": "cpu"})
    assert not unknown.known and unknown.id == "unknown"
    assert not fingerprint.like(unknown, fingerprint.from_env(_env(EPYC_CPU)))
    assert fingerprint.like(unknown, fingerprint.from_env({}))  # two unknowns: not told apart


def test_gpus_are_hardware():
    def gpu_env(name, count):
        devices = [{"index": i, "name": name, "l2_cache_bytes": 50 * 2**20} for i in range(count)]
        return _env(EPYC_CPU, backend="cuda", devices=devices, device_count=count)

    h100x8 = fingerprint.from_env(gpu_env("NVIDIA H100 80GB HBM3", 8))
    assert h100x8.name.startswith("8x NVIDIA H100 80GB HBM3 (L2 50 MiB), host AMD EPYC")
    assert fingerprint.differences(
        h100x8, fingerprint.from_env(gpu_env("NVIDIA H100 80GB HBM3", 4))
    )
    cpu_run = fingerprint.from_env(_env(EPYC_CPU))  # the same box, --device cpu: no GPU used
    assert fingerprint.differences(h100x8, cpu_run)[0].startswith("GPUs (")


@pytest.fixture
def this_machine(monkeypatch):
    """``collect_env`` on an AMD EPYC, whatever this machine is: its CPU and memory probes
    (what reads /proc and /sys) return the EPYC's."""
    monkeypatch.setattr(collect, "_cpu", lambda torch: dict(EPYC_CPU, torch_threads=2))
    monkeypatch.setattr(collect, "_memory_bytes", lambda: MEMORY)
    return collect_env("cpu", telemetry=False)


def test_collect_env_stores_the_fingerprint(this_machine):
    stored = this_machine["hardware"]
    assert stored["name"] == "AMD EPYC (2 CPUs, 24 GiB, L2 512 KiB, LLC 32 MiB)"
    derived = fingerprint.from_env({k: v for k, v in this_machine.items() if k != "hardware"})
    assert stored["id"] == derived.id == fingerprint.from_env(this_machine).id
    assert json.loads(json.dumps(stored)) == stored


def _this_run(root, env, minute=30):
    path = _write(root, "20261206T003000Z-cccccc", minute, env, 1.0)
    return results.read_run(path).record


def test_newest_run_skips_other_hardware_in_one_line(tmp_path, this_machine, capsys):
    _write(tmp_path, "20261206T001000Z-aaaaaa", 10, _env(XEON_CPU), 4.0)  # AMX: 4x faster
    record = _this_run(tmp_path, this_machine)
    _compare_with_previous(tmp_path, record)
    raw = capsys.readouterr().out
    assert all(len(line) <= 100 for line in raw.splitlines())  # one sentence, wrapped; no table
    assert "|" not in raw and "──" not in raw
    out = " ".join(raw.split()) + "\n"
    assert out.startswith(
        "(no earlier run on this hardware to compare with: the newest run of suite quick in "
        "'vm' (20261206T001000Z-aaaaaa) is on Intel Xeon Processor (2 CPUs, 24 GiB, LLC 300 "
        "MiB, AMX), this is AMD EPYC "
    )
    assert out.endswith("; CPU, LLC, ISA differ)\n")
    assert "worse" not in out and "better" not in out


def test_newest_run_on_this_hardware_passes_over_newer_other_hardware(
    tmp_path, this_machine, capsys
):
    _write(tmp_path, "20261206T000500Z-eeeeee", 5, this_machine, 1.0, label="epyc-before")
    _write(tmp_path, "20261206T001000Z-aaaaaa", 10, _env(XEON_CPU), 4.0)
    record = _this_run(tmp_path, this_machine)
    _compare_with_previous(tmp_path, record)
    out = " ".join(capsys.readouterr().out.split())  # the terminal format wraps its notes
    assert "compared with the newest earlier run on this hardware: run 20261206T000500Z" in out
    assert "passing over 1 newer run(s) in 'vm' on other hardware, Intel Xeon" in out
    assert "0 better, 0 worse, 2 unchanged" in out  # judged against the EPYC, not the Xeon


@pytest.fixture
def two_machines(tmp_path):
    """Results of two machines both called ``vm``: the Xeon twice (deepspeed 0.18.3, then
    0.18.4), then the EPYC, at a quarter of the Xeon's speed (0.18.4)."""
    _write(tmp_path, "20261206T000100Z-aaaaaa", 1, _env(XEON_CPU), 4.0, label="xeon-a",
           deepspeed="0.18.3")  # fmt: skip
    _write(tmp_path, "20261206T000200Z-bbbbbb", 2, _env(XEON_CPU), 4.0, label="xeon-b",
           deepspeed="0.18.4")  # fmt: skip
    _write(tmp_path, "20261206T000300Z-cccccc", 3, _env(EPYC_CPU), 1.0, label="epyc",
           deepspeed="0.18.4")  # fmt: skip
    return tmp_path


def test_compare_across_hardware_gives_no_verdict(two_machines, capsys):
    code = main(["compare", "--results", str(two_machines), "--baseline", "label=xeon-b",
                 "--contender", "label=epyc", "--fail-on-regression",
                 "--format", "github"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0  # x0.25 is not a regression: it is another CPU
    rows = [line for line in out.splitlines() if line.startswith("| gemm") or
            line.startswith("| adamw")]  # fmt: skip
    assert len(rows) == 2
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[4] == "0.250" and cells[6] == "unlike hardware"  # the ratio stays visible
        assert "no verdict across hardware (CPU, LLC, ISA differ)" in cells[7]
    assert (
        "unlike hardware: the baseline ran on Intel Xeon Processor (2 CPUs, 24 GiB, LLC 300 "
        "MiB, AMX), the contender on AMD EPYC (2 CPUs, 24 GiB, L2 512 KiB" in out
    )
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("no verdict: the runs are on unlike hardware (CPU, LLC, ISA differ)")
    for verdict in ("better", "worse", "unchanged", "inconclusive"):
        assert f"| {verdict}" not in out


def test_compare_with_hardware_as_the_axis_judges(two_machines, capsys):
    code = main(["compare", "--results", str(two_machines), "--baseline", "cpu=xeon",
                 "--contender", "cpu=epyc", "--fail-on-regression"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1 and "2 worse" in out and "unlike hardware" not in out


def test_compare_on_like_hardware_judges(two_machines):
    runs = results.load_runs(two_machines)
    base, cont, _ = compare.pick_runs(runs, "label=xeon-a", "label=xeon-b")
    rep = compare.report(base, cont, axes={"label"})
    assert rep.counts["unchanged"] == 2 and compare.UNLIKE not in rep.counts


def test_pages_never_mix_two_machines_of_one_name(two_machines):
    runs = results.load_runs(two_machines)
    labels = {r.label: machine_labels(runs)[id(r)] for r in runs}
    assert (
        labels["xeon-a"]
        == labels["xeon-b"]
        == ("vm · Intel Xeon Processor (2 CPUs, 24 GiB, LLC 300 MiB, AMX)")
    )
    assert labels["epyc"] == "vm · AMD EPYC (2 CPUs, 24 GiB, L2 512 KiB, LLC 32 MiB)"
    # the index: a table per machine, never one for both
    groups = run_groups(runs)
    assert all({labels[r.label] for r in members} == {key[0]} for key, members in groups)
    assert {key[0] for key, _ in groups} == {labels["epyc"], labels["xeon-a"]}
    # the DeepSpeed axis pairs 0.18.3 with 0.18.4 on the Xeon only: the EPYC's 0.18.4 run,
    # the newest, is never the Xeon's contender
    axis = next(a for a in axes.AXES if "0.18.3" in a.baseline and "0.18.4" in a.contender)
    result = pairings.pair(axis, runs)
    pairs = [(p.baseline.run.label, p.contender.run.label) for p in result.pairings]
    assert pairs == [("xeon-a", "xeon-b")]
    assert "Intel Xeon" in result.pairings[0].group
    assert not any(compare.UNLIKE in r.change for p in result.pairings for r in p.report.rows)


def test_history_page_has_one_history_per_hardware(two_machines, tmp_path_factory):
    _write(two_machines, "20261206T000400Z-dddddd", 4, _env(EPYC_CPU), 1.0, label="epyc-2")
    out = tmp_path_factory.mktemp("site") / "site"
    runs = results.load_runs(two_machines)
    machines = [machine for (_, machine, _), _ in history.history_groups(runs)]
    assert machines == [
        "vm · AMD EPYC (2 CPUs, 24 GiB, L2 512 KiB, LLC 32 MiB)",
        "vm · Intel Xeon Processor (2 CPUs, 24 GiB, LLC 300 MiB, AMX)",
    ]
    assert main(["publish", "--results", str(two_machines), "--out", str(out)]) == 0
    page = (out / "history.html").read_text()
    assert "vm · Intel Xeon Processor (2 CPUs, 24 GiB, LLC 300 MiB, AMX) · quick suite" in page
    assert "vm · AMD EPYC (2 CPUs, 24 GiB, L2 512 KiB, LLC 32 MiB) · quick suite" in page
    assert "<h2>vm · quick suite</h2>" not in page
