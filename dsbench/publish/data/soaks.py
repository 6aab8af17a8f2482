"""Soak result files as the published pages read them: :class:`SoakFile` (a result file of
suite ``soak``, every field checked for its type before use), its drift fits, its sample stream
and the plain words that say what was run.

A soak file is an ordinary result file (see :mod:`dsbench.soak.report`) with a ``soak`` section
and, beside it, the JSONL stream of per-rank samples. Files travel between machines: the stream
is read only when the file names it by a bare file name beside the result file, lines that are
not samples are counted and left out, and values that are not numbers are never formatted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsbench.publish.data.facts import finite
from dsbench.records import UNSET, Row, value_or
from dsbench.results import Run

MIB = 2**20
MAX_STREAM_BYTES = 512 * MIB
"""A stream larger than this is not read (the page says so and draws from the result file)."""
STREAM_SUFFIX = ".soak.jsonl"
"""How ``dsbench soak`` names the stream beside its result file."""
STEP_ROW = "soak.step_time_drift"
MEMORY_UNIT = "MiB/1k steps"
"""The unit of a memory drift row's slope; a drift row in it is drawn in MiB."""
NAMES = {
    "soak.memory": "host resident memory",
    "soak.heap": "C heap in use",
    "soak.device_allocated": "device memory allocated",
    "soak.device_reserved": "device memory reserved",
    STEP_ROW: "step time",
}
"""What each drift row measures, in words (a row not named here: its metric)."""


def as_dict(value: Any) -> dict:
    """``value`` if it is a dict, else an empty one (a file may hold anything)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    """``value`` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    """``value`` if it is an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_soak(run: Run) -> bool:
    return run.source == "dsbench" and run.suite == "soak"


@dataclass
class SoakFile:
    """A soak result file as the page reads it (every field checked for its type)."""

    run: Run
    anchor: str
    """The id of its section on the stability page."""
    params: dict
    section: dict
    """The file's ``soak`` section; empty for a file merged by ``dsbench ab``."""
    rows: list[Row]
    """Its ``soak.*`` rows."""
    settings: dict = field(init=False)

    def __post_init__(self) -> None:
        self.settings = as_dict(self.section.get("settings"))

    @classmethod
    def of(cls, run: Run, index: int) -> SoakFile:
        rows = [r for r in run.rows.values() if r.name.startswith("soak.")]
        params = next((r.params for r in rows), {})
        params = {k: v for k, v in params.items() if k != "rank"}
        return cls(run, f"soak-{index + 1}", params, as_dict(run.soak), rows)

    def row(self, name: str) -> list[Row]:
        return [r for r in self.rows if r.name == name]

    @property
    def merged(self) -> int:
        """How many launches ``dsbench ab`` merged into this file (0: a plain soak file)."""
        return len(self.run.launches or []) if self.run.ab else 0

    @property
    def launches(self) -> list[dict]:
        return [x for x in as_list(self.section.get("launches")) if isinstance(x, dict)]

    @property
    def faults(self) -> dict:
        """The fault outcomes (:func:`dsbench.soak.report.fault_outcomes`); empty without."""
        return as_dict(self.section.get("faults"))

    def steps_trained(self) -> int | None:
        """Steps the reference run trained (its furthest launch)."""
        last = [as_int(x.get("last_step")) for x in self.launches if x.get("run") == "reference"]
        last = [s for s in last if s is not None]
        return max(last) + 1 if last else None

    def training_seconds(self) -> float | None:
        """Seconds the ranks ran, over every launch of both runs."""
        hours = finite(self.faults.get("training_hours"))
        if hours is not None:
            return hours * 3600
        secs = [s for x in self.launches if (s := finite(x.get("seconds"))) is not None]
        return sum(secs) if secs else None

    def warmup(self) -> int | None:
        return as_int(self.section.get("warmup_steps"))

    def offload(self) -> str:
        """``none``, or what the ds_config offloads where: ``optimizer to cpu``."""
        zero = as_dict(as_dict(self.settings.get("ds_config")).get("zero_optimization"))
        parts = []
        for name in ("optimizer", "param"):
            device = as_dict(zero.get(f"offload_{name}")).get("device")
            if device not in (None, "none"):
                parts.append(f"{name} to {device}")
        return ", ".join(parts) or "none"


