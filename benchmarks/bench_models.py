"""Model-step benchmarks (issue 11), each against the same step on CPU tensors in the same run.

- a small CNN's inference step (evaluation mode: conv, batch norm, ReLU, pooling, linear) on a
  CIFAR-sized batch (32 images, 3x32x32), 20 steps then one synchronize (target: within 1.0x of
  CPU: batch norm in evaluation mode is queued, not synchronized, so the host queues the next
  layers while the stream computes)
- the same on a batch of 8 (no target: each layer is so small that the host's per-operator cost
  and two cores shared by the host thread and the stream's intra-op threads dominate)

    python benchmarks/bench_models.py [--out results.json] [--quick]
"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from bench_ops import ratio, timed  # noqa: E402

from timing import at_most, emit, environment, parse_args  # noqa: E402


def small_cnn() -> nn.Module:
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(
        *block(3, 16), nn.MaxPool2d(2), *block(16, 32), nn.MaxPool2d(2), *block(32, 64),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    )  # fmt: skip


def main() -> int:
    args = parse_args()
    reps = 3 if args.quick else 9
    steps = 5 if args.quick else 20
    torch.manual_seed(0)
    cpu_model = small_cnn().eval()
    models = {"cpu": cpu_model, "vdev": copy.deepcopy(cpu_model).to("vdev")}
    results, targets = {}, {}
    for name, batch_size in (("cnn_inference_step_batch32", 32), ("cnn_inference_step_batch8", 8)):
        batch = torch.randn(batch_size, 3, 32, 32)
        inputs = {"cpu": batch, "vdev": batch.to("vdev")}

        def loop(dev, inputs=inputs):
            def run():
                with torch.no_grad():
                    for _ in range(steps):
                        models[dev](inputs[dev])
                if dev != "cpu":
                    torch.vdev.synchronize()

            return run

        cpu = timed(loop("cpu"), reps)
        vdev = timed(loop("vdev"), reps)
        results[name] = {
            "cpu_ms_per_step": round(cpu["median_ms"] / steps, 3),
            "vdev_ms_per_step": round(vdev["median_ms"] / steps, 3),
            **ratio(vdev, cpu),
        }
    targets["cnn_inference_step_batch32"] = at_most(
        1.0, results["cnn_inference_step_batch32"]["ratio_median"]
    )
    emit(
        {"benchmark": "models", "env": environment(), "results": results, "targets": targets},
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
