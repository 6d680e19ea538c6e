"""Profiler cost (issue 33): host time of a small queued operator (x + y on 1-element vdev
tensors, n ops then one synchronize) with no profiler, and inside torch.profiler.profile with
ProfilerActivity.CPU only and with CPU + PrivateUse1 (vdev's device timeline on). The baseline,
measured in the same run, is the same loop with no profiler; the CPU-only profile is the cost of
torch's own operator recording, so the difference between the two profiles is what vdev's device
timeline adds per task.

    python benchmarks/bench_profiler.py [--out results.json] [--quick]
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from timing import emit, environment, parse_args  # noqa: E402


def timed(run, repeats: int) -> dict:
    run()  # warm-up: plans cached, workers started
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        run()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return {"min_ms": round(min(samples), 3), "median_ms": round(statistics.median(samples), 3)}


def main() -> int:
    args = parse_args()
    reps = 3 if args.quick else 7
    n_ops = 500 if args.quick else 5_000
    x = torch.ones(1, device="vdev")
    y = torch.ones(1, device="vdev")

    def loop():
        for _ in range(n_ops):
            x + y
        torch.vdev.synchronize()

    def profiled(activities):
        def run():
            with profile(activities=activities):
                loop()

        return run

    def empty_profile(activities):
        def run():
            with profile(activities=activities):
                pass

        return run

    plain = timed(loop, reps)
    results = {"no_profiler": plain}
    for name, acts in [
        ("profile_cpu", [ProfilerActivity.CPU]),
        ("profile_cpu_and_vdev", [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]),
    ]:
        whole = timed(profiled(acts), reps)
        overhead = timed(empty_profile(acts), reps)  # starting, stopping and processing a trace
        per_op_us = (whole["median_ms"] - overhead["median_ms"]) * 1e3 / n_ops
        results[name] = {
            **whole,
            "empty_profile_ms": overhead["median_ms"],
            "us_per_op": round(per_op_us, 3),
            "ratio_median_vs_no_profiler": round(per_op_us * n_ops / 1e3 / plain["median_ms"], 3),
        }
    results["no_profiler"]["us_per_op"] = round(plain["median_ms"] * 1e3 / n_ops, 3)
    results["device_timeline_us_per_task"] = round(
        results["profile_cpu_and_vdev"]["us_per_op"] - results["profile_cpu"]["us_per_op"], 3
    )
    emit(
        {
            "benchmark": "profiler",
            "env": environment(),
            "ops_per_repeat": n_ops,
            "results": results,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
