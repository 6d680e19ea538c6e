"""What a launch plan costs when it is made (the first call of each call signature), against the
same call on CPU tensors and against a call whose plan is cached, measured in the same run.

A plan is made once per signature (sizes, strides, dtypes, flags: cpp/backend/executor/
plan_cache.h): the meta kernel, CPU's argument checks on small stand-ins, and, where an argument
or an output is not contiguous and the kernel is not TensorIterator's, the out= kernel's layout
trial (cpp/backend/executor/out_kernel_layouts.h: CPU's kernel once more on stand-ins that keep
the arguments' layouts, of small sizes for forward operators, of the real sizes for backward
ones). Cases, each a new signature per call (the second dimension grows by one), host time of the
call then a synchronize:

- `softmax` of a contiguous 64 x n matrix (no layout trial) and of a transposed one (a trial on
  small stand-ins);
- `_softmax_backward_data` (a backward operator: no argument check; the layout trial of the real
  sizes) of a contiguous and of a transposed gradient;
- the figures per call for the same signature once cached (`cached`).

    python benchmarks/bench_plans.py [--out results.json] [--quick]
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import torch_vdev._testing as rt  # noqa: E402
from timing import emit, environment, parse_args  # noqa: E402

A = torch.ops.aten


def cases():
    def softmax(transposed):
        def make(n, dev):
            x = torch.randn(n, 64, device=dev).t() if transposed else torch.randn(64, n, device=dev)
            return lambda: torch.softmax(x, 1)

        return make

    def softmax_backward(transposed):
        def make(n, dev):
            y = torch.softmax(torch.randn(64, n, device=dev), 1)
            g = torch.randn(n, 64, device=dev).t() if transposed else torch.randn(64, n, device=dev)
            return lambda: A._softmax_backward_data(g, y, 1, torch.float32)

        return make

    return {
        "softmax_contiguous": softmax(False),
        "softmax_transposed": softmax(True),
        "softmax_backward_contiguous": softmax_backward(False),
        "softmax_backward_transposed": softmax_backward(True),
    }


def sync(dev):
    if dev != "cpu":
        torch.vdev.synchronize()


def call_us(call, dev) -> float:
    sync(dev)
    t0 = time.perf_counter()
    call()
    sync(dev)
    return (time.perf_counter() - t0) * 1e6


def summary(samples):
    return {"min_us": round(min(samples), 1), "median_us": round(statistics.median(samples), 1)}


def main() -> int:
    args = parse_args()
    signatures = 40 if args.quick else 200
    results = {}
    first_n = 1000  # sizes no other case uses, so every vdev call below makes a new plan
    for name, make in cases().items():
        miss, cpu, hit = [], [], []
        trials = rt.out_layout_trials()
        for k in range(signatures):
            n = first_n + k
            miss.append(call_us(make(n, "vdev"), "vdev"))
            cpu.append(call_us(make(n, "cpu"), "cpu"))
        cached = make(first_n, "vdev")
        for _ in range(signatures):
            hit.append(call_us(cached, "vdev"))
        first_n += signatures
        m, c, h = summary(miss), summary(cpu), summary(hit)
        results[name] = {
            "vdev_new_plan_us": m,
            "vdev_cached_plan_us": h,
            "cpu_us": c,
            "new_plan_vs_cpu_median": round(m["median_us"] / c["median_us"], 2),
            "new_plan_minus_cached_median_us": round(m["median_us"] - h["median_us"], 1),
            "layout_trials_per_new_plan": round((rt.out_layout_trials() - trials) / signatures, 2),
        }
    emit({"benchmark": "plans", "env": environment(), "results": results, "targets": {}}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
