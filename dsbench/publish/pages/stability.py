"""The stability page: what each ``dsbench soak`` found.

``stability.html`` has a section per soak result file (suite ``soak``, see
:mod:`dsbench.soak.report`; read through :mod:`dsbench.publish.data.soaks`):

- *what was run*: engine and DeepSpeed version, ZeRO stage, precision, offload, model, ranks,
  steps, how long it took, the faults scheduled, the machine;
- *curves*: memory (MiB) and step time (ms) over the steps of the reference run, one line per
  rank, the warm-up shaded and each rank's fitted line drawn over the steps it was fitted to;
  from the sample stream (``*.soak.jsonl`` beside the file), or, when that is missing, from the
  series the result file keeps (memory over all steps, step time after warm-up), said so;
- *drift*: per rank the slope per 1,000 steps, its 99% interval, the threshold and the verdict;
- *faults*: injected by kind, detected, named, detection time, restarts, bit-identical restarts,
  the resume success rate, failures nobody injected; then each fault and each restart;
- *loss anomalies*.

The stability claims are set beside these soaks on the claims page
(:mod:`dsbench.publish.pages.stability_claims`). Every string from a file is escaped
(:mod:`dsbench.publish.html`); chart text goes through :func:`dsbench.publish.plots.text`.
"""

from __future__ import annotations

import statistics
from functools import partial
from typing import TYPE_CHECKING, Any

from dsbench.publish import plots
from dsbench.publish.data.facts import finite, num, run_title
from dsbench.publish.data.soaks import (
    FAULT_COMMAND,
    SOAK_COMMAND,
    STEP_ROW,
    Drifting,
    Series,
    SoakFile,
    as_dict,
    as_list,
    drifting,
    duration,
    fits,
    fitted_line,
    interval_text,
    rank_of,
    read_stream,
    series_from_rows,
    short_text,
    soak_facts,
    soak_files,
    stream_path,
)
from dsbench.publish.html import (
    Html,
    details,
    el,
    join,
    kv_table,
    link,
    table,
    warn_list,
)
from dsbench.records import value_or

if TYPE_CHECKING:
    from dsbench.publish.site import Site

PAGE = "stability.html"
VERDICTS = ("flat", "growing", "inconclusive")


def facts(site: Site, soak: SoakFile) -> list[tuple[Any, Any]]:
    """What was run, plainly (:func:`dsbench.publish.data.soaks.soak_facts`), the result file
    linked and the command as code."""
    run = soak.run
    return [
        ("result file", link(site.run_href(run, 0), run_title(run))),
        *((k, el("code", v) if k == "command" and run.argv else v) for k, v in soak_facts(soak)),
    ]


# --------------------------------------------------------------------------------------------
# Curves
# --------------------------------------------------------------------------------------------


MAX_RANKS_DRAWN = 16
"""Ranks drawn per chart (the first by number); the caption says when more were left out."""


def curves_of(soak: SoakFile, d: Drifting, series: Series) -> list[plots.Curve]:
    """One :class:`~dsbench.publish.plots.Curve` per rank, with its row's fitted line."""
    fits_by_rank = {rank_of(r): as_dict(r.drift) for r in soak.row(d.row)}
    out = []
    for rank in sorted(series.per_rank)[:MAX_RANKS_DRAWN]:
        steps, values = series.per_rank[rank]
        fit = fits_by_rank.get(rank) or {}
        line = fitted_line(fit, relative=d.row == STEP_ROW)
        slope = finite(fit.get("slope"))
        unit = next((value_or(r.unit) for r in soak.row(d.row)), "")
        label = f"rank {rank} fit: {slope:+.3g} {unit}" if slope is not None else ""
        out.append(plots.Curve(f"rank {rank}", steps, values, line, label))
    return out


KEPT = "what the result file keeps (memory at every sample, step time after warm-up only)"


