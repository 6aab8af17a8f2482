"""The hardware-profile pages: benchmark families × profiles (modelled floors beside measured
values, from :mod:`dsbench.publish.data.modelled`; every case in ``cross-profile.csv``) and a
roofline page per profile with the measured kernels."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from dsbench import hardware, results
from dsbench.publish import plots
from dsbench.publish.data import modelled
from dsbench.publish.data.facts import finite, num
from dsbench.publish.data.families import families, measured_rows, profiles_of
from dsbench.publish.html import Html, breakable, el, join, link, table
from dsbench.publish.pages.cells import share_html

if TYPE_CHECKING:
    from dsbench.publish.site import Site


def profiles_page(site: Site) -> None:
    profiles = hardware.load_profiles()
    body: list[Any] = [
        el("h2", "Rooflines"),
        el(
            "ul",
            *(
                el(
                    "li",
                    link(f"roofline/{results.slug(name)}.html", p.title),
                    f" ({name}, {p.backend})",
                )
                for name, p in profiles.items()
            ),
            cls="plain",
        ),
    ]
    df = modelled.cross_profile_table(site.runs)
    df.to_csv(site.root / "cross-profile.csv")
    body += [
        el("h2", "Modelled floors and measured values"),
        el(
            "p",
            "One row per benchmark family and metric, one column per profile: italic numbers are ",
            el("em", "modelled"),
            " (a floor from counted FLOPs and bytes and the profile's datasheet figures, α-β "
            "for collectives), never measured; a range spans the family's cases, and the line "
            "under it names what limits them. Measured values and efficiency appear only where "
            "a result from that hardware exists. Every case and column: ",
            link("cross-profile.csv", "cross-profile.csv"),
            ".",
            cls="note",
        ),
        matrix_html(df),
    ]
    measured = measured_rows(df)
    if len(measured):
        body += [el("h3", "Measured cases"), cross_table_html(measured)]
    notes = df.attrs.get("assumptions") or []
    if notes:
        body += [el("h3", "Modelling assumptions"), el("ul", *(el("li", n) for n in notes))]
    for name, profile in profiles.items():
        roofline_page(site, name, profile)
    site.write("profiles.html", "Hardware profiles: modelled and measured", join(body))


def roofline_page(site: Site, name: str, shipped: hardware.Profile) -> None:
    rel = f"roofline/{results.slug(name)}.html"
    title = f"Roofline: {shipped.title}"
    profile = modelled.stored_profile(site.runs, name) or shipped
    ceil = modelled.roofline_ceilings(profile)
    points = modelled.roofline_points(site.runs, name)
    body: list[Any] = [
        el(
            "p",
            "Ceilings are the profile's figures (datasheet, or measured on "
            "the machine where marked); points are measured kernels from "
            "the newest run on this profile. Kernels that count no FLOPs "
            "(AdamW, copy) sit at a nominal intensity on the bandwidth "
            "slope.",
            cls="note",
        ),
        _roofline_figure(site, name, shipped, ceil, points),
        table(["ceiling", "value", "kind", "source"], _ceiling_rows(ceil)),
    ]
    if points:
        body += [el("h2", "Measured kernels"), _points_table(points)]
    site.write(rel, title, join(body))


def _roofline_figure(
    site: Site, name: str, shipped: hardware.Profile, ceil: dict, points: list[dict]
) -> Html:
    """The roofline chart with the measured kernels, or why there is none."""
    peaks = dict(ceil.get("peaks") or {})
    bandwidth = ceil.get("bandwidth_Bps")
    if not (peaks or bandwidth):
        return el(
            "p",
            "This profile's ceilings are measured on the machine and no run on "
            "it is in the results yet: run `dsbench run` there.",
            cls="warn",
        )
    pts = [
        plots.RooflinePoint(
            str(i),
            float(p.get("plot_intensity") or 0),
            float(p.get("plot_flops_per_s") or 0),
        )
        for i, p in enumerate(points, 1)
    ]
    return site.figure(
        partial(plots.roofline, peaks, bandwidth, pts, title=shipped.title),
        depth=1,
        alt=f"roofline of {name}",
        caption=f"{len(pts)} measured kernel(s) on {name}."
        if pts
        else f"No measured kernels on {name} yet: run `dsbench run` on that hardware.",
    )


def _ceiling_rows(ceil: dict) -> list[list[Any]]:
    """One row per roof: value, datasheet or measured, source; then the ones with no value."""
    peaks = dict(ceil.get("peaks") or {})
    bandwidth = ceil.get("bandwidth_Bps")
    sources = ceil.get("sources") or {}
    measured = set(ceil.get("measured") or [])
    rows = [
        [
            k,
            f"{v / 1e12:.4g} TFLOP/s",
            "measured" if k in measured else "datasheet",
            sources.get(k, ""),
        ]
        for k, v in peaks.items()
    ]
    if bandwidth:
        rows.append(
            [
                "memory bandwidth",
                f"{bandwidth / 1e9:.4g} GB/s",
                "measured" if "bandwidth_Bps" in measured else "datasheet",
                sources.get("bandwidth_Bps", ""),
            ]
        )
    rows += [[k, "n/a", "", why] for k, why in (ceil.get("not_available") or {}).items()]
    return rows


def _points_table(points: list[dict]) -> Html:
    """The measured kernels, numbered as on the chart."""
    return table(
        ["#", "kernel", "FLOP/byte", "achieved TFLOP/s", "achieved GB/s", "run"],
        [
            [
                i,
                p.get("label"),
                finite(p.get("intensity")),
                finite((p.get("achieved_flops_per_s") or 0) / 1e12),
                finite((p.get("achieved_bytes_per_s") or 0) / 1e9),
                p.get("run_label") or p.get("run_id"),
            ]
            for i, p in enumerate(points, 1)
        ],
    )


def matrix_html(df) -> Html:
    """Benchmark families × profiles (:func:`dsbench.publish.data.families.families`): per cell
    the range of the modelled floors and what limits them, and where measured, the measured
    values and their efficiency; families nothing models or measures in one line."""
    found, bare = families(df)
    head = ["family", "metric", "unit", "cases", *profiles_of(df)]
    rows = []
    for f in found:
        cells: list[Any] = [el("strong", f.benchmark), f.metric, f.unit, f.cases]
        for c in f.cells.values():
            parts: list[Any] = [el("span", c.floors, cls="modelled"), el("br"),
                                el("span", c.limits, cls="muted")]  # fmt: skip
            if c.measured:
                parts += [el("br"), f"measured {c.measured_span} ({c.measured}), ",
                          f"{c.efficiency}%"]  # fmt: skip
            cells.append(join(parts))
        rows.append(cells)
    out = [table(head, rows, cls="matrix")]
    if bare:
        out.append(el("p", "Not modelled, not measured on these profiles: ",
                      ", ".join(dict.fromkeys(bare)), ".", cls="note"))  # fmt: skip
    return join(out)


def cross_table_html(df) -> Html:
    """The cross-profile DataFrame as a readable table: per profile the modelled floor (italic,
    its basis as a tooltip), the measured value and the efficiency; case columns first."""
    profiles = profiles_of(df)
    head1 = el(
        "tr",
        el("th", "benchmark", rowspan=2),
        el("th", "unit", rowspan=2),
        *(el("th", p, colspan=3, scope="colgroup") for p in profiles),
    )
    head2 = el(
        "tr",
        *(
            join([el("th", "modelled floor"), el("th", "measured"), el("th", "efficiency")])
            for _ in profiles
        ),
    )
    body = []
    for cid, row in df.iterrows():
        cells = [el("td", breakable(cid)), el("td", row[("case", "unit")])]
        for p in profiles:
            floor = finite(row[(p, "modelled floor value")])
            basis = row[(p, "modelled basis")]
            cells.append(
                el("td", num(floor) if floor is not None else "-", cls="num modelled", title=basis)
            )
            measured = finite(row[(p, "measured value")])
            eff = finite(row[(p, "measured efficiency")])
            cells.append(el("td", num(measured) if measured is not None else "-", cls="num"))
            cells.append(el("td", share_html(eff * 100 if eff is not None else None, False),
                            cls="num"))  # fmt: skip
        body.append(el("tr", *cells))
    return el("table", el("thead", head1, head2), el("tbody", *body))
