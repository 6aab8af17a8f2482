"""No module parses verdict or basis text back (issue 41 item 1): a compared row's change is a
`Change`, its reasons `Reason`s and a memory row says whose it is (`MemoryOf`), so nothing under
dsbench/ needs to read them out of `basis` or `detail`, or compare a `.change` with a
string. The checker walks each module's syntax tree; it is tested on samples, so it can fail."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEXTS = {"basis", "detail"}
"""Attributes that hold a compared row's rendered text (``row.basis``, ``row.detail``; a
verdict's ``why`` is left out: other records, gpu-check's steps, have a ``why`` of their own)."""
TYPED = {"change"}
"""Attributes that hold a typed value which formats as text (``row.change``)."""


def _is_text(node: ast.AST) -> bool:
    """``x.basis`` (any of :data:`TEXTS`, or :data:`TYPED`), or a bare name ``basis``."""
    if isinstance(node, ast.Attribute):
        return node.attr in TEXTS | TYPED
    return isinstance(node, ast.Name) and node.id == "basis"


def _is_literal(node: ast.AST) -> bool:
    """A string literal, or a tuple/list/set of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(_is_literal(e) for e in node.elts)
    return False


def parsing(source: str) -> list[tuple[int, str]]:
    """Where ``source`` reads verdict or basis text back: (line, what)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and _is_text(func.value):
                found.append((node.lineno, f"method .{func.attr}() on a text"))
            is_re = (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                     and func.value.id == "re")  # fmt: skip
            if is_re and any(_is_text(a) for a in node.args):
                found.append((node.lineno, f"re.{func.attr}() on a text"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, sides, sides[1:], strict=False):
                if isinstance(op, ast.In | ast.NotIn) and _is_text(right):
                    found.append((node.lineno, "'in' a text"))
                typed = [s for s in (left, right) if isinstance(s, ast.Attribute)
                         and s.attr in TYPED]  # fmt: skip
                if typed and _is_literal(right if typed[0] is left else left):
                    found.append((node.lineno, f".{typed[0].attr} against a string"))
    return found


@pytest.mark.parametrize(
    "sample",
    [
        'n = sum(r.basis.startswith("one value") for r in rows)',
        'reason = row.basis.split(" (", 1)[0]',
        'head, _, _ = row.basis.partition(";")',
        "short = r.detail.removesuffix(more)",
        'bad = "too few" in r.basis',
        'hit = re.search(r"\\d+ rounds", row.basis)',
        'ok = basis.endswith("]")',
        'if r.change == "worse": pass',
        'if "inconclusive" != row.change: pass',
        'decided = v.change in ("better", "worse")',
        'only = r.change.startswith("only in")',
    ],
)
def test_the_checker_finds_text_parsing(sample):
    assert parsing(sample), sample


def test_the_checker_passes_typed_reads():
    clean = "\n".join(
        [
            "n = sum(Reason.ONE_VALUE in r.reasons for r in rows)",
            "worse = [r for r in rows if r.change is Change.WORSE]",
            "decided = v.change in (Change.BETTER, Change.WORSE)",
            "line = f'{r.id}: {r.basis}'",
            "why = 'spread too wide'",
            "why += '; yet it excludes x1'",
            "kind = row.memory.kind if row.memory else None",
        ]
    )
    assert parsing(clean) == []


def test_no_module_parses_verdict_or_basis_text():
    found = {
        f"{path.relative_to(ROOT)}:{line}": what
        for path in sorted((ROOT / "dsbench").rglob("*.py"))
        for line, what in parsing(path.read_text(encoding="utf-8"))
    }
    assert not found, f"verdict or basis text read back (use the row's typed fields): {found}"
