"""torch.compile benchmarks (issue 14), each against a baseline measured in the same run, the
cases alternating repeat by repeat.

- a compiled training step (forward, backward, SGD step) of an MLP and of a small Transformer
  encoder on vdev, against the same model compiled on CPU (target: within 1.1x). Both devices run
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


def main() -> int:
    args = parse_args()
    round_trip_before = cache_line_round_trip_ns()
    reps = 3 if args.quick else 15
    steps = 5 if args.quick else 20
    inductor_config.force_disable_caches = True  # compile times without Inductor's disk caches
    torch.manual_seed(0)
    results, targets = {}, {}
    for name, make in (("mlp", mlp), ("transformer", transformer)):
        model, batch = make()
        runs, compile_ms = {}, {}
        host_threads = torch.get_num_threads()
        device_threads = min(host_threads, torch_vdev._C._device_threads())
        cases = (("cpu", True, host_threads), ("vdev", True, host_threads),
                 ("vdev", False, host_threads), ("cpu", True, device_threads))  # fmt: skip
        for case in cases:
            device, compiled, threads = case
            torch.set_num_threads(threads)  # before compiling: kernels hold their thread count
            first_call, runs[case] = trainer(model, batch, device, compiled, steps)
            if compiled:
                torch._dynamo.reset()
                compile_ms.setdefault(device, first_call())
        samples = {case: [] for case in cases}
        # Alternating case by case, repeat by repeat, so that the machine's drift (its speed
        # moves by 2x within minutes on the shared machines this runs on) hits every case alike;
        # the first round is the warm-up (it also compiles again what the resets above dropped).
        for rep in range(reps + 1):
            for case in cases:
                torch.set_num_threads(case[2])
                settle()
                t0 = time.perf_counter()
                runs[case]()
                if rep > 0:
                    samples[case].append(time.perf_counter() - t0)
        runs = {case: min_median([t * 1e3 for t in samples[case]], "ms", 3) for case in cases}
        torch.set_num_threads(host_threads)
        cpu, vdev = runs[("cpu", True, host_threads)], runs[("vdev", True, host_threads)]
        eager, cpu_same = runs[("vdev", False, host_threads)], runs[("cpu", True, device_threads)]
        results[f"{name}_compiled_train_step"] = {
            "cpu_ms_per_step": round(cpu["median_ms"] / steps, 3),
            "vdev_ms_per_step": round(vdev["median_ms"] / steps, 3),
            **ratio(vdev, cpu),
        }
        results[f"{name}_compiled_train_step_same_threads"] = {
            "threads": device_threads,
            "cpu_ms_per_step": round(cpu_same["median_ms"] / steps, 3),
            "vdev_ms_per_step": round(vdev["median_ms"] / steps, 3),
            **ratio(vdev, cpu_same),
        }
        results[f"{name}_first_compiled_call_ms"] = compile_ms
        results[f"{name}_vdev_compiled_vs_eager"] = {
            "eager_ms_per_step": round(eager["median_ms"] / steps, 3),
            "compiled_ms_per_step": round(vdev["median_ms"] / steps, 3),
            **ratio(vdev, eager),
        }
        targets[f"{name}_compiled_train_step"] = at_most(
            1.1, results[f"{name}_compiled_train_step"]["ratio_median"]
        )
    env = environment()
    env["cache_line_round_trip_ns"] = {
        "before": round_trip_before,
        "after": cache_line_round_trip_ns(),
    }
    emit({"benchmark": "compile", "env": env, "results": results, "targets": targets}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