def charts(site: Site, soak: SoakFile) -> list[Html]:
    """The curves, each saying where it comes from; a missing stream is said first."""
    wanted = drifting(soak)
    path, why = stream_path(soak)
    if path is not None:
        series, bad = read_stream(path, wanted)
        source = f"from the sample stream {path.name}"
        if bad:
            source += f" ({bad} line(s) that were not readable samples left out)"
    else:
        series, source = series_from_rows(soak, wanted), ""
    out: list[Html] = []
    if why:
        tail = f"; curves drawn from {KEPT}." if series else "; no curves to draw."
        out.append(el("p", why + tail, cls="warn"))
    for d in (d for d in wanted if d.key in series):
        ranks = series[d.key].per_rank
        where = source or "from the result file"
        if not source and d.row == STEP_ROW:
            where += ", after warm-up only"
        caption = (
            f"{d.what[0].upper()}{d.what[1:]} of the reference run (no faults) over its steps, "
            f"one line per rank, {where}. Dashed: the line fitted after the warm-up (shaded), "
            "over the steps it was fitted to."
        )
        if len(ranks) > MAX_RANKS_DRAWN:
            caption += f" The first {MAX_RANKS_DRAWN} of {len(ranks)} ranks."
        curves = curves_of(soak, d, series[d.key])
        title, ylabel = f"{d.what}: {soak.run.label or soak.run.id}", f"{d.what} ({d.unit})"
        draw = partial(plots.drift_curves, curves, ylabel=ylabel, warmup=soak.warmup(), title=title)
        alt = f"{d.what} over steps, one line per rank"
        out.append(site.figure(draw, depth=0, alt=alt, caption=caption))
    return out


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


DRIFT_HEAD = ["series", "rank", "slope per 1,000 steps", "99% interval", "threshold",
              "verdict", "fitted over", "why"]  # fmt: skip


def drift_table(soak: SoakFile) -> Html:
    """Per quantity and rank (and launch, in a file ``dsbench ab`` merged) the fit: slope,
    interval, threshold, verdict; a row the soak could not fit says why."""
    rows, classes = [], []
    for d in drifting(soak):
        for row in soak.row(d.row):
            rank = rank_of(row)
            if not row.ok:
                why = row.reason or row.error or ""
                rows.append([d.what, rank, "", "", "", row.status, "", why])
                classes.append("missing")
                continue
            for launch, fit in fits(row):
                verdict = str(fit.get("verdict") or "-")
                mean = finite(fit.get("mean"))
                span = f"steps {fit.get('first_step', '?')}–{fit.get('last_step', '?')}"
                who = join([rank, f" ({launch})" if launch else ""])
                rows.append([
                    d.what, who, f"{num(finite(fit.get('slope')))} {value_or(row.unit, '')}",
                    interval_text(fit), num(finite(fit.get("threshold"))), el("strong", verdict),
                    f"{span}; mean {num(mean)} {d.unit}", fit.get("why") or "",
                ])  # fmt: skip
                classes.append(verdict if verdict in VERDICTS else "missing")
    if not rows:
        return el("p", "No drift rows in this file.", cls="note")
    return table(DRIFT_HEAD, rows, row_classes=classes, cls="verdicts")


FAULT_HEAD = ["injected", "during saves", "detected", "named", "detection time", "restarts",
              "bit-identical", "resume success", "failures not injected"]  # fmt: skip


def fault_table(soak: SoakFile) -> list[Html]:
    """One row of totals, then each fault and each restart (folded)."""
    f = soak.faults
    if not f:
        return [el("p", "No faults injected (", el("code", "--faults"), " injects them).",
                   cls="note")]  # fmt: skip
    faults, resumes = map(as_dict, as_list(f.get("faults"))), as_list(f.get("resumes"))
    faults = list(faults)
    times = sorted(t for x in faults if (t := finite(x.get("detection_s"))) is not None)
    rate, mtbf = finite(f.get("resume_success_rate")), finite(f.get("mtbf_hours"))
    injected = as_dict(f.get("injected"))
    totals = [
        ", ".join(f"{injected.get(a, 0)} {a}" for a in ("kill", "hang", "term")),
        *(f.get(k, "-") for k in ("during_saves", "detected", "named")),
        f"median {statistics.median(times):.3g} s, max {times[-1]:.3g} s" if times else "-",
        *(f.get(k, "-") for k in ("resumes_attempted", "resumes_identical")),
        "-" if rate is None else f"{rate:.1f}%",
        f"{len(as_list(f.get('real_failures')))} in {duration(soak.training_seconds())} of "
        "training" + (f" (MTBF {mtbf:.3g} h)" if mtbf is not None else ""),
    ]
    each = [[x.get(k) for k in ("spec", "launch", "detected", "named", "detection_s", "message")]
            for x in faults]  # fmt: skip
    again = [[x.get(k) for k in ("launch", "from_step", "steps", "ok", "why")]
             for x in map(as_dict, resumes)]  # fmt: skip
    return [
        table(FAULT_HEAD, [totals]),
        details(f"each fault ({len(each)})", table(
            ["fault", "launch", "detected", "named", "detection (s)", "the launcher's message"],
            each, cls="verdicts")),
        details(f"each restart ({len(again)})", table(
            ["launch", "from step", "steps", "bit-identical", "why not"], again)),
    ]  # fmt: skip


