"""Graph replay against eager launch, host time, measured in the same run.

Target (issue 15): replaying a captured graph of 100 small operators costs the host at most 0.3x
of launching the same 100 operators eagerly. Only the launching is timed; the device's work is
waited for between samples, outside the timed region, so a slow device never inflates the host
figure and the queue never grows. Also reported: the device time of a replay and of the eager
launch (launch + synchronize), for information.

    python benchmarks/bench_graphs.py [--out results.json] [--quick]
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import torch_vdev  # noqa: E402,F401
from timing import at_most, emit, environment, parse_args  # noqa: E402

OPS = 100
TARGET = 0.3


def program(x, y):
    """100 small operators on 256-element tensors: in-place updates and temporaries."""
    for _ in range(OPS // 4):
        t = x * 0.5
        y.add_(t)
        x.copy_(torch.sin(y))


def timed(launch, repeats, per_sample):
    """min/median host ns of one launch() (average over per_sample launches, device idle before
    each launch)."""
    samples = []
    for _ in range(repeats):
        total = 0
        for _ in range(per_sample):
            torch.vdev.synchronize()
            t0 = time.perf_counter_ns()
            launch()
            total += time.perf_counter_ns() - t0
        samples.append(total / per_sample)
    torch.vdev.synchronize()
    return {
        "min_ns": round(min(samples)),
        "median_ns": round(statistics.median(samples)),
        "repeats": repeats,
        "launches_per_repeat": per_sample,
    }


def wall(launch, repeats):
    samples = []
    for _ in range(repeats):
        torch.vdev.synchronize()
        t0 = time.perf_counter_ns()
        launch()
        torch.vdev.synchronize()
        samples.append(time.perf_counter_ns() - t0)
    return {
        "min_ns": round(min(samples)),
        "median_ns": round(statistics.median(samples)),
        "repeats": repeats,
    }


def main() -> int:
    args = parse_args()
    repeats, per_sample = (5, 10) if args.quick else (15, 40)
    x = torch.rand(256, device="vdev")
    y = torch.rand(256, device="vdev")
    stream = torch.vdev.Stream()
    for _ in range(3):
        program(x, y)  # warm the plan cache before capture, as eager launch is measured warm
    g = torch.accelerator.Graph()
    with stream, g:
        program(x, y)

    eager = timed(lambda: program(x, y), repeats, per_sample)
    replay = timed(g.replay, repeats, per_sample)
    replay["ratio_median"] = round(replay["median_ns"] / eager["median_ns"], 4)
    replay["ratio_min"] = round(replay["min_ns"] / eager["min_ns"], 4)
    replay["baseline"] = f"eager launch of the same {OPS} operators"
    results = {
        f"eager_launch_{OPS}_ops_host": eager,
        f"graph_replay_{OPS}_ops_host": replay,
        f"eager_{OPS}_ops_wall": wall(lambda: program(x, y), repeats),
        f"graph_replay_{OPS}_ops_wall": wall(g.replay, repeats),
    }
    targets = {f"graph_replay_{OPS}_ops_host": at_most(TARGET, replay["ratio_median"])}
    emit(
        {"benchmark": "graphs", "env": environment(), "results": results, "targets": targets},
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
