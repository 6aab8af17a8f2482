"""Turn dsbench benchmark definitions into asv benchmark classes (nothing is defined twice).

For a definition ``b`` this makes a class named ``b.name`` in CamelCase (``train_step`` ->
``TrainStep``; :mod:`dsbench.results.asv` maps asv's results back by that name) with asv's
``params``/``param_names`` from ``b.cases(suite, ctx)`` (suite from $DSBENCH_ASV_SUITE, default
``quick``) and:

- ``track_<primary metric>``: the value measured by dsbench's timing core (device events and
  L2 flush on GPUs; the timing settings ``dsbench run`` uses for the benchmark's suite), with
  its unit: GB/s, TFLOP/s, samples/s, ms/token, ms;
- ``time_call`` (seconds) and ``peakmem_call`` (bytes): asv's own timing and host-memory peak
  of one call (single-process benchmarks only);
- ``track_device_peak_bytes`` (GPU only, bytes): the allocator's peak, the largest rank's for
  multi-rank benchmarks (asv's ``peakmem_`` sees host memory only, and only its own process).

Collectives and training steps spawn their ranks inside each ``track_*`` call. A case that
cannot run in this environment (DeepSpeed not installed, an implementation without its device)
raises ``NotImplementedError``, which asv records as skipped; so does a combination of asv's
parameter product that the definition leaves out (``Benchmark.keep``, e.g. DeepSpeed with
``comm=shm``).
"""

from __future__ import annotations

import functools
import os

from dsbench.records import Row
from dsbench.suites import Benchmark, Skip


@functools.cache
def _setting():
    """(ctx, profile) for this process: the detected device, as ``dsbench run`` does it."""
    import torch

    from dsbench.envinfo import collect_env
    from dsbench.measure import runner

    env = collect_env("cuda" if torch.cuda.is_available() else "cpu", telemetry=False)
    ctx = runner.context_for(env, os.environ.get("DSBENCH_ASV_SUITE", "quick"))
    return ctx, runner.profile_for(env, ctx)


def timing_suite(bench: Benchmark, suite: str) -> str:
    """The timing settings ``dsbench run`` would use: the suite's, or for a benchmark outside
    it (training, inference) its own suite's; ``smoke`` stays smoke."""
    return suite if suite == "smoke" or suite in bench.suites else bench.suites[0]


def asv_class(bench: Benchmark) -> type:
    ctx, _ = _setting()
    cases = bench.cases(ctx.suite, ctx)
    names = list(cases[0]) if cases else []
    values = [sorted({c[n] for c in cases}, key=lambda v: (str(type(v)), v)) for n in names]
    defined = {tuple(c[n] for n in names) for c in cases}  # asv runs the product of ``values``
    primary = bench.primary

    def params_of(args) -> dict:
        return dict(zip(names, args, strict=True))

    def setup(self, *args):
        self.case = None
        if tuple(args) not in defined:
            raise NotImplementedError(f"not a case of {bench.name}: {params_of(args)}")
        if bench.ranks_param:
            return  # ranks are spawned by the track_ benchmark
        try:
            self.case = bench.setup(params_of(args), ctx)
        except Skip as exc:
            raise NotImplementedError(str(exc)) from None

    def measured_row(self, *args) -> Row:
        from dsbench.measure import runner

        ctx_, profile = _setting()
        config = runner.TIMING[timing_suite(bench, ctx_.suite)]
        params = params_of(args)
        if bench.ranks_param:
            rows: list[Row] = []
            runner.run_distributed(bench, [params], ctx_, profile, config, rows.append)
            row = rows[0]
        else:
            from dsbench.measure.timing import measure

            m = measure(self.case.fn, device=ctx_.torch_device, args=self.case.args, config=config)
            row = runner.ok_row(bench, params, self.case, m, profile)
        if row.status == "skipped":
            raise NotImplementedError(row.reason)
        if row.status == "failed":
            raise RuntimeError(row.error)
        return row

    def track_primary(self, *args):
        return one_sample(measured_row(self, *args).value)

    track_primary.unit = primary.unit
    attrs = {
        "params": values,
        "param_names": names,
        "setup": setup,
        "timeout": 600,
        f"track_{primary.name}": track_primary,
        "__doc__": bench.description,
    }
    if not bench.ranks_param:
        sync = torch_sync() if ctx.gpu else None

        def time_call(self, *args):
            self.case.fn(*self.case.args[0])
            if sync is not None:  # GPU work is asynchronous: time it to completion
                sync()

        def peakmem_call(self, *args):
            self.case.fn(*self.case.args[0])

        attrs.update(time_call=time_call, peakmem_call=peakmem_call)
    if ctx.gpu:  # asv's peakmem_ sees host memory only; the GPU allocator's peak is tracked

        def track_device_peak_bytes(self, *args):
            return one_sample(measured_row(self, *args).memory.device_peak_allocated_bytes)

        track_device_peak_bytes.unit = "bytes"
        attrs["track_device_peak_bytes"] = track_device_peak_bytes
    return type(bench.name.title().replace("_", ""), (), attrs)


def one_sample(value: float) -> dict:
    """A ``track_`` value as asv keeps a timing result, ``{"samples": [value], "number": 1}``:
    asv then appends each round's sample (``--record-samples``) and reports their median with its
    own statistics, where a plain number would be overwritten by every round, leaving the last
    one alone. Each sample is one round, a fresh process: one launch for compare."""
    return {"samples": [float(value)], "number": 1}


def torch_sync():
    import torch

    return torch.cuda.synchronize
