"""Device-management call costs against a trivial native call measured in the same run.

Targets (issue 2): torch.vdev.current_device() within 2x of a trivial torch_vdev._C call;
a torch.vdev.set_device() round trip (set 1, set 0) within 3x of two trivial calls.

    python benchmarks/bench_device.py [--out results.json] [--quick]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import torch_vdev  # noqa: E402,F401
from timing import at_most, emit, environment, measure, parse_args, with_ratio  # noqa: E402
from torch_vdev import _C  # noqa: E402

TARGETS = {"vdev.current_device": 2.0, "vdev.set_device_round_trip": 3.0}


def main() -> int:
    args = parse_args()
    calls = 20_000 if args.quick else 200_000

    env = {"noop": _C._noop, "vdev": torch.vdev, "acc": torch.accelerator}
    base1 = measure("noop()", env, calls=calls)
    base2 = measure("noop(); noop()", env, calls=calls)
    results = {
        "baseline._C._noop": base1,
        "vdev.current_device": with_ratio(
            measure("vdev.current_device()", env, calls=calls), base1, "_C._noop"
        ),
        "vdev.set_device_round_trip": with_ratio(
            measure("vdev.set_device(1); vdev.set_device(0)", env, calls=calls),
            base2,
            "_C._noop x2",
        ),
        "accelerator.current_device_index": with_ratio(
            measure("acc.current_device_index()", env, calls=calls), base1, "_C._noop"
        ),
    }
    targets = {
        name: at_most(limit, results[name]["ratio_median"]) for name, limit in TARGETS.items()
    }
    emit(
        {"benchmark": "device", "env": environment(), "results": results, "targets": targets},
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
