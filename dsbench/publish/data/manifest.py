"""The results folder's manifest (``<results>/manifest.toml``): each reference run's purpose in
one line, shown on its run page and in the index. The project's ``results/`` keeps reference
runs only, each listed there; a results folder without a manifest publishes as before, with no
purposes. The file::

    schema = "dsbench-manifest"
    schema_version = 1

    [[runs]]
    file = "<machine>/<run file>.json"   # relative to the results folder, with / between parts
    purpose = "one line: what the run is for"

Reading it never fails a publish: a malformed manifest, or an entry that is malformed or
repeated, is named in one warning and left out.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

FILE = "manifest.toml"
SCHEMA = "dsbench-manifest"
SCHEMA_VERSION = 1


def load(root: Path, warn: Callable[[str], None]) -> dict[str, str]:
    """``file`` (relative to ``root``, posix) -> ``purpose``; {} when ``root`` has no manifest."""
    path = root / FILE
    if not path.is_file():
        return {}
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        warn(f"{path}: not read ({e}); runs are published without their purposes")
        return {}
    if doc.get("schema") != SCHEMA or doc.get("schema_version") != SCHEMA_VERSION:
        warn(f"{path}: not a {SCHEMA} file of schema_version {SCHEMA_VERSION}; ignored")
        return {}
    entries = doc.get("runs", [])
    if not isinstance(entries, list):
        warn(f"{path}: 'runs' is not a list of [[runs]] tables; ignored")
        return {}
    out: dict[str, str] = {}
    for i, entry in enumerate(entries, 1):
        problem = _problem(entry, out)
        if problem:
            warn(f"{path}: entry {i} left out: {problem}")
        else:
            out[entry["file"]] = entry["purpose"].strip()
    return out


def _problem(entry: object, seen: dict[str, str]) -> str | None:
    """Why a ``[[runs]]`` entry cannot be used, or None."""
    if not isinstance(entry, dict):
        return "not a table"
    file, purpose = entry.get("file"), entry.get("purpose")
    if not isinstance(file, str) or not file:
        return "no 'file' string"
    if not isinstance(purpose, str) or not purpose.strip():
        return f"{file}: no 'purpose' string"
    if "\n" in purpose.strip():
        return f"{file}: the purpose is not one line"
    rel = PurePosixPath(file)
    if rel.is_absolute() or ".." in rel.parts or str(rel) != file:
        return f"{file}: not a plain path inside the results folder"
    if file in seen:
        return f"{file}: listed twice"
    return None


def key(run_path: Path, root: Path) -> str | None:
    """A run file's key in the manifest (its path relative to ``root``), or None outside it."""
    try:
        return run_path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None
