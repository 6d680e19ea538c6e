"""Sending tensors to another process through a torch.multiprocessing queue (spawn): vdev tensors
(shared device memory, python/torch_vdev/vdev/_sharing.py) against CPU tensors (torch's shared
memory), in the same run, through the same queues and the same consumer process.

    python benchmarks/bench_sharing.py [--out results.json] [--quick]

Cases, each a round trip (put, the consumer gets the tensor and reads its last element, the
producer gets that value back), min and median over repeats:
- fresh_64MiB: a new 64 MiB float32 tensor each time (CPU: put() copies it into shared memory;
  vdev: no copy, the consumer maps the device memory);
- same_64MiB: the same tensor again (CPU: already shared; vdev: a new reference and signal, the
  consumer finds the storage it holds);
- small_4KiB: a new 4 KiB tensor each time (the fixed cost of a send).
The ratio is vdev over CPU (below 1: vdev is faster). Reported, no target.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from timing import emit, environment, parse_args  # noqa: E402

MiB = 1 << 20


def consumer(q, back) -> None:
    while True:
        x = q.get()
        if x is None:
            return
        back.put(x[-1].item())  # reads the bytes: a vdev read waits for the sender's writes
        del x


def round_trips(q, back, make, repeats: int, sync) -> list[float]:
    """`make(i)` returns a tensor and the last element the consumer must read."""
    q.put(make(-1)[0])  # warm-up
    back.get()
    out = []
    for i in range(repeats):
        t, expected = make(i)
        sync()
        t0 = time.perf_counter()
        q.put(t)
        value = back.get()
        out.append(time.perf_counter() - t0)
        if value != expected:
            raise AssertionError(f"the consumer read {value}, not {expected}")
        del t
    return out


def stats(samples: list[float]) -> dict:
    return {
        "min_ms": round(min(samples) * 1e3, 3),
        "median_ms": round(statistics.median(samples) * 1e3, 3),
        "repeats": len(samples),
    }


def main() -> int:
    args = parse_args()
    repeats = 5 if args.quick else 15
    ctx = mp.get_context("spawn")
    q, back = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=consumer, args=(q, back))
    child.start()
    results = {}
    for name, numel, fresh in (
        ("fresh_64MiB", 16 * MiB, True),
        ("same_64MiB", 16 * MiB, False),
        ("small_4KiB", 1024, True),
    ):
        case = {}
        for device, sync in (("cpu", lambda: None), ("vdev", torch.vdev.synchronize)):
            kept = torch.full((numel,), 7.0, device=device)

            def make(i, device=device, numel=numel, kept=kept, fresh=fresh):
                if fresh:
                    return torch.full((numel,), float(i), device=device), float(i)
                return kept, 7.0

            case[device] = stats(round_trips(q, back, make, repeats, sync))
            torch.vdev.ipc_collect()
        case["vdev"]["baseline"] = "cpu"
        case["vdev"]["ratio_median"] = round(
            case["vdev"]["median_ms"] / case["cpu"]["median_ms"], 3
        )
        results[name] = case
    q.put(None)
    child.join(60)
    emit({"benchmark": "sharing", "env": environment(), "results": results}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