def fits(row: Row) -> list[tuple[str, dict]]:
    """A drift row's fits: ``[("", fit)]``, or each launch's for a file merged by ``dsbench ab``
    (``[("launch 0", fit), ...]``)."""
    if isinstance(row.drift, dict):
        return [("", row.drift)]
    merged = as_list(row.launch_drifts)
    return [(f"launch {k}", f) for k, f in enumerate(merged) if isinstance(f, dict)]


def rank_of(row: Row) -> int | None:
    return as_int(row.params.get("rank"))


@dataclass(frozen=True)
class Drifting:
    """A quantity a soak fits a drift to: its rows, the stream's sample key, how it is drawn."""

    row: str
    """The rows' name (one row per rank): ``soak.memory``, ``soak.step_time_drift``..."""
    key: str
    """The sample's field in the stream: ``rss``, ``step_s``..."""
    what: str
    unit: str
    """Of the curve: ``MiB`` or ``ms``."""
    scale: float
    """A stream value divided by this is in ``unit``."""


def drifting(soak: SoakFile) -> list[Drifting]:
    """The soak's drifting quantities, memory first (in the file's order), step time last."""
    names = [n for n in dict.fromkeys(r.name for r in soak.rows) if n != STEP_ROW]
    out = []
    for name in names:
        rows = soak.row(name)
        fitted = any(r.drift is not UNSET or r.launch_drifts is not UNSET for r in rows)
        memory = rows[0].unit == MEMORY_UNIT
        if (fitted and memory) or (name in NAMES and not fitted):  # not fitted: a skipped row
            what = NAMES.get(name) or str(rows[0].metric or name).removesuffix(" slope")
            key = "rss" if name == "soak.memory" else name.removeprefix("soak.")
            out.append(Drifting(name, key, what, "MiB", MIB))
    if soak.row(STEP_ROW):
        out.append(Drifting(STEP_ROW, "step_s", NAMES[STEP_ROW], "ms", 1e-3))
    return out


def duration(seconds: float | None) -> str:
    """``45 s``, ``7 min 56 s``, ``2 h 05 min``; ``-`` when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        m, s = divmod(round(seconds), 60)
        return f"{m} min {s:02d} s" if m < 10 else f"{m} min"
    h, m = divmod(round(seconds / 60), 60)
    return f"{h} h {m:02d} min"


def engine_text(soak: SoakFile) -> str:
    """``DeepSpeed 0.18.4``, or dsbench's engine and the DeepSpeed it left unused."""
    ds = soak.run.fields.get("deepspeed")
    if soak.params.get("engine") == "deepspeed":
        return f"DeepSpeed {ds or '(version not recorded)'}"
    installed = f"; DeepSpeed {ds} installed, not used by it" if ds else ""
    return f"dsbench's ZeRO engine{installed}"


def machine_text(run: Run) -> str:
    """``devbox: CPU only (Xeon, 2 logical CPUs)`` or ``box: 8 × NVIDIA H100``."""
    env = run.env or {}
    cpu = as_dict(env.get("cpu"))
    cores = as_int(cpu.get("affinity_cpus")) or as_int(cpu.get("logical_cpus"))
    cpu_text = ", ".join(str(x) for x in (cpu.get("model"), cores and f"{cores} logical CPUs") if x)
    if str(env.get("backend")) == "cpu" or not as_list(env.get("devices")):
        return f"{run.machine}: CPU only ({cpu_text or 'CPU not recorded'})"
    count = as_int(env.get("device_count")) or len(as_list(env.get("devices")))
    name = as_dict(as_list(env.get("devices"))[0]).get("name") or "GPU"
    return f"{run.machine}: {count} × {name}" + (f" (host: {cpu_text})" if cpu_text else "")


