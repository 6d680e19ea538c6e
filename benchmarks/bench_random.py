"""Random operator benchmarks (issue 10), each against the same work on CPU tensors measured in
the same run.

- host time per queued torch.rand(1): 10,000 calls then one synchronize (target: within 1.5x of
  the CPU loop)
- host time per F.dropout(x, 0.5) on a 1-element and a 64x64 float32 tensor, 10,000 calls then
  one synchronize (target: within 1.5x of the CPU loop)

    python benchmarks/bench_random.py [--out results.json] [--quick]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from bench_ops import ratio, timed  # noqa: E402

from timing import at_most, emit, environment, parse_args  # noqa: E402


def main() -> int:
    args = parse_args()
    reps = 3 if args.quick else 7
    n_ops = 1_000 if args.quick else 10_000
    results, targets = {}, {}

    def loop(dev, make_input, op):
        x = make_input(dev)

        def run():
            for _ in range(n_ops):
                op(x, dev)
            if dev != "cpu":
                torch.vdev.synchronize()

        return run

    cases = [
        ("rand_1", lambda d: None, lambda x, d: torch.rand(1, device=d)),
        ("dropout_1_element", lambda d: torch.ones(1, device=d), lambda x, d: F.dropout(x, 0.5)),
        ("dropout_64x64", lambda d: torch.ones(64, 64, device=d), lambda x, d: F.dropout(x, 0.5)),
    ]
    for name, make_input, op in cases:
        cpu = timed(loop("cpu", make_input, op), reps)
        vdev = timed(loop("vdev", make_input, op), reps)
        results[name] = {
            "cpu_us_per_op": round(cpu["median_ms"] * 1e3 / n_ops, 3),
            "vdev_us_per_op": round(vdev["median_ms"] * 1e3 / n_ops, 3),
            **ratio(vdev, cpu),
        }
        targets[f"{name}_host_time"] = at_most(1.5, results[name]["ratio_median"])
    emit(
        {"benchmark": "random", "env": environment(), "results": results, "targets": targets},
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
