"""Graph replay against eager launch, host time, measured in the same run.

Target (issue 15): replaying a captured graph of 100 small operators costs the host at most 0.3x
of launching the same 100 operators eagerly. Only the launching is timed; the device's work is
waited for between samples, outside the timed region, so a slow device never inflates the host
figure and the queue never grows. Also reported: the device time of a replay and of the eager
launch (launch + synchronize), for information.

Also, with no target: a small, deep MLP (8 blocks of Linear, GELU, LayerNorm at width 16) compiled
with ``mode="reduce-overhead"`` (Inductor's kernels replayed as vdev graphs) against the same model
compiled with the default mode, both on vdev, launch + synchronize: an inference call, and a
training step (forward, backward, eager SGD).

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


def compiled_call(mode: str, train: bool):
    """An inference call or a training step of a small, deep MLP compiled on vdev, warmed up (and
    recorded) before timing."""
    torch.manual_seed(0)
    blocks = [(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.LayerNorm(16)) for _ in range(8)]
    model = torch.nn.Sequential(*(m for block in blocks for m in block)).to("vdev")
    batch = torch.randn(8, 16, device="vdev")
    forward = torch.compile(model, mode=mode)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        forward(batch).square().mean().backward()
        opt.step()

    def infer():
        with torch.no_grad():
            forward(batch)

    call = step if train else infer
    for _ in range(3):  # warm-up, recording, first replay
        call()
    return call


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
    for what, train in (("inference_call", False), ("train_step", True)):
        timings = {}
        for mode in ("default", "reduce-overhead"):
            torch._dynamo.reset()
            timings[mode] = wall(compiled_call(mode, train), repeats)
        graphed = timings["reduce-overhead"]
        graphed["ratio_median"] = round(graphed["median_ns"] / timings["default"]["median_ns"], 4)
        graphed["ratio_min"] = round(graphed["min_ns"] / timings["default"]["min_ns"], 4)
        graphed["baseline"] = "the same compiled with mode='default'"
        results[f"deep_mlp_{what}_compiled_default_wall"] = timings["default"]
        results[f"deep_mlp_{what}_compiled_reduce_overhead_wall"] = graphed
    targets = {f"graph_replay_{OPS}_ops_host": at_most(TARGET, replay["ratio_median"])}
    emit(
        {"benchmark": "graphs", "env": environment(), "results": results, "targets": targets},
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
