"""The whole machine (issue 37): vdev against CPU PyTorch on the same work, measured in the same
run, alternating the two sides repeat by repeat so that the machine's drift hits both alike.

- mm_1024_sync: torch.mm of two 1024x1024 float32 matrices, with a synchronize on vdev
  (target: at most 1.1x CPU)
- add_1_element: host time per small operator, x + y on one-element tensors, 10,000 ops then one
  synchronize (target: at most 1.3x CPU); add_inplace_1_element: the same for x.add_(y), which
  allocates nothing (reported, no target)
- h2d_64MiB / d2h_64MiB: a pageable 64 MiB copy into / out of a device tensor, against the same
  copy_ between two CPU tensors (target: bandwidth at least 0.9x CPU's)
- eager training steps (forward, backward, SGD step) of an MLP, a small Transformer encoder and a
  small CNN, and the CNN's inference step (target: each at most 1.1x CPU)

The compiled steps are in bench_compile.py; the cost of the profiler and sanitizer hooks when off
is in bench_hooks.py. Set VDEV_DEVICE_THREADS to compare thread policies.

    python benchmarks/bench_machine.py [--out results.json] [--quick]
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from bench_compile import mlp, transformer  # noqa: E402
from bench_models import small_cnn  # noqa: E402

import torch_vdev  # noqa: E402
from timing import (  # noqa: E402
    at_least,
    at_most,
    cache_line_round_trip_ns,
    emit,
    environment,
    min_median,
    parse_args,
    settle,
)

MiB = 1 << 20


def sync(device: str) -> None:
    if device != "cpu":
        torch.vdev.synchronize()


def mm_1024(d: str):
    a = torch.randn(1024, 1024).to(d)
    return lambda: (torch.mm(a, a), sync(d))


N_SMALL_OPS = [10_000]


def add_1_element(d: str):
    x, y = torch.ones(1, device=d), torch.ones(1, device=d)

    def run():
        for _ in range(N_SMALL_OPS[0]):
            x + y
        sync(d)

    return run


def add_inplace_1_element(d: str):
    x, y = torch.ones(1, device=d), torch.ones(1, device=d)

    def run():
        for _ in range(N_SMALL_OPS[0]):
            x.add_(y)
        sync(d)

    return run


def copy_64MiB(direction: str):
    def make(d: str):
        src = torch.ones(64 * MiB, dtype=torch.uint8)
        host = torch.zeros(64 * MiB, dtype=torch.uint8)
        dev = torch.zeros(64 * MiB, dtype=torch.uint8, device=d)
        if direction == "h2d":
            return lambda: dev.copy_(src)
        src = src.to(d)
        return lambda: host.copy_(src)

    return make


STEPS = [10]


def train(make_model):
    def make(d: str):
        model, batch = make_model()
        m, b = model.to(d), batch.to(d)
        opt = torch.optim.SGD(m.parameters(), lr=0.01)

        def run():
            for _ in range(STEPS[0]):
                opt.zero_grad(set_to_none=True)
                m(b).square().mean().backward()
                opt.step()
            sync(d)

        return run

    return make


def infer(make_model):
    def make(d: str):
        model, batch = make_model()
        m, b = model.eval().to(d), batch.to(d)

        def run():
            with torch.no_grad():
                for _ in range(STEPS[0]):
                    m(b)
            sync(d)

        return run

    return make


def cnn() -> tuple[nn.Module, torch.Tensor]:
    return small_cnn(), torch.randn(32, 3, 32, 32)


# name -> (maker(device) -> run, per: the operations or steps one run performs, unit)
CASES = {
    "mm_1024_sync": (mm_1024, lambda: 1, "ms"),
    "add_1_element": (add_1_element, lambda: N_SMALL_OPS[0], "us"),
    "add_inplace_1_element": (add_inplace_1_element, lambda: N_SMALL_OPS[0], "us"),
    "h2d_64MiB": (copy_64MiB("h2d"), lambda: 1, "ms"),
    "d2h_64MiB": (copy_64MiB("d2h"), lambda: 1, "ms"),
    "mlp_train_step": (train(mlp), lambda: STEPS[0], "ms"),
    "transformer_train_step": (train(transformer), lambda: STEPS[0], "ms"),
    "cnn_train_step": (train(cnn), lambda: STEPS[0], "ms"),
    "cnn_inference_step": (infer(cnn), lambda: STEPS[0], "ms"),
}


class Side:
    """The runs of one device, made on first use (same seed on both sides: same models)."""

    def __init__(self, device: str):
        self.device, self.runs = device, {}

    def once(self, case: str) -> float:
        if case not in self.runs:
            torch.manual_seed(0)
            self.runs[case] = CASES[case][0](self.device)
            self.runs[case]()  # warm-up: caches, plans, workers
        settle()
        t0 = time.perf_counter()
        self.runs[case]()
        return (time.perf_counter() - t0) * 1e3


def cpu_child() -> None:
    """The CPU side, in its own process: answers "case" lines with one run's milliseconds."""
    side = Side("cpu")
    for line in sys.stdin:
        print(side.once(line.strip()), flush=True)


