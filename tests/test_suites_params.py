"""Each benchmark's parameters are a frozen typed record (``Benchmark.params``): its fields are
the grid's keys, its functions get the record whether called with a case's dict or the record,
and a key the record does not have is an error that names the benchmark's parameters."""

import dataclasses
import re
from pathlib import Path

import pytest

from dsbench.suites import BENCHMARKS
from dsbench.suites.base import Benchmark, Context, ParamsError, Work, record_of
from dsbench.suites.ceilings import CEILINGS
from dsbench.suites.optim import ADAMW, AdamWParams

CPU = Context(device="cpu", backend="cpu")
GPU = Context(device="cuda:0", backend="cuda", device_count=8)
ALL = {**BENCHMARKS, **CEILINGS}


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_benchmark_names_a_frozen_record_of_its_grid_keys(name):
    bench = ALL[name]
    assert dataclasses.is_dataclass(bench.params), f"{name} declares no params record"
    assert bench.params.__dataclass_params__.frozen
    fields = {f.name: f for f in dataclasses.fields(bench.params)}
    required = {n for n, f in fields.items() if f.default is dataclasses.MISSING}
    for suite in bench.suites or ("quick", "full"):
        for ctx in (CPU, GPU):
            keys = set(bench.grid(suite, dataclasses.replace(ctx, suite=suite)))
            assert keys <= set(fields), (name, suite, keys - set(fields))
            assert required <= keys, (name, suite, required - keys)


def test_a_case_dict_becomes_its_record_and_a_record_passes_through():
    case = record_of(ADAMW, {"impl": "torch", "params": 1000})
    assert case == AdamWParams(impl="torch", params=1000, scaler=False)
    assert record_of(ADAMW, case) is case
    assert record_of(AdamWParams, {"impl": "torch", "params": 1000, "scaler": True}).scaler
    work = Work(bytes=28_000.0, items=1000, working_set=16_000.0)
    assert ADAMW.work_of({"impl": "torch", "params": 1000}, CPU) == work
    assert ADAMW.work_of(case, CPU) == work


def test_an_unknown_or_missing_parameter_names_the_benchmarks_parameters():
    with pytest.raises(ParamsError, match=r"adamw has no parameter 'size'; its parameters: "
                       r"impl, params, scaler"):  # fmt: skip
        ADAMW.work_of({"impl": "torch", "params": 1000, "size": 4}, CPU)
    with pytest.raises(ParamsError, match=r"adamw needs parameter 'impl'"):
        ADAMW.work_of({"params": 1000}, CPU)
    assert issubclass(ParamsError, ValueError)  # publish's modelled tables catch ValueError


def test_the_functions_get_the_record_and_cases_stay_dicts():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Toy:
        x: int
        y: str = "a"

    got = []
    bench = Benchmark(
        name="toy",
        description="",
        grid=lambda suite, ctx: {"y": ["a", "b"], "x": [1, 2]},
        params=Toy,
        setup=lambda params, ctx: got.append(params),
        keep=lambda params: not (params.x == 2 and params.y == "b"),
        metrics=ADAMW.metrics,
    )
    cases = bench.cases("quick", CPU)
    assert cases == [{"y": "a", "x": 1}, {"y": "a", "x": 2}, {"y": "b", "x": 1}]
    assert [list(c) for c in cases] == [["y", "x"]] * 3  # the grid's order, as rows store it
    bench.setup(cases[0], CPU)
    assert got == [Toy(x=1, y="a")]


def test_no_suite_reads_a_case_by_string_key():
    root = Path(__file__).resolve().parents[1] / "dsbench"
    files = [*sorted((root / "suites").glob("*.py")), root / "engines" / "deepspeed.py",
             root / "zero" / "config" / "hf_auto.py"]  # fmt: skip
    found = [
        f"{path.relative_to(root.parent)}:{i}"
        for path in files
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"params\[[\"']", line)
    ]
    assert not found, found
