"""Collectives across 2 processes on this machine: vdev tensors through vccl against CPU tensors
through plain Gloo, in the same run and the same process group ("cpu:gloo,vdev:vccl").

    python benchmarks/bench_distributed.py [--out results.json] [--quick]

Cases: all_reduce of 64 MiB float32 (throughput; target: vccl at least 0.8x Gloo's), and a
DistributedDataParallel training step of an MLP (vdev + vccl vs CPU + Gloo). Times are per call,
min and median over repeats, measured on rank 0 between barriers; a vdev case ends with a
synchronize, so it counts the device work, not just the queueing.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from timing import at_least, at_most, emit, environment, parse_args  # noqa: E402

ALL_REDUCE_BYTES = 64 << 20


def stats(samples: list[float]) -> dict:
    return {
        "min_ms": round(min(samples) * 1e3, 3),
        "median_ms": round(statistics.median(samples) * 1e3, 3),
        "repeats": len(samples),
    }


def timed(fn, repeats: int, sync) -> list[float]:
    fn()  # warm-up (connections, allocator)
    sync()
    out = []
    for _ in range(repeats):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def rank_main(rank: int, world_size: int, port: int, quick: bool, path: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dev = torch.device("vdev", rank % torch.vdev.device_count())
    torch.vdev.set_device(dev)
    dist.init_process_group("cpu:gloo,vdev:vccl", rank=rank, world_size=world_size)
    repeats = 3 if quick else 9
    results = {}

    n = ALL_REDUCE_BYTES // 4
    cpu_x = torch.ones(n)
    vdev_x = torch.ones(n, device=dev)
    no_sync = lambda: None  # noqa: E731
    cpu = timed(lambda: dist.all_reduce(cpu_x), repeats, no_sync)
    vdev = timed(lambda: dist.all_reduce(vdev_x), repeats, torch.vdev.synchronize)
    results["all_reduce_64MiB_cpu_gloo"] = stats(cpu)
    results["all_reduce_64MiB_vdev_vccl"] = stats(vdev)
    gbps = lambda s: ALL_REDUCE_BYTES / statistics.median(s) / 1e9  # noqa: E731
    results["all_reduce_64MiB_throughput"] = {
        "cpu_gloo_GBps": round(gbps(cpu), 3),
        "vdev_vccl_GBps": round(gbps(vdev), 3),
        "ratio_median": round(gbps(vdev) / gbps(cpu), 3),
        "baseline": "CPU tensors through plain Gloo, same run",
    }

    def ddp_step(device):
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        ).to(device)
        ddp = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "vdev" else None
        )
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        x, y = torch.randn(64, 256, device=device), torch.randint(0, 10, (64,), device=device)

        def step():
            opt.zero_grad()
            nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()

        return step

    steps = 3 if quick else 10
    cpu_step = ddp_step(torch.device("cpu"))
    vdev_step = ddp_step(dev)
    cpu = timed(cpu_step, steps, no_sync)
    vdev = timed(vdev_step, steps, torch.vdev.synchronize)
    results["ddp_step_mlp_cpu_gloo"] = stats(cpu)
    results["ddp_step_mlp_vdev_vccl"] = stats(vdev)
    results["ddp_step_mlp_vdev_vccl"]["baseline"] = "ddp_step_mlp_cpu_gloo"
    results["ddp_step_mlp_vdev_vccl"]["ratio_median"] = round(
        statistics.median(vdev) / statistics.median(cpu), 3
    )
    if rank == 0:
        with open(path, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def main() -> int:
    args = parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rank0.json")
        mp.spawn(rank_main, args=(2, port, args.quick, path), nprocs=2)
        results = json.load(open(path))
    targets = {
        "all_reduce_64MiB_throughput_vs_gloo": at_least(
            0.8, results["all_reduce_64MiB_throughput"]["ratio_median"]
        ),
        "ddp_step_vs_cpu_gloo": at_most(1.5, results["ddp_step_mlp_vdev_vccl"]["ratio_median"]),
    }
    emit(
        {
            "benchmark": "distributed",
            "env": environment(),
            "world_size": 2,
            "results": results,
            "targets": targets,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
