"""Asynchronous operator benchmarks (issue 4), each against the same work on CPU tensors measured
in the same run (glibc defaults; state GLIBC_TUNABLES if you set any).

- host time per queued op: x + y on 1-element tensors, 10,000 ops then one synchronize
  (target: within 2.5x of the CPU loop)
- x.add_(1) on 16M floats and torch.mm 1024x1024 float32, including the final synchronize
  (target: within 1.15x of CPU)
- two streams each running independent matmuls with torch.set_num_threads(1): wall time vs the
  same work on one stream (target: at most 0.65x)

    python benchmarks/bench_ops.py [--out results.json] [--quick]
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from timing import at_most, emit, environment, parse_args  # noqa: E402


def timed(fn, repeats: int, warmup: int = 2) -> dict:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return {
        "min_ms": round(min(samples) * 1e3, 3),
        "median_ms": round(statistics.median(samples) * 1e3, 3),
    }


def ratio(a: dict, b: dict) -> dict:
    return {
        "ratio_min": round(a["min_ms"] / b["min_ms"], 3),
        "ratio_median": round(a["median_ms"] / b["median_ms"], 3),
    }


def main() -> int:
    args = parse_args()
    reps = 3 if args.quick else 7
    n_ops = 1_000 if args.quick else 10_000
    results, targets = {}, {}

    def small_loop(dev):
        x = torch.ones(1, device=dev)
        y = torch.ones(1, device=dev)

        def run():
            for _ in range(n_ops):
                x + y
            if dev != "cpu":
                torch.vdev.synchronize()

        return run

    cpu = timed(small_loop("cpu"), reps)
    vdev = timed(small_loop("vdev"), reps)
    per_op = {
        "cpu_us_per_op": round(cpu["median_ms"] * 1e3 / n_ops, 3),
        "vdev_us_per_op": round(vdev["median_ms"] * 1e3 / n_ops, 3),
        **ratio(vdev, cpu),
    }
    results["add_1_element_x10000"] = per_op
    targets["add_1_element_host_time"] = at_most(2.5, per_op["ratio_median"])

    for name, make, op in [
        ("add__16M_float32", lambda d: torch.zeros(16 << 20, device=d), lambda t: t.add_(1)),
        ("mm_1024_float32", lambda d: torch.randn(1024, 1024, device=d), lambda t: torch.mm(t, t)),
    ]:
        tc, tv = make("cpu"), make("vdev")
        c = timed(lambda op=op, tc=tc: op(tc), reps)
        v = timed(lambda op=op, tv=tv: (op(tv), torch.vdev.synchronize()), reps)
        results[name] = {"cpu": c, "vdev": v, **ratio(v, c)}
        targets[name] = at_most(1.15, results[name]["ratio_median"])

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.randn(512, 512, device="vdev"), torch.randn(512, 512, device="vdev")
        s1, s2 = torch.vdev.Stream(), torch.vdev.Stream()
        k = 8

        def one_stream():
            with torch.vdev.stream(s1):
                for _ in range(2 * k):
                    torch.mm(a, b)
            torch.vdev.synchronize()

        def two_streams():
            for s in (s1, s2):
                with torch.vdev.stream(s):
                    for _ in range(k):
                        torch.mm(a, b)
            torch.vdev.synchronize()

        one, two = timed(one_stream, reps), timed(two_streams, reps)
        results["two_streams_vs_one"] = {"one_stream": one, "two_streams": two, **ratio(two, one)}
        targets["two_streams_overlap"] = at_most(
            0.65, results["two_streams_vs_one"]["ratio_median"]
        )
    finally:
        torch.set_num_threads(threads)
    emit(
        {"benchmark": "ops", "env": environment(), "results": results, "targets": targets}, args.out
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
