"""User-facing errors: each becomes one line on stderr and exit status 2."""

import difflib
from collections.abc import Iterable


class UsageError(Exception):
    """Bad input from the user (CLI argument, config, selector, file): one line, exit 2."""


def choices_message(kind: str, given: str, valid: Iterable[str]) -> str:
    """'unknown suite 'qiuck' (did you mean 'quick'?); valid: full, quick, smoke'."""
    valid = sorted(valid)
    close = difflib.get_close_matches(given, valid, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown {kind} '{given}'{hint}; valid: {', '.join(valid) or '(none)'}"
