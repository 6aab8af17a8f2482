"""Statistics: CI of the median against tables; verdicts from rounds: the exact test's limit,
simulated A/A comparisons (false verdicts) and A/B ones (power)."""

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from dsbench.stats import (
    Noise,
    centre,
    judge,
    median_ci,
    min_exact_p,
    round_spread,
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


@pytest.mark.parametrize(("n", "m"), [(3, 3), (4, 4), (5, 5), (3, 8), (2, 40)])
def test_min_exact_p_is_scipys_exact_p_at_complete_separation(n, m):
    a, b = np.arange(n, dtype=float), np.arange(n, n + m, dtype=float)
    exact = mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
    assert min_exact_p(n, m) == pytest.approx(exact, rel=1e-9)


def test_min_exact_p_of_thousands_of_samples():
    assert min_exact_p(1800, 1800) == 0.0  # 2 / C(3600, 1800) underflows; no OverflowError
    assert min_exact_p(0, 5) == 1.0


def test_centre_and_spread_of_rounds():
    rounds = [[1.0, 2.0, 3.0], [4.0], [8.0, 8.0]]  # medians 2, 4, 8: geometric mean 4
    assert centre(rounds) == pytest.approx(4.0)
    sigma, df = round_spread(rounds)
    assert df == 2 and sigma == pytest.approx(np.log(2))  # logs are equally spaced by log 2
    assert round_spread([[1.0, 2.0]]) == (0.0, 0)


@pytest.mark.parametrize(("n", "rounds"), [(2, 1), (3, 1), (4, 1), (2, 2), (1, 4)])
def test_small_samples_never_decide_where_the_exact_test_cannot(n, rounds):
    # min_exact_p(k, k) >= 0.01 for k <= 4 samples a side: a 10x difference, a tight noise
    # figure, and still no better/worse
    tight = Noise(sigma=1e-4, df=1000)
    base = [[100.0 + i for i in range(n)]] * rounds
    cont = [[1000.0 + i for i in range(n)]] * rounds
    v = judge(base, cont, direction="higher", noise=tight)
    assert v.change == "inconclusive" and "too few samples" in v.why


def test_single_values_and_single_rounds_are_inconclusive():
    v = judge([[1.0]], [[2.0]] * 9, direction="higher")
    assert v.change == "inconclusive" and v.why.startswith("one value on a side")
    v = judge([list(np.linspace(1, 1.01, 20))], [list(np.linspace(2, 2.02, 20))],
              direction="higher")  # fmt: skip
    assert v.change == "inconclusive" and v.why.startswith("one round per side")


def test_rows_at_or_below_zero_are_unchanged_only_when_every_value_is_the_same():
    # a soak's count of loss anomalies: none in any of 5 soaks a side
    v = judge([[0.0]] * 5, [[0.0]] * 5, direction="lower")
    assert v.change == "unchanged" and (v.low, v.high) == (1.0, 1.0)
    assert v.method == "every value 0 on both sides, 5+5 rounds"
    # one anomaly in one soak: no ratio of counts that include zero can be judged
    v = judge([[0.0]] * 5, [[0.0]] * 4 + [[1.0]], direction="lower")
    assert v.change == "inconclusive" and v.why.startswith("values at or below zero")
    # a signed drift spread from soak to soak
    v = judge([[-61.0], [-3.0], [4.0]], [[-8.0], [2.0], [-1.0]], direction="lower")
    assert v.change == "inconclusive" and v.low is None
    # equal zeros, but too few for the exact test to reach p < 0.01
    v = judge([[0.0]] * 3, [[0.0]] * 3, direction="lower")
    assert v.change == "inconclusive"


def test_an_interval_off_x1_across_the_factor_says_something_changed():
    """x0.93 with 36 rounds a side spread by 4%: the interval lies below x1 but reaches across
    x1/1.05 (a 1 MiB collective on Python 3.12): inconclusive, saying a change was seen; an
    interval around x1 does not say so."""
    rng = np.random.default_rng(3)
    v = judge(_side(rng, 36, 0.04), _side(rng, 36, 0.04, shift=np.log(0.94)), direction="higher")
    assert v.change == "inconclusive" and v.high < 1 and v.low < 1 / 1.05 < v.high
    assert v.why.endswith("yet it excludes x1: a change whose size against x1.05 is not yet known")
    v = judge(_side(rng, 3, 0.1), _side(rng, 3, 0.1), direction="higher")
    assert v.change == "inconclusive" and v.low < 1 < v.high and "excludes" not in v.why


def _side(rng, rounds, between, within=0.01, n=20, shift=0.0):
    return [
        list(np.exp(shift + rng.normal(0, between) + rng.normal(0, within, n)))
        for _ in range(rounds)
    ]


@pytest.mark.parametrize(
    ("rounds", "between"),
    [(2, 0.15), (3, 0.15), (3, 0.03), (6, 0.15), (6, 0.02)],
)
def test_simulated_aa_is_rarely_decided(rounds, between):
    """1,000 A/A comparisons with launch-to-launch spread as on the 2-core VM (launches 10-30%
    apart: sd 0.15 of the log; quiet: 2-3%): at most 1% better or worse."""
    rng = np.random.default_rng(rounds * 100 + int(between * 100))
    decided = sum(
        judge(_side(rng, rounds, between), _side(rng, rounds, between), direction="higher",
              seed=i).change in ("better", "worse")
        for i in range(1000)
    )  # fmt: skip
    assert decided <= 10


def test_simulated_aa_with_heavy_tailed_launches():
    """Launch medians from a t(3) distribution (rare launches far off, as a GEMM launch 2.5x
    slower seen on the VM): rounds on both sides still give at most 1% false verdicts."""
    rng = np.random.default_rng(7)

    def launch():
        return list(np.exp(0.05 * rng.standard_t(3) + rng.normal(0, 0.01, 20)))

    for rounds in (2, 3, 6):
        decided = sum(
            judge([launch() for _ in range(rounds)], [launch() for _ in range(rounds)],
                  direction="higher", seed=i).change in ("better", "worse")
            for i in range(1000)
        )  # fmt: skip
        assert decided <= 10, rounds


def test_simulated_aa_single_launches_with_a_measured_noise_figure():
    """Two single-launch runs judged with a noise figure measured on the same machine (an A/A
    calibration of 8 launches, each trial its own): at most 1% false verdicts."""
    rng = np.random.default_rng(11)
    decided = 0
    for i in range(1000):
        sigma, df = round_spread(_side(rng, 8, 0.1))
        v = judge(_side(rng, 1, 0.1), _side(rng, 1, 0.1), direction="higher",
                  noise=Noise(sigma=sigma, df=df), seed=i)  # fmt: skip
        decided += v.change in ("better", "worse")
    assert decided <= 10


def test_power_ten_percent_found_two_percent_never_worse():
    """A 10% slowdown of a benchmark whose launches spread by 1.5% (AdamW on the quiet VM) is
    called worse in 6+6 rounds; a 2% one never is (it is within x1.05)."""
    rng = np.random.default_rng(3)
    ten = [
        judge(_side(rng, 6, 0.015), _side(rng, 6, 0.015, shift=np.log(0.9)),
              direction="higher", seed=i).change
        for i in range(200)
    ]  # fmt: skip
    assert ten.count("worse") >= 198
    two = [
        judge(_side(rng, 6, 0.015), _side(rng, 6, 0.015, shift=np.log(0.98)),
              direction="higher", seed=i).change
        for i in range(200)
    ]  # fmt: skip
    assert "worse" not in two and "better" not in two


def test_direction_and_interval_bounds():
    rng = np.random.default_rng(0)
    fast, slow = _side(rng, 6, 0.005), _side(rng, 6, 0.005, shift=np.log(1.5))
    up = judge(fast, slow, direction="higher")
    assert up.change == "better" and up.low > 1.05 and up.low <= up.ratio <= up.high
    assert up.method == "t(10)+bootstrap 6+6 rounds"
    assert judge(fast, slow, direction="lower").change == "worse"
    assert judge(fast[:3], slow[:3], direction="lower").method == "t(4) 3+3 rounds"
