"""Shared timing helper for the benchmarks: warm-up, repeats, min and median, JSON out.

Every figure is a per-call time in nanoseconds. Ratios are only meaningful against a baseline
measured in the same run on the same machine, so each benchmark measures its baseline itself.

    python benchmarks/timing.py compare old.json new.json   # side by side
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from collections.abc import Callable

UNROLL = 20  # calls per loop iteration, so the Python loop costs little next to the call


def _unrolled(stmt: str, env: dict) -> Callable[[int], None]:
    body = "\n".join("        " + stmt for _ in range(UNROLL))
    src = f"def _run(n):\n    for _ in range(n):\n{body}\n"
    scope = dict(env)
    exec(src, scope)  # noqa: S102 (benchmark code generation from literal statements)
    return scope["_run"]


def measure(
    stmt: str, env: dict, *, calls: int = 200_000, repeats: int = 15, warmup: int = 3, per: int = 1
) -> dict:
    """Times `stmt` (a Python statement using names from `env`).

    Returns min and median nanoseconds per execution of `stmt` divided by `per` (the number of
    operations the statement performs)."""
    run = _unrolled(stmt, env)
    iters = max(1, calls // UNROLL)
    for _ in range(warmup):
        run(iters)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        run(iters)
        samples.append((time.perf_counter_ns() - t0) / (iters * UNROLL * per))
    return {
        "min_ns": round(min(samples), 2),
        "median_ns": round(statistics.median(samples), 2),
        "repeats": repeats,
        "calls_per_repeat": iters * UNROLL,
    }


def min_median(samples: list[float], unit: str, digits: int | None = None) -> dict:
    """{"min_<unit>": ..., "median_<unit>": ...} of `samples`, rounded to `digits` if given."""
    lo, mid = min(samples), statistics.median(samples)
    if digits is not None:
        lo, mid = round(lo, digits), round(mid, digits)
    return {f"min_{unit}": lo, f"median_{unit}": mid}


def with_ratio(result: dict, baseline: dict, baseline_name: str) -> dict:
    out = dict(result)
    out["baseline"] = baseline_name
    out["ratio_min"] = round(result["min_ns"] / baseline["min_ns"], 3)
    out["ratio_median"] = round(result["median_ns"] / baseline["median_ns"], 3)
    return out


def parse_args():
    """The options every benchmark takes: --out FILE (also write the JSON there) and --quick
    (fewer calls: a smoke run, not figures to quote)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="also write the JSON report to this file")
    parser.add_argument("--quick", action="store_true", help="fewer calls (smoke run)")
    return parser.parse_args()


def at_most(limit: float, value: float) -> dict:
    """A target entry: `value` (a median, or a ratio of medians) must not exceed `limit`."""
    return {"max": limit, "value": value, "met": value <= limit}


def at_least(limit: float, value: float) -> dict:
    """A target entry: `value` must reach `limit`."""
    return {"min": limit, "value": value, "met": value >= limit}


def environment() -> dict:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
    }


def settle(seconds: float = 0.03) -> None:
    """Waits before a timed run until the other process's OpenMP threads, which spin for about
    9 ms (measured) after their last parallel region (libgomp's default spin count), have
    parked. Busy, not asleep: an idle virtual CPU is slow to come back (measured: a 100 ms sleep
    before the small-operator loop made both sides 1.5x slower)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def cache_line_round_trip_ns() -> float:
    """How long a cache line takes to another core and back, now (median of 3 x 200,000 hand-offs
    between two threads). Every task the host hands a stream worker costs a few such trips, and on
    a virtual machine the figure changes with where the virtual CPUs sit (this project's 2-vCPU
    VM: 55-70 ns most of the time, ~320 ns in phases of seconds to minutes, when the small-operator
    figures are 1.3-1.5x worse): benchmarks of the hand-off record it before and after they run."""
    from torch_vdev import _testing

    return round(_testing.cache_line_round_trip_ns(), 1)


def emit(report: dict, path: str | None) -> None:
    text = json.dumps(report, indent=2)
    print(text)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")


def compare(a_path: str, b_path: str) -> None:
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    print(f"{'case':40} {'A median ns':>12} {'B median ns':>12} {'B/A':>7}")
    for name, ra in a["results"].items():
        rb = b["results"].get(name)
        if rb:
            print(
                f"{name:40} {ra['median_ns']:12.1f} {rb['median_ns']:12.1f} "
                f"{rb['median_ns'] / ra['median_ns']:7.2f}"
            )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: python benchmarks/timing.py compare A.json B.json")
