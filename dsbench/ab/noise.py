"""An A/A calibration of this machine (``dsbench noise``): the current checkout runs a suite in
launch rounds, merged into one result file whose rows keep every launch's samples, and each
benchmark's run-to-run spread (the standard deviation of the log of the launches' medians)."""

from __future__ import annotations

import sys
from pathlib import Path

from dsbench import results
from dsbench.ab.merge import merge_launches
from dsbench.ab.pair import launch, list_cases
from dsbench.ab.plan import Launches, Suite
from dsbench.ab.rounds import launch_folder
from dsbench.ab.sides import parse_side
from dsbench.stats import round_spread

HEADERS = ["benchmark", "centre", "spread (sd of log)", "max/min launch", "n"]


def calibrate(suite: Suite, rounds: int, out: Path, label: str | None = None) -> Path:
    """``rounds`` launches of this checkout, saying on stderr what runs; the written file.
    LaunchFailed when a launch writes no result file (nothing is written then)."""
    side = parse_side("current")
    design = Launches(suite)
    n_cases = max(len(listed) for listed in list_cases([side], design))
    print(f"dsbench noise: {n_cases} case(s), {rounds} launches of this checkout",
          file=sys.stderr)  # fmt: skip
    with launch_folder("noise") as workdir:
        (launches,) = launch([side], design, rounds, workdir)
        merged = merge_launches(launches, label=label or "noise", purpose="noise")
        return results.write_run(merged, root=out)


def spread_table(run: results.Run) -> list[list[str]]:
    """A row per benchmark (:data:`HEADERS`): its centre, spread, widest launch ratio, launches;
    a failed row only its status."""
    table = []
    for row in run.record.rows:
        if not row.ok:
            table.append([row.id, "", "", "", row.status])
            continue
        sigma, df = round_spread(row.round_samples())
        vals = row.launch_values
        table.append([row.id, f"{row.value:.4g} {row.unit}", f"{100 * sigma:.2f}%",
                      f"{max(vals) / min(vals):.3f}", f"{df + 1} launches"])  # fmt: skip
    return table


def widest(table: list[list[str]]) -> list[str] | None:
    """The row of :func:`spread_table` with the widest spread (None: none measured)."""
    return max((r for r in table if r[2]), key=lambda r: float(r[2][:-1]), default=None)
