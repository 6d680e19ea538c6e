"""torch.compile benchmarks (issue 14), each against a baseline measured in the same run, the
cases alternating repeat by repeat.

- a compiled training step (forward, backward, SGD step) of an MLP and of a small Transformer
  encoder on vdev, against the same model compiled on CPU in a child process with no vdev work
  in it, one per thread count (target: within 1.1x). Both devices run
  Inductor's C++ kernels; on vdev they are queued on the stream and the host runs ahead, on CPU
  they run on the calling thread;
- the time of the first compiled call (tracing, Inductor, C++ compilation; Inductor's caches off)
  on each device;
- the compiled step on vdev against the eager step on vdev (no target);
- the compiled step on vdev against CPU compiled with the intra-op threads vdev's kernels run with
  (the thread policy's count for a small kernel, the cores minus one, or VDEV_DEVICE_THREADS):
  the same compute threads on both sides (no target).

    python benchmarks/bench_compile.py [--out results.json] [--quick]
"""

import copy
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402
import torch.nn as nn  # noqa: E402
from bench_ops import ratio  # noqa: E402

import torch_vdev  # noqa: E402
from timing import (  # noqa: E402
    at_most,
    cache_line_round_trip_ns,
    emit,
    environment,
    min_median,
    parse_args,
    settle,
)


def mlp() -> tuple[nn.Module, torch.Tensor]:
    model = nn.Sequential(
        nn.Linear(256, 512), nn.GELU(), nn.LayerNorm(512),
        nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10),
    )  # fmt: skip
    return model, torch.randn(64, 256)


def transformer() -> tuple[nn.Module, torch.Tensor]:
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), torch.randn(8, 32, 64)


def sync(device: str) -> None:
    if device != "cpu":
        torch.vdev.synchronize()


def trainer(model: nn.Module, batch: torch.Tensor, device: str, compiled: bool, steps: int):
    model = copy.deepcopy(model).to(device)
    batch = batch.to(device)
    forward = torch.compile(model) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        forward(batch).square().mean().backward()
        opt.step()

    def first_call_ms() -> float:
        t0 = time.perf_counter()
        step()
        sync(device)
        return round((time.perf_counter() - t0) * 1e3, 1)

    def run() -> None:
        for _ in range(steps):
            step()
        sync(device)

    return first_call_ms, run


MODELS = {"mlp": mlp, "transformer": transformer}


class Side:
    """The trainers of one process, keyed by (model, device, compiled, threads)."""

    def __init__(self, steps: int):
        self.steps, self.runs = steps, {}

    def first_call_ms(self, key: tuple) -> float:
        """Makes the trainer of `key` and times its first call (for a compiled one: tracing,
        Inductor, C++ compilation)."""
        name, device, compiled, threads = key
        torch.manual_seed(0)  # the same model on both sides
        model, batch = MODELS[name]()
        torch.set_num_threads(threads)  # before compiling: kernels hold their thread count
        first_call, self.runs[key] = trainer(model, batch, device, compiled, self.steps)
        if compiled:
            torch._dynamo.reset()
        return first_call()

    def once_ms(self, key: tuple) -> float:
        torch.set_num_threads(key[3])
        settle()
        t0 = time.perf_counter()
        self.runs[key]()
        return (time.perf_counter() - t0) * 1e3


def cpu_child(steps: int, threads: int) -> None:
    """The CPU side for one thread count, in its own process (no vdev work in it, so that
    libgomp's spin throttle is as a CPU-only program has it): answers "first|once model" lines with
    milliseconds. One process per count: Inductor writes the count into its kernels, and each
    process compiles only for its own (no reliance on what a torch._dynamo.reset makes compile
    again, and under which count)."""
    inductor_config.force_disable_caches = True
    side = Side(steps)
    for line in sys.stdin:
        what, name = line.split()
        key = (name, "cpu", True, threads)
        print(side.first_call_ms(key) if what == "first" else side.once_ms(key), flush=True)


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--cpu-child":
        cpu_child(int(sys.argv[2]), int(sys.argv[3]))
        return 0
    args = parse_args()
    round_trip_before = cache_line_round_trip_ns()
    reps, steps = (3, 5) if args.quick else (15, 20)
    inductor_config.force_disable_caches = True  # compile times without Inductor's disk caches
    host_threads = torch.get_num_threads()
    device_threads = min(host_threads, torch_vdev._C._device_threads())
    children = {
        threads: subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--cpu-child", str(steps), str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for threads in {host_threads, device_threads}
    }

    def on_cpu(what: str, name: str, threads: int) -> float:
        child = children[threads]
        child.stdin.write(f"{what} {name}\n")
        child.stdin.flush()
        return float(child.stdout.readline())

    vdev = Side(steps)
    results, targets = {}, {}
    try:
        for name in MODELS:
            # CPU compiled with the host's threads and with those of vdev's small kernels (the
            # same compute threads on both sides); vdev compiled and eager.
            cases = (("cpu", host_threads), ("vdev", True), ("vdev", False),
                     ("cpu", device_threads))  # fmt: skip

            compile_ms = {
                "cpu": round(on_cpu("first", name, host_threads), 1),
                "vdev": round(vdev.first_call_ms((name, "vdev", True, host_threads)), 1),
            }
            if device_threads != host_threads:
                on_cpu("first", name, device_threads)
            vdev.first_call_ms((name, "vdev", False, host_threads))
            samples = [[] for _ in cases]  # by index: the two CPU cases may be one thread count
            # Alternating case by case, repeat by repeat, so that the machine's drift (its speed
            # moved 2x between two runs of seven repeats each) hits every case alike; the first
            # round is the warm-up.
            for rep in range(reps + 1):
                for i, case in enumerate(cases):
                    ms = (
                        on_cpu("once", name, case[1])
                        if case[0] == "cpu"
                        else vdev.once_ms((name, "vdev", case[1], host_threads))
                    )
                    if rep > 0:
                        samples[i].append(ms)
            cpu, vdev_compiled, eager, cpu_same = (min_median(t, "ms", 3) for t in samples)
            results[f"{name}_compiled_train_step"] = {
                "cpu_ms_per_step": round(cpu["median_ms"] / steps, 3),
                "vdev_ms_per_step": round(vdev_compiled["median_ms"] / steps, 3),
                **ratio(vdev_compiled, cpu),
            }
            results[f"{name}_compiled_train_step_same_threads"] = {
                "threads": device_threads,
                "cpu_ms_per_step": round(cpu_same["median_ms"] / steps, 3),
                "vdev_ms_per_step": round(vdev_compiled["median_ms"] / steps, 3),
                **ratio(vdev_compiled, cpu_same),
            }
            results[f"{name}_first_compiled_call_ms"] = compile_ms
            results[f"{name}_vdev_compiled_vs_eager"] = {
                "eager_ms_per_step": round(eager["median_ms"] / steps, 3),
                "compiled_ms_per_step": round(vdev_compiled["median_ms"] / steps, 3),
                **ratio(vdev_compiled, eager),
            }
            targets[f"{name}_compiled_train_step"] = at_most(
                1.1, results[f"{name}_compiled_train_step"]["ratio_median"]
            )
    finally:
        for child in children.values():
            child.stdin.close()
            child.wait()
    torch.set_num_threads(host_threads)
    env = environment()
    env["cpu_baseline"] = (
        "CPU PyTorch compiled in a child process (no vdev work in it), alternating"
    )
    env["cache_line_round_trip_ns"] = {
        "before": round_trip_before,
        "after": cache_line_round_trip_ns(),
    }
    emit({"benchmark": "compile", "env": env, "results": results, "targets": targets}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