def short_text(soak: SoakFile) -> str:
    """One line naming a soak: engine, stage, precision, ranks, steps, time."""
    p = soak.params
    steps = soak.steps_trained()
    parts = [
        engine_text(soak).split(";")[0],
        f"ZeRO-{p.get('stage', '?')} {p.get('precision', '')}".strip(),
        f"offload: {soak.offload()}" if soak.offload() != "none" else "no offload",
        f"{p.get('model', '?')}, {p.get('nproc', '?')} ranks",
        f"{steps:,} steps" if steps is not None else "steps not recorded",
        duration(finite(soak.run.wall_s)),
    ]
    status = soak.section.get("status")
    if status not in (None, "complete"):
        parts.append(str(status))
    return " · ".join(parts)


def soak_facts(soak: SoakFile) -> list[tuple[str, Any]]:
    """What was run, plainly: (what, its value) in the order the page lists them (the result
    file aside); ``command`` is the argv as text."""
    run, p, s = soak.run, soak.params, soak.settings
    job = as_int(s.get("steps"))
    length = f"{job:,} steps" if job else f"until {duration(finite(s.get('duration_s')))}"
    if (trained := soak.steps_trained()) is not None:
        length += f"; the reference run trained {trained:,}"
    faults = [as_dict(f).get("action") for f in as_list(s.get("faults"))]
    kinds = ", ".join(f"{faults.count(a)} {a}" for a in ("kill", "hang", "term"))
    argv = " ".join(["dsbench", *map(str, as_list(run.argv))])
    sampling = (
        f"every {s.get('sample_every', '?')} steps; checkpoint every "
        f"{s.get('checkpoint_every', '?')}; warm-up {soak.warmup() or '?'} steps; hang "
        f"timeout {s.get('hang_timeout_s', '?')} s"
    )
    trained_text = "-"
    if soak.launches:
        trained_text = f"{duration(soak.training_seconds())} over {len(soak.launches)} launch(es)"
    out: list[tuple[str, Any]] = [
        ("engine", engine_text(soak)),
        ("ZeRO stage", p.get("stage", "-")),
        ("precision", p.get("precision", "-")),
        ("offload", soak.offload()),
        ("model", p.get("model", "-")),
        ("ranks", p.get("nproc", "-")),
        ("job", length),
        ("wall time", duration(finite(run.wall_s))),
        ("training time", trained_text),
        ("faults", kinds if faults else "none"),
        ("sampling", sampling if s else "-"),
        ("machine", machine_text(run)),
        ("command", argv if run.argv else "-"),
        ("status", soak.section.get("status") or "-"),
    ]
    if soak.merged:
        out.append(("dsbench ab", f"{soak.merged} launches merged into this file"))
    return out


def fitted_line(fit: dict, relative: bool) -> tuple[float, float, float, float] | None:
    """The fitted line over the steps it was fitted to, in the curve's units (a step-time slope
    is in % of the mean per 1,000 steps; its intercept is in ms)."""
    a, b = finite(fit.get("first_step")), finite(fit.get("last_step"))
    slope, icpt = finite(fit.get("slope")), finite(fit.get("intercept"))
    if None in (a, b, slope, icpt):
        return None
    if relative:
        mean = finite(fit.get("mean"))
        if mean is None:
            return None
        slope = slope * mean / 100
    return a, b, icpt + slope * a / 1000, icpt + slope * b / 1000


def soak_files(runs: Iterable[Run]) -> list[SoakFile]:
    """The soak result files, newest first."""
    soaks = [r for r in runs if is_soak(r)]
    return [SoakFile.of(r, i) for i, r in enumerate(reversed(soaks))]


@dataclass
class Series:
    """One metric's curves, per rank: ``{rank: ([steps], [values])}``."""

    per_rank: dict[int, tuple[list[float], list[float]]] = field(default_factory=dict)

    def add(self, rank: int, step: float, value: float) -> None:
        steps, values = self.per_rank.setdefault(rank, ([], []))
        steps.append(step)
        values.append(value)


