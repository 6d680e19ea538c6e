"""What the profiler, bug-finder and memory-history hooks cost when they are off (issue 37).

- hook_checks: the checks a small queued operator's host path makes when no tool is on (the
  profiler's timeline, the stream sanitizer and init tool, the poison tool and memory history at
  an allocation and a free, happens-before clocks, injected allocation faults), timed in C++
  (torch_vdev._testing.hook_checks_ns), as a share of the host time of that operator (x + y on
  one-element tensors) measured in the same run. Target: under 1% (the run-to-run noise of the
  operator's own time is several times that).
- after_off: the operator's host time after each tool was turned on and off again, against the
  same loop before any was on, measured alternately: turning a tool off leaves nothing behind
  (ratios near 1; no target, noise is +-5%).

    python benchmarks/bench_hooks.py [--out results.json] [--quick]
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from timing import at_most, emit, environment, min_median, parse_args  # noqa: E402
from torch_vdev import _testing  # noqa: E402


def per_op_ns(n_ops: int) -> float:
    x = torch.ones(1, device="vdev")
    y = torch.ones(1, device="vdev")
    torch.vdev.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(n_ops):
        x + y
    t1 = time.perf_counter_ns()
    torch.vdev.synchronize()
    return (t1 - t0) / n_ops


def toggle(tool: str) -> None:
    """Turns `tool` on, uses it once, and turns it off."""
    x = torch.ones(4, device="vdev")
    if tool == "profiler":
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            (x + 1).sum().item()
    elif tool == "sanitizer":
        torch.vdev.sanitizer.enable("streams,init,poison")
        try:
            (x + 1).sum().item()
        finally:
            torch.vdev.sanitizer.disable()
    elif tool == "memory_history":
        torch.vdev.memory._record_memory_history("all", context="all", stacks="python")
        try:
            (x + 1).sum().item()
        finally:
            torch.vdev.memory._record_memory_history(None)


def main() -> int:
    args = parse_args()
    repeats = 3 if args.quick else 9
    n_ops = 2_000 if args.quick else 20_000
    per_op_ns(n_ops)  # warm-up: plans cached, the worker started
    before = [per_op_ns(n_ops) for _ in range(repeats)]
    checks = [_testing.hook_checks_ns(1_000_000) for _ in range(repeats)]
    after = {tool: [] for tool in ("profiler", "sanitizer", "memory_history")}
    for tool in after:
        toggle(tool)
    for _ in range(repeats):  # alternating with the never-on state's figures above
        for tool in after:
            after[tool].append(per_op_ns(n_ops))
    op = min_median(before, "ns", 1)
    share = statistics.median(checks) / op["median_ns"]
    results = {
        "add_1_element_host_ns": op,
        "hook_checks": {
            **min_median(checks, "ns", 1),
            "share_of_op_median": round(share, 5),
        },
        "after_off": {
            tool: {
                **min_median(s, "ns", 1),
                "ratio_median": round(statistics.median(s) / op["median_ns"], 3),
            }
            for tool, s in after.items()
        },
    }
    targets = {"hook_checks_share": at_most(0.01, round(share, 5))}
    emit({"benchmark": "hooks", "env": environment(), "results": results, "targets": targets},
         args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