def anomaly_table(soak: SoakFile) -> Html:
    a = as_dict(soak.section.get("anomalies"))
    if not a:
        row = next(iter(soak.row("soak.loss_anomalies")), None)
        a = as_dict(row.extra.get("anomalies") if row else None)
    if not a:
        return el("p", "No loss anomaly record in this file.", cls="note")
    steps = ", ".join(str(s) for s in as_list(a.get("nonfinite_steps"))[:20])
    stalls = [as_dict(s) for s in as_list(a.get("stalls"))]
    scale = as_dict(a.get("loss_scale"))
    return kv_table(
        [
            ("anomalies in all", a.get("count", "-")),
            (
                "non-finite losses",
                f"{a.get('nonfinite', '-')}" + (f" (steps {steps})" if steps else ""),
            ),
            ("skipped steps (fp16 overflow)", a.get("skipped_steps", "-")),
            (
                f"stalls ({a.get('stall_steps', '?')}+ steps with the same loss)",
                "; ".join(f"{s.get('run')} steps {s.get('from')}–{s.get('to')}" for s in stalls)
                or "0",
            ),
            (
                "loss scale",
                ", ".join(f"{k} {num(finite(scale.get(k)))}" for k in ("min", "max", "last"))
                if scale
                else "not used",
            ),
        ]
    )


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------


def soak_section(site: Site, soak: SoakFile) -> list[Html]:
    run = soak.run
    problems = [p for p in as_list(soak.section.get("problems")) if p]
    body = [
        el("h2", f"{run.label or run.id}", id=soak.anchor),
        el("p", short_text(soak), cls="note"),
        kv_table(facts(site, soak)),
    ]
    if problems:
        body.append(warn_list("Problems the soak reported:", problems))
    body += [el("h3", "Memory and step time"), *charts(site, soak)]
    body += [el("h3", "Drift"), drift_table(soak)]
    body += [el("h3", "Faults"), *fault_table(soak)]
    body += [el("h3", "Loss anomalies"), anomaly_table(soak)]
    return body


def intro() -> Html:
    return el(
        "p",
        "Each ",
        el("code", "dsbench soak"),
        " below trained one job for long and recorded, per "
        "rank every few steps, resident memory (on GPUs also device memory), step time, loss "
        "and loss scale. Drift is the least-squares slope per 1,000 steps after warm-up, with a "
        "99% interval that allows for neighbouring samples being alike: ",
        el("strong", "flat"),
        " when the whole interval lies below the threshold, ",
        el("strong", "growing"),
        " when it lies wholly above, ",
        el("strong", "inconclusive"),
        " otherwise. With faults, "
        "the job is trained once without them (the reference, whose curves are drawn) and again "
        "with failures injected; every restart's losses are checked against the reference's bit "
        "for bit. What each soak ran is stated above its numbers: a soak of minutes on a CPU is "
        "no 72-hour run on GPUs.",
        cls="note",
    )


def stability_page(site: Site) -> None:
    soaks = soak_files(site.runs)
    body: list[Any] = [intro()]
    if not soaks:
        body.append(
            el(
                "p",
                "No soak results yet: ",
                el("code", SOAK_COMMAND),
                " (drift) or ",
                el("code", FAULT_COMMAND),
                " (faults) writes one.",
                cls="warn",
            )
        )
    else:
        body.append(
            el(
                "ul",
                *(
                    el(
                        "li",
                        link(f"{PAGE}#{s.anchor}", s.run.label or s.run.id),
                        ": ",
                        short_text(s),
                    )
                    for s in soaks
                ),
                cls="plain",
            )
        )
    for soak in soaks:
        body += soak_section(site, soak)
    site.write(PAGE, "Stability", join(body))
