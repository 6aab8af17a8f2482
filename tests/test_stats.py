"""Statistics: CI of the median and Mann–Whitney U against hand-checked values."""

import pytest

from dsbench.stats import (
    mann_whitney_u,
    median_ci,
    significantly_different,
    summarize,
)


def test_median_ci_matches_binomial_tables():
    # n = 100, 99%: order statistics 37 and 64 (standard tables, e.g. Conover).
    assert median_ci(range(1, 101)) == (37.0, 64.0, True)
    # n = 8 is the smallest n with an exact 99% interval: P(B <= 0) = 1/256 <= 0.005.
    assert median_ci([5, 1, 4, 2, 8, 7, 3, 6]) == (1.0, 8.0, True)


def test_median_ci_too_few_samples_is_full_range_and_flagged():
    lo, hi, exact = median_ci([3.0, 1.0, 2.0, 9.0])
    assert (lo, hi, exact) == (1.0, 9.0, False)


def test_summary_fields():
    s = summarize(list(range(1, 10)))
    assert (s.n, s.median, s.q1, s.q3, s.iqr) == (9, 5.0, 3.0, 7.0, 4.0)
    assert (s.min, s.max, s.mean) == (1.0, 9.0, 5.0)
    # n = 9: P(B <= 0) = 1/512 <= 0.005 but P(B <= 1) = 10/512 > 0.005, so x_(1)..x_(9)
    assert s.ci_exact and (s.ci_low, s.ci_high) == (1.0, 9.0)


@pytest.mark.parametrize(
    ("a", "b", "u", "p"),
    [
        # complete separation, n = m = 3: U = 0; exact two-sided p = 2 * 1/20 = 0.1
        ([1, 2, 3], [4, 5, 6], 0.0, 0.1),
        # interleaved: pairs a > b are (3,2), (5,2), (5,4): U = 3;
        # P(U <= 3) = (1+1+2+3)/20 = 0.35, two-sided 0.7
        ([1, 3, 5], [2, 4, 6], 3.0, 0.7),
        # n = m = 5 fully separated: U = 25, p = 2 / C(10,5) = 2/252
        ([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], 25.0, 2 / 252),
    ],
)
def test_mann_whitney_u_hand_checked(a, b, u, p):
    got_u, got_p = mann_whitney_u(a, b)
    assert got_u == u
    assert got_p == pytest.approx(p, rel=1e-9)


def test_significance_uses_u_test_with_samples():
    fast = [1.0 + 0.01 * i for i in range(20)]
    slow = [1.5 + 0.01 * i for i in range(20)]
    same = [1.005 + 0.01 * i for i in range(20)]
    sig, test = significantly_different(summarize(fast), summarize(slow), fast, slow)
    assert sig and test.startswith("U p=")
    sig, _ = significantly_different(summarize(fast), summarize(same), fast, same)
    assert not sig


def test_significance_falls_back_to_ci_overlap():
    a, b = summarize([1.0, 1.1, 1.2]), summarize([5.0, 5.1, 5.2])
    assert significantly_different(a, b) == (True, "CIs disjoint")
    c = summarize([1.1, 1.2, 1.3])
    assert significantly_different(a, c) == (False, "CI overlap")
