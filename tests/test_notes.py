"""Notes: one paragraph that explains a mechanism once, cited from where it matters.

One syntax, as FSDP2 writes them: a Note is defined where a comment or docstring line opens
with ``[Note: title]`` (``# [Note: title]``, then its paragraph), and cited anywhere else as
``See [Note: title]`` or ``([Note: title])``. Every cited Note is defined exactly once, and the
old ``Note [title]`` spelling is gone."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".py", ".md", ".cu", ".cuh", ".h", ".toml"}
NOTE = re.compile(r"\[Note: ([^\]]+)\]")
DEFINITION = re.compile(r"(?:#\s*)?\[Note: ([^\]]+)\](?!:)(?:\s|$)")


def _sources() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()  # fmt: skip
    this = Path(__file__).resolve()  # it spells the syntax out to check it
    paths = [ROOT / f for f in listed if Path(f).suffix in SUFFIXES]
    return [p for p in paths if p.is_file() and p != this]


def _notes() -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    """(title -> where it is defined, title -> where it is cited, old-style spellings)."""
    defined: dict[str, list[str]] = {}
    cited: dict[str, list[str]] = {}
    old = []
    for path in _sources():
        rel = path.relative_to(ROOT)
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            where = f"{rel}:{n}"
            if re.search(r"(?<!\[)Note \[[^\]]+\]", line):
                old.append(where)
            opening = DEFINITION.match(line.strip())
            for i, m in enumerate(NOTE.finditer(line)):
                is_def = i == 0 and opening is not None  # the line opens with this Note
                (defined if is_def else cited).setdefault(m.group(1), []).append(where)
    return defined, cited, old


def test_every_cited_note_is_defined_exactly_once():
    defined, cited, old = _notes()
    assert not old, f"old-style 'Note [title]' (write '[Note: title]'): {old}"
    twice = {t: w for t, w in defined.items() if len(w) > 1}
    assert not twice, f"Notes defined more than once: {twice}"
    missing = {t: w for t, w in cited.items() if t not in defined}
    assert not missing, f"cited but never defined: {missing}"
    assert len(defined) >= 20  # the check sees the tree's Notes


def test_the_check_tells_a_definition_from_a_citation():
    assert DEFINITION.match("# [Note: ceilings in slices]")
    assert DEFINITION.match("[Note: naming the cause] When one rank dies, its peers")
    assert not DEFINITION.match("# See [Note: landing in the reduction]: the reduce-scatter")
    assert not DEFINITION.match("(see [Note: drift over a long run]). Verdict")


LEDGER = ROOT / "docs" / "decisions.md"
CITED_ENTRY = re.compile(r'docs/decisions\.md,\s*(?:#\s*)?"([^"]+)"')


def test_every_entry_cited_from_the_code_is_in_the_ledger():
    """Code points to the ledger of measurements as ``docs/decisions.md, "Entry"``; each such
    entry is a ``## `` heading there, and each entry names the code it belongs to."""
    text = LEDGER.read_text()
    entries = re.findall(r"^## (.+)$", text, re.M)
    cited: dict[str, list[str]] = {}
    for path in _sources():
        joined = re.sub(r"\n\s*(?:#\s*)?", " ", path.read_text(errors="replace"))
        for m in CITED_ENTRY.finditer(joined):
            cited.setdefault(m.group(1), []).append(str(path.relative_to(ROOT)))
    missing = {title: where for title, where in cited.items() if title not in entries}
    assert not missing, f"cited but not a heading of {LEDGER.name}: {missing}"
    assert len(cited) >= 10
    sections = re.split(r"^## .+$", text, flags=re.M)[1:]
    assert all("*Code:" in s for s in sections), "every entry names its code"


DOCSTRING_LINES = 30


def test_module_docstrings_are_summaries():
    """A module docstring says what the module does, its entry points and the invariant with the
    test that checks it, in at most 30 lines (the closing quotes included); each mechanism lives in
    a Note next to its code, and measured figures in the ledger."""
    import ast

    long = {}
    for part in ("dsbench", "kernels", "benchmarks"):
        for path in sorted((ROOT / part).rglob("*.py")):
            tree = ast.parse(path.read_text())
            if ast.get_docstring(tree, clean=False) is None:
                continue
            first = tree.body[0]
            lines = first.end_lineno - first.lineno + 1
            if lines > DOCSTRING_LINES:
                long[str(path.relative_to(ROOT))] = lines
    assert not long, f"module docstrings over {DOCSTRING_LINES} lines: {long}"
