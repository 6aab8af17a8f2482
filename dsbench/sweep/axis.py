"""The sides of a sweep from one axis: ``deepspeed=0.17.2,0.18.3..0.19.8``, ``commit=A..B``,
``python=3.11,3.12``. A range ``X..Y`` is every release (for ``deepspeed``, the versions pip's
index lists, oldest first) or every first-parent commit (for ``commit``, X included) from X to
Y; a list may mix single values and ranges."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from dsbench.errors import UsageError

SWEEP_KINDS = ("deepspeed", "commit", "python")
MAX_SIDES = 40
"""More sides than this is a typo in a range, not a sweep (every round runs each of them)."""


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def deepspeed_releases() -> list[str]:
    """DeepSpeed's releases pip's index lists (final releases only), oldest first."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "deepspeed"],
        capture_output=True,
        text=True,
    )
    m = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not m:
        raise UsageError(
            "--axis deepspeed=X..Y: pip cannot list DeepSpeed's releases here (no index?); "
            "give the versions one by one, e.g. deepspeed=0.18.3,0.18.4"
        )
    found = [v.strip() for v in m.group(1).split(",")]
    return sorted((v for v in found if re.fullmatch(r"\d+(\.\d+)+", v)), key=version_key)


def commit_range(root: Path, first: str, last: str) -> list[str]:
    """``first`` and the first-parent commits after it up to ``last``, oldest first (as
    short shas)."""
    out = []
    for ref in (first, last):
        proc = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                              cwd=root, capture_output=True, text=True)  # fmt: skip
        if proc.returncode != 0:
            raise UsageError(f"--axis commit={first}..{last}: unknown commit '{ref}' in {root}")
        out.append(proc.stdout.strip())
    proc = subprocess.run(
        ["git", "rev-list", "--reverse", "--first-parent", f"{out[0]}..{out[1]}"],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    shas = proc.stdout.split()
    if proc.returncode != 0 or not shas:
        raise UsageError(f"--axis commit={first}..{last}: {last} does not follow {first}")
    return [s[:12] for s in [out[0], *shas]]


def parse_axis(text: str, *, releases=deepspeed_releases, root: Path | None = None) -> list[str]:
    """The sides (``KIND=VALUE`` texts, in the axis' order) an ``--axis`` names; a
    :class:`UsageError` for anything else."""
    kind, sep, values = text.partition("=")
    kind = kind.strip()
    if kind not in SWEEP_KINDS or not sep or not values.strip():
        kinds = ", ".join(SWEEP_KINDS)
        raise UsageError(f"--axis '{text}': give KIND=LIST with KIND one of {kinds}, "
                         "e.g. deepspeed=0.17.2,0.18.3..0.18.9")  # fmt: skip
    out: list[str] = []
    known: list[str] | None = None
    for item in (x.strip() for x in values.split(",")):
        first, dots, last = item.partition("..")
        if not item or (dots and not (first and last)):
            raise UsageError(f"--axis '{text}': '{item}' is neither a value nor a range X..Y")
        if not dots:
            out.append(item)
        elif kind == "python":
            raise UsageError(f"--axis '{text}': list Python versions one by one (3.11,3.12)")
        elif kind == "commit":
            from dsbench.ab import commit_repo

            out += commit_range(root or commit_repo()[0], first, last)
        else:
            known = known if known is not None else releases()
            lo, hi = version_key(first), version_key(last)
            picked = [v for v in known if lo <= version_key(v) <= hi]
            missing = [v for v in (first, last) if v not in known]
            if missing:
                raise UsageError(f"--axis '{text}': no DeepSpeed release {missing[0]} in pip's "
                                 f"index (newest: {', '.join(known[-3:])})")  # fmt: skip
            out += picked
    sides = list(dict.fromkeys(out))
    if len(sides) < 2:
        raise UsageError(f"--axis '{text}': a sweep needs at least two sides, got {len(sides)}")
    if len(sides) > MAX_SIDES:
        raise UsageError(f"--axis '{text}': {len(sides)} sides; at most {MAX_SIDES} a sweep")
    return [f"{kind}={v}" for v in sides]
