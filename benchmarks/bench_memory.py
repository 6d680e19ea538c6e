"""Device memory benchmarks (issue 5), each against a baseline measured in the same run.

- allocate+free of a cached 1 MiB and a 512 B device tensor through torch.empty, against the same
  on CPU tensors (target: within 1.5x)
- host->device and device->host copy bandwidth for 64 MiB, pageable and pinned, against a plain
  memcpy (ctypes.memmove) of the same size between host buffers (target: at least 0.8x)
- churn: 100,000 random allocate/free operations of 512 B to 64 MiB; the reserved/allocated peak
  ratio (reported, no target)
- memory history (issue 33): allocate+free of a cached 512 B tensor with
  torch.vdev.memory._record_memory_history off and on (context="all", stacks="python": a Python
  stack gathered at each allocation and free); off is the same work as alloc_free_512B (history
  off costs one relaxed load per allocation and free: target within 1.1x of it), on is reported
  as its ratio to off (no target)

    python benchmarks/bench_memory.py [--out results.json] [--quick]
"""

import ctypes
import math
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from timing import at_least, at_most, emit, environment, measure, parse_args, with_ratio  # noqa: E402

MiB = 1 << 20


def alloc_free(args, targets, results):
    calls = 20_000 if args.quick else 200_000
    cpu_device, vdev_device = torch.device("cpu"), torch.device("vdev", 0)
    for name, numel in (("1MiB", MiB // 4), ("512B", 128)):
        torch.empty(numel, device=vdev_device)  # the block is cached from here on
        stmt = "torch.empty(n, device=d)"
        cpu = measure(stmt, {"torch": torch, "n": numel, "d": cpu_device}, calls=calls)
        vdev = measure(stmt, {"torch": torch, "n": numel, "d": vdev_device}, calls=calls)
        key = f"alloc_free_{name}"
        results[key] = {"cpu": cpu, "vdev": with_ratio(vdev, cpu, "cpu")}
        targets[key] = at_most(1.5, results[key]["vdev"]["ratio_median"])


def history(args, targets, results):
    d = torch.device("vdev", 0)
    torch.empty(128, device=d)  # cached from here on
    stmt = "torch.empty(128, device=d)"
    env = {"torch": torch, "d": d}
    torch.vdev.memory._record_memory_history(None)
    off = measure(stmt, env, calls=20_000 if args.quick else 200_000)
    torch.vdev.memory._record_memory_history(
        "all", context="all", stacks="python", max_entries=10_000, clear_history=True
    )
    try:
        on = measure(stmt, env, calls=2_000 if args.quick else 20_000)
    finally:
        torch.vdev.memory._record_memory_history(None)
    results["alloc_free_512B_history"] = {"off": off, "on": with_ratio(on, off, "history off")}
    # Off is what alloc_free measured, within noise.
    plain = results["alloc_free_512B"]["vdev"]
    targets["alloc_free_512B_history_off"] = at_most(
        1.1, round(off["median_ns"] / plain["median_ns"], 3)
    )


def timed_ms(fn, repeats):
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return {"min_ms": round(min(samples), 3), "median_ms": round(statistics.median(samples), 3)}


def bandwidth(args, targets, results):
    n = 64 * MiB
    repeats = 5 if args.quick else 15
    a = torch.ones(n, dtype=torch.uint8)
    b = torch.zeros(n, dtype=torch.uint8)
    memcpy = timed_ms(lambda: ctypes.memmove(b.data_ptr(), a.data_ptr(), n), repeats)
    results["memcpy_64MiB"] = memcpy
    dev = torch.zeros(n, dtype=torch.uint8, device="vdev")
    cases = {
        "h2d_pageable": (a, lambda: dev.copy_(a)),
        "d2h_pageable": (b, lambda: b.copy_(dev)),
    }
    pinned_src = a.pin_memory()
    pinned_dst = b.pin_memory()
    cases["h2d_pinned"] = (
        pinned_src,
        lambda: (dev.copy_(pinned_src, non_blocking=True), torch.vdev.synchronize()),
    )
    cases["d2h_pinned"] = (
        pinned_dst,
        lambda: (pinned_dst.copy_(dev, non_blocking=True), torch.vdev.synchronize()),
    )
    for name, (_, fn) in cases.items():
        t = timed_ms(fn, repeats)
        ratio = memcpy["median_ms"] / t["median_ms"]  # bandwidth relative to memcpy
        results[name] = {
            **t,
            "GBps_median": round(n / (t["median_ms"] / 1e3) / 1e9, 2),
            "bandwidth_vs_memcpy": round(ratio, 3),
        }
        targets[name] = at_least(0.8, round(ratio, 3))


def churn(args, results):
    ops = 10_000 if args.quick else 100_000
    rng = random.Random(0)
    live = []
    torch.vdev.synchronize()
    torch.vdev.empty_cache()
    torch.vdev.reset_peak_memory_stats()
    lo, hi = math.log(512), math.log(64 * MiB)
    t0 = time.perf_counter()
    for _ in range(ops):
        if live and (len(live) >= 32 or rng.random() < 0.5):
            live.pop(rng.randrange(len(live)))
        else:
            size = int(math.exp(rng.uniform(lo, hi)))
            live.append(torch.empty(size, dtype=torch.uint8, device="vdev"))
    elapsed = time.perf_counter() - t0
    live.clear()
    s = torch.vdev.memory_stats()
    results["churn"] = {
        "operations": ops,
        "sizes": "512 B .. 64 MiB, log-uniform, at most 32 live",
        "us_per_op": round(elapsed / ops * 1e6, 3),
        "peak_allocated_MiB": round(s["allocated_bytes.all.peak"] / MiB, 1),
        "peak_reserved_MiB": round(s["reserved_bytes.all.peak"] / MiB, 1),
        "reserved_over_allocated_peak": round(
            s["reserved_bytes.all.peak"] / s["allocated_bytes.all.peak"], 3
        ),
        "num_alloc_retries": s["num_alloc_retries"],
        "segments_allocated": s["segment.all.allocated"],
    }
    torch.vdev.empty_cache()


def main() -> int:
    args = parse_args()
    results, targets = {}, {}
    alloc_free(args, targets, results)
    history(args, targets, results)
    bandwidth(args, targets, results)
    churn(args, results)
    emit(
        {"benchmark": "memory", "env": environment(), "results": results, "targets": targets},
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
