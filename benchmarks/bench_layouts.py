"""Sparse and quantized tensor benchmarks (issue 36), each against the same work on CPU tensors
measured in the same run. No target is set by the issue; these show what the layouts cost:

- sparse x dense product: a 4096x4096 COO matrix with 1% of its elements by a 4096x64 dense one
  (torch.mm, queued on the stream), then one synchronize; and the same in CSR;
- to_dense of that COO matrix (queued: dense + sparse);
- coalesce of an uncoalesced 4096x4096 COO matrix (synchronizes on CUDA too);
- quantize_per_tensor and dequantize of a 1M-element tensor (queued);
- host time per queued small product (a 64x64 CSR matrix by 64x8): 1,000 calls then one
  synchronize.

    python benchmarks/bench_layouts.py [--out results.json] [--quick]
"""

import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from bench_ops import ratio, timed  # noqa: E402

from timing import emit, environment, parse_args  # noqa: E402


def sync(dev):
    if dev != "cpu":
        torch.vdev.synchronize()


def main() -> int:
    warnings.filterwarnings("ignore", "Sparse (CSR tensor support|invariant checks)")
    warnings.filterwarnings("ignore", ".*quantized tensor creation functions.*deprecated")
    args = parse_args()
    reps = 3 if args.quick else 7
    g = torch.Generator().manual_seed(0)
    n, nnz = 4096, 4096 * 4096 // 100
    idx = torch.stack([torch.randint(0, n, (nnz,), generator=g) for _ in range(2)])
    coo = torch.sparse_coo_tensor(idx, torch.randn(nnz, generator=g), (n, n))
    coalesced = coo.coalesce()
    csr = coalesced.to_sparse_csr()
    dense = torch.randn(n, 64, generator=g)
    x = torch.randn(1 << 20, generator=g)
    small = torch.randn(64, 64, generator=g).relu().to_sparse_csr()
    small_rhs = torch.randn(64, 8, generator=g)
    n_small = 100 if args.quick else 1_000

    def case(make):
        """make(dev) -> a callable running the work once on `dev` and synchronizing."""
        return {dev: make(dev) for dev in ("cpu", "vdev")}

    def small_products(dev):
        a, b = small.to(dev), small_rhs.to(dev)

        def run():
            for _ in range(n_small):
                torch.mm(a, b)
            sync(dev)

        return run

    def once(fn, *tensors):
        def make(dev):
            moved = [t.to(dev) for t in tensors]
            sync(dev)

            def run():
                fn(*moved)
                sync(dev)

            return run

        return make

    cases = {
        "coo_mm_4096_1pct_x64": once(torch.mm, coalesced, dense),
        "csr_mm_4096_1pct_x64": once(torch.mm, csr, dense),
        "coo_to_dense_4096": once(lambda s: s.to_dense(), coalesced),
        "coalesce_4096_1pct": once(lambda s: s.coalesce(), coo),
        "quantize_per_tensor_1M": once(
            lambda t: torch.quantize_per_tensor(t, 0.05, 3, torch.quint8), x
        ),
        "dequantize_1M": once(
            lambda q: q.dequantize(), torch.quantize_per_tensor(x, 0.05, 3, torch.quint8)
        ),
        "small_csr_mm_host_time": small_products,
    }
    results = {}
    for name, make in cases.items():
        runs = case(make)
        cpu = timed(runs["cpu"], reps)
        vdev = timed(runs["vdev"], reps)
        results[name] = {
            "cpu_median_ms": cpu["median_ms"],
            "vdev_median_ms": vdev["median_ms"],
            **ratio(vdev, cpu),
        }
    emit(
        {"benchmark": "layouts", "env": environment(), "results": results, "targets": {}},
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