def stream_path(soak: SoakFile) -> tuple[Path | None, str]:
    """The stream beside the result file, or None and why it is not read."""
    name = soak.section.get("stream")
    if soak.merged and name is None:
        return None, (
            f"no sample stream: dsbench ab merged {soak.merged} launches of the soak into this "
            "file (the drift table gives each launch's fit)"
        )
    if not isinstance(name, str) or not name:
        return None, "the result file names no sample stream"
    bare = Path(name).name == name and "\x00" not in name and name.endswith(STREAM_SUFFIX)
    if not bare:
        return (
            None,
            f"the sample stream {name!r} is not a {STREAM_SUFFIX} file beside the "
            "result file: not read",
        )
    path = soak.run.path.parent / name
    try:
        there = path.is_file() and not path.is_symlink()
        size = path.stat().st_size if there else 0
    except (OSError, ValueError):
        there, size = False, 0
    if not there:
        return None, f"the sample stream {name} is missing beside the result file"
    if size > MAX_STREAM_BYTES:
        return None, f"the sample stream {name} is over {MAX_STREAM_BYTES // MIB} MiB: not read"
    return path, ""


def read_stream(path: Path, wanted: Iterable[Drifting]) -> tuple[dict[str, Series], int]:
    """The reference run's samples in its launch with the most of them (the one the drift was
    fitted to, as :func:`dsbench.soak.report.drift_launch` picks it), per quantity and rank;
    and the number of lines that were not a readable sample."""
    by_launch: dict[str, list[dict]] = {}
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if not isinstance(rec, dict) or rec.get("kind") != "sample":
                continue
            if rec.get("run") != "reference" or as_int(rec.get("rank")) is None:
                bad += rec.get("run") == "reference"
                continue
            by_launch.setdefault(str(rec.get("launch")), []).append(rec)
    samples = max(by_launch.values(), key=len, default=[])
    out: dict[str, Series] = {}
    for rec in sorted(samples, key=lambda r: finite(r.get("step")) or 0.0):
        step = finite(rec.get("step"))
        for d in wanted:
            value = finite(rec.get(d.key))
            if step is not None and value is not None:
                out.setdefault(d.key, Series()).add(rec["rank"], step, value / d.scale)
    return out, bad


def series_from_rows(soak: SoakFile, wanted: Iterable[Drifting]) -> dict[str, Series]:
    """What the result file keeps: each memory row's series (all steps of the fitted launch)
    and the step times after warm-up (``soak.step_time``). Nothing from a file ``dsbench ab``
    merged: its rows pool the launches' samples, and their steps are the first launch's."""
    out: dict[str, Series] = {}
    if soak.merged:
        return out
    for d in wanted:
        if d.row == STEP_ROW:
            pairs = [(row, row.extra.get("sample_steps"), value_or(row.samples))
                     for row in soak.row("soak.step_time")]  # fmt: skip
        else:
            pairs = [(row, (s := as_dict(as_dict(row.drift).get("series"))).get("step"),
                      s.get("mib")) for row in soak.row(d.row)]  # fmt: skip
        for row, xs, ys in pairs:
            rank = rank_of(row)
            for step, value in zip(as_list(xs), as_list(ys), strict=False):
                if rank is not None and finite(step) is not None and finite(value) is not None:
                    out.setdefault(d.key, Series()).add(rank, float(step), float(value))
    return out


def interval_text(fit: dict) -> str:
    """A fit's 99% interval: ``-21.6 to 41.1``, or ``no interval``."""
    lo, hi = finite(fit.get("low")), finite(fit.get("high"))
    return "no interval" if lo is None or hi is None else f"{lo:.3g} to {hi:.3g}"


CONFIG = "tests/configs/soak_zero2_bf16.json"
"""The ZeRO-2 config the committed soaks ran (``soak_zero3_bf16.json`` beside it: ZeRO-3)."""
SOAK_COMMAND = f"dsbench soak --config {CONFIG} --model mlp --steps 5000"
FAULT_COMMAND = (
    f"dsbench soak --config {CONFIG} --model mlp --steps 1000 --faults kill=20,hang=3,term=2"
)
