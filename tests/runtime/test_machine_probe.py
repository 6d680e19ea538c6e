"""The machine probe the benchmarks record next to their figures (cpp/runtime/testing/
core_latency.h): a cache line's round trip between two cores, positive and finite; bad arguments
raise a ValueError naming them."""

import math

import pytest

from torch_vdev import _testing as rt


def test_the_round_trip_is_a_positive_time():
    ns = rt.cache_line_round_trip_ns(iterations=2000, rounds=1)
    assert math.isfinite(ns) and ns > 0


@pytest.mark.parametrize("iterations,rounds", [(0, 1), (10, 0), (-5, 3)])
def test_bad_arguments_raise(iterations, rounds):
    with pytest.raises(ValueError, match="iterations and rounds must be >= 1"):
        rt.cache_line_round_trip_ns(iterations=iterations, rounds=rounds)