def versus_cpu(cpu: dict, vdev: dict, per: int, unit: str) -> dict:
    scale = 1e3 if unit == "us" else 1
    return {
        f"cpu_{unit}": round(cpu["median_ms"] * scale / per, 3),
        f"vdev_{unit}": round(vdev["median_ms"] * scale / per, 3),
        "ratio_min": round(vdev["min_ms"] / cpu["min_ms"], 3),
        "ratio_median": round(vdev["median_ms"] / cpu["median_ms"], 3),
    }


def main() -> int:
    if "--cpu-child" in sys.argv:
        if "--quick" in sys.argv:
            N_SMALL_OPS[0], STEPS[0] = 1_000, 3
        cpu_child()
        return 0
    args = parse_args()
    round_trip_before = cache_line_round_trip_ns()
    repeats = 3 if args.quick else 9
    if args.quick:
        N_SMALL_OPS[0], STEPS[0] = 1_000, 3
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--cpu-child"] + ["--quick"] * args.quick,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    vdev = Side("vdev")
    results = {}
    try:
        for case, (_, per, unit) in CASES.items():
            samples = {"cpu": [], "vdev": []}
            for _ in range(repeats + 1):  # alternating; the first round is the warm-up
                child.stdin.write(case + "\n")
                child.stdin.flush()
                samples["cpu"].append(float(child.stdout.readline()))
                samples["vdev"].append(vdev.once(case))
            cpu, dev = min_median(samples["cpu"][1:], "ms"), min_median(samples["vdev"][1:], "ms")
            results[case] = versus_cpu(cpu, dev, per(), unit)
    finally:
        child.stdin.close()
        child.wait()
    for name in ("h2d_64MiB", "d2h_64MiB"):  # bandwidth relative to CPU's: the inverse ratio
        results[name]["bandwidth_vs_cpu_median"] = round(1 / results[name]["ratio_median"], 3)
    targets = {
        "add_1_element": at_most(1.3, results["add_1_element"]["ratio_median"]),
        "h2d_64MiB": at_least(0.9, results["h2d_64MiB"]["bandwidth_vs_cpu_median"]),
        "d2h_64MiB": at_least(0.9, results["d2h_64MiB"]["bandwidth_vs_cpu_median"]),
    }
    for name in ("mm_1024_sync", "mlp_train_step", "transformer_train_step", "cnn_train_step",
                 "cnn_inference_step"):  # fmt: skip
        targets[name] = at_most(1.1, results[name]["ratio_median"])
    env = environment()
    env["device_threads"] = torch_vdev._C._device_threads()
    env["cpus"] = os.cpu_count()
    env["cpu_baseline"] = "CPU PyTorch in a child process (no vdev work in it), alternating"
    env["cache_line_round_trip_ns"] = {
        "before": round_trip_before,
        "after": cache_line_round_trip_ns(),
    }
    emit({"benchmark": "machine", "env": env, "results": results, "targets": targets}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
