"""Cost of vdev's sanitizer (torch.vdev.sanitizer): host time per small queued operator with each
tool on, against the same loop with the sanitizer off, measured alternately in the same run.

Target (issue 34): the stream sanitizer costs less than 3x the host time of a small op. The
"off" figure is also the hot path's cost of the hooks when nothing is on (one relaxed load each).

    python benchmarks/bench_sanitizer.py [--quick] [--out FILE]
"""

from __future__ import annotations

import time

import torch

from timing import at_most, emit, environment, min_median, parse_args


def per_op_us(n_ops: int, repeats: int, tools: str | None) -> list[float]:
    x = torch.ones(1, device="vdev")
    y = torch.ones(1, device="vdev")
    samples = []
    for _ in range(repeats):
        if tools:
            torch.vdev.sanitizer.enable(tools)
        torch.vdev.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n_ops):
            x + y
        t1 = time.perf_counter_ns()
        torch.vdev.synchronize()
        torch.vdev.sanitizer.disable()
        samples.append((t1 - t0) / n_ops / 1e3)
    return samples


def main() -> int:
    args = parse_args()
    repeats = 3 if args.quick else 9
    n_ops = 2_000 if args.quick else 20_000
    configs = {"off": None, "streams": "streams", "init": "init", "streams_init": "streams,init"}
    samples: dict[str, list[float]] = {name: [] for name in configs}
    per_op_us(n_ops, 1, None)  # warm-up: plans cached, workers started
    for _ in range(repeats):  # alternating, so that drift of the machine hits every config alike
        for name, tools in configs.items():
            samples[name] += per_op_us(n_ops, 1, tools)
    results = {name: min_median(s, "us", 3) for name, s in samples.items()}
    off = results["off"]
    for name in ("streams", "init", "streams_init"):
        results[name]["baseline"] = "off"
        results[name]["ratio_min"] = round(results[name]["min_us"] / off["min_us"], 3)
        results[name]["ratio_median"] = round(results[name]["median_us"] / off["median_us"], 3)
    report = {
        "benchmark": "sanitizer host time per small op (x + y, one element, queued)",
        "environment": environment(),
        "ops_per_sample": n_ops,
        "results": results,
        "targets": {"streams_below_3x": at_most(3.0, results["streams"]["ratio_median"])},
    }
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
