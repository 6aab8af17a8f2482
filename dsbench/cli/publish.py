"""``dsbench publish [--out DIR] [--results DIR]``: every result (dsbench's and asv's) as a
static site that works offline: runs by machine and versions, comparison pages with charts,
a page per run with its environment, modelled cross-profile tables, rooflines and claims.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dsbench.publish import build
from dsbench.publish.site import MARKER


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=Path("site"),
        help="where to write the site (default: site/); an existing folder is replaced only "
        f"if it is a site dsbench wrote (it holds {MARKER})",
    )
    p.add_argument(
        "--results",
        metavar="DIR",
        default=None,
        help="results folder (default: $DSBENCH_RESULTS or ./results)",
    )


def run(args: argparse.Namespace) -> int:
    done = build.publish(args.results, args.out)
    print(
        f"wrote {done.out}/ ({done.runs} runs, {done.pages} pages, {done.images} charts); "
        f"open {done.out / 'index.html'}"
    )
    for title in done.without_data:
        print(f"  no data for {title} (comparisons.html says what to run)")
    return 0
