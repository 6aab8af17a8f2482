"""``dsbench profiles [NAME] [--json] [--calibrate]``: list hardware profiles or show one.

Without NAME: one row per profile (memory, bandwidths, fp16/bf16 peaks). With NAME: every
figure with its unit and source; ``n/a`` figures give the reason, measured ones are marked.
``--calibrate`` measures (again) the local CPU's ceilings for the ``cpu`` profile and shows them.
"""

from __future__ import annotations

import argparse
import json

from tabulate import tabulate

from dsbench import hardware
from dsbench.errors import UsageError, choices_message

LIST_HEADERS = [
    "name",
    "title",
    "backend",
    "arch",
    "mem GB",
    "mem BW GB/s",
    "fp16 TFLOP/s",
    "bf16 TFLOP/s",
    "link GB/s",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="profile to show (default: list all)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="measure the local CPU's memory bandwidth and matmul rates for the 'cpu' profile "
        "(refreshes the cached calibration)",
    )


def _cell(figure: hardware.Figure) -> str:
    if figure.value is not None:
        return f"{figure.value:g}"
    return "n/a" if figure.na is not None else "measured"


def list_rows(profiles: dict[str, hardware.Profile]) -> list[list[str]]:
    """One table row per profile, in name order."""
    rows = []
    for profile in sorted(profiles.values(), key=lambda p: p.name):
        rows.append(
            [
                profile.name,
                profile.title,
                profile.backend,
                profile.arch,
                _cell(profile.memory_capacity_gb),
                _cell(profile.memory_bandwidth_gbps),
                _cell(profile.peak_tflops["fp16_matrix"]),
                _cell(profile.peak_tflops["bf16_matrix"]),
                _cell(profile.link_bandwidth_gbps),
            ]
        )
    return rows


def show_text(profile: hardware.Profile) -> str:
    """Every figure of one profile with unit and source."""
    detect = "yes" if profile.detect else "no"
    patterns = ", ".join(repr(p) for p in profile.device_patterns) or "(none)"
    lines = [
        f"{profile.name}: {profile.title}",
        f"  vendor {profile.vendor}, backend {profile.backend}, arch {profile.arch}",
        f"  auto-detected: {detect}; device name patterns: {patterns}",
    ]
    if profile.memory_range_gib:
        low, high = profile.memory_range_gib
        lines.append(f"  detection memory range: {low:g}-{high:g} GiB")
    if profile.notes:
        lines.append(f"  notes: {profile.notes}")
    lines.append(f"  file: {profile.path}")
    rows = []
    for name, figure in profile.figures().items():
        if figure.value is not None:
            value = f"{figure.value:.4g}" if figure.measured else f"{figure.value:g}"
            status = "measured" if figure.measured else ""
            note = figure.source
        elif figure.na is not None:
            value, status, note = "n/a", "", f"{figure.na} [{figure.source}]"
        else:
            value, status = "-", "measured"
            note = f"{figure.source} (not calibrated yet: dsbench profiles --calibrate)"
        rows.append([name, value, figure.unit, status, note])
    table = tabulate(
        rows,
        headers=["figure", "value", "unit", "", "source / reason"],
        maxcolwidths=[None, None, None, None, 72],
        disable_numparse=True,
    )
    return "\n".join(lines) + "\n\n" + table


def run(args: argparse.Namespace) -> int:
    profiles = hardware.load_profiles()
    name = args.name
    if name is not None and name not in profiles:
        raise UsageError(choices_message("profile", name, profiles))
    if args.calibrate:
        if name not in (None, "cpu"):
            raise UsageError(
                f"--calibrate measures the local CPU for the 'cpu' profile, not '{name}'"
            )
        name = "cpu"
        profiles["cpu"] = hardware.calibrate(profiles["cpu"], "cpu", force=True)
    elif "cpu" in profiles:  # show an earlier calibration of this machine, never measure here
        profiles["cpu"] = hardware.calibrate(profiles["cpu"], "cpu", measure=False)

    if name is None:
        if args.json:
            print(json.dumps([p.to_dict() for _, p in sorted(profiles.items())], indent=2))
        else:
            print(tabulate(list_rows(profiles), headers=LIST_HEADERS, disable_numparse=True))
        return 0
    profile = profiles[name]
    print(json.dumps(profile.to_dict(), indent=2) if args.json else show_text(profile))
    return 0
