"""The claims of a results folder (``results/claims/*.toml``), each beside its check against the
runs: what the claims page lists and the index's panels show."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dsbench.publish.data.claims.data import Claim
from dsbench.publish.data.claims.load import load_claims
from dsbench.publish.data.claims.verdicts import check
from dsbench.records import ClaimCheck
from dsbench.results import CLAIMS_DIR, Run

__all__ = ["CheckedClaims", "check_folder"]


@dataclass(frozen=True)
class CheckedClaims:
    folder: Path
    """Where the claim files are (``<results>/claims``)."""
    claims: list[Claim]
    checks: list[ClaimCheck]
    """One per claim, in the same order (:func:`~dsbench.publish.data.claims.check`)."""
    problems: list[str]
    """The claim files skipped, one line each."""

    @property
    def pairs(self) -> list[tuple[Claim, ClaimCheck]]:
        """Each claim beside its check."""
        return list(zip(self.claims, self.checks, strict=True))


def check_folder(
    results_root: Path, runs: Sequence[Run], warn: Callable[[str], None]
) -> CheckedClaims:
    """Load the results folder's claim files (a file that does not load is skipped, with a
    ``warn``) and check each claim against ``runs``."""
    folder = results_root / CLAIMS_DIR
    problems: list[str] = []

    def note(msg: str) -> None:
        problems.append(msg)
        warn(msg)

    loaded = load_claims(folder, warn=note) if folder.is_dir() else []
    checks = check(loaded, runs) if loaded else []
    return CheckedClaims(folder, loaded, checks, problems)
