"""User-facing errors: each becomes one line on stderr and exit status 2."""

import difflib
from collections.abc import Iterable


class UsageError(Exception):
    """Bad input from the user (CLI argument, config, selector, file): one line, exit 2.

    The message is one line whatever it quotes: a key or value read from a file may hold line
    breaks or other unprintable characters, which are escaped as Python writes them (``\\n``).
    """

    def __init__(self, message: str = ""):
        super().__init__(one_line(str(message)))


def one_line(text: str) -> str:
    """``text`` with every unprintable character (line breaks included) escaped: 'a\\nb'."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def choices_message(kind: str, given: str, valid: Iterable[str]) -> str:
    """'unknown suite 'qiuck' (did you mean 'quick'?); valid: full, quick, smoke'."""
    valid = sorted(valid)
    close = difflib.get_close_matches(given, valid, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown {kind} '{given}'{hint}; valid: {', '.join(valid) or '(none)'}"
