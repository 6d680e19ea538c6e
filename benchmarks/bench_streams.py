"""Stream and event benchmarks (issue 3): builds and runs benchmarks/cpp/bench_streams.cpp (runtime
only, with its own naive mutex+condvar hand-off as the baseline), then times the Python-level
paths against a trivial native call measured in the same run.

Targets: enqueue-to-complete round trip <= 0.3x the naive hand-off; >= 5 million empty tasks/s on
one stream; 64 idle streams use no measurable CPU (at most 5 ms in 1 s of wall time).

    python benchmarks/bench_streams.py [--out results.json] [--quick]
"""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from timing import at_least, at_most, emit, environment, measure, parse_args, with_ratio  # noqa: E402
from torch_vdev import _C  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_native() -> dict:
    build = os.path.join(ROOT, "build", "bench")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(
        [
            "cmake",
            "-S",
            ROOT,
            "-B",
            build,
            "-DVDEV_BUILD_BENCHMARKS=ON",
            "-DCMAKE_BUILD_TYPE=Release",
            *gen,
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["cmake", "--build", build, "--target", "bench_streams"], check=True, capture_output=True
    )
    out = subprocess.run(
        [os.path.join(build, "bench_streams")], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def main() -> int:
    args = parse_args()
    calls = 2_000 if args.quick else 20_000

    native = run_native()
    env = {
        "noop": _C._noop,
        "torch": torch,
        "vdev": torch.vdev,
        "e": torch.vdev.Event(),
        "s": torch.vdev.current_stream(),
    }
    base = measure("noop()", env, calls=calls * 10)
    py = {
        "baseline._C._noop": base,
        "event_record_synchronize": with_ratio(
            measure("e.record(s); e.synchronize()", env, calls=calls), base, "_C._noop"
        ),
        "torch.Stream(device='vdev')": with_ratio(
            measure("torch.Stream(device='vdev:0')", env, calls=calls), base, "_C._noop"
        ),
        "torch.vdev.Stream()": with_ratio(
            measure("vdev.Stream()", env, calls=calls), base, "_C._noop"
        ),
    }
    rt, tp, idle = native["round_trip"], native["throughput"], native["idle_cpu"]
    targets = {
        "round_trip_vs_naive_handoff": at_most(0.3, rt["ratio_median"]),
        "throughput_tasks_per_s": at_least(5_000_000, tp["tasks_per_s_median"]),
        "idle_cpu_ms_per_s": at_most(5.0, idle["cpu_ms"]),
    }
    emit(
        {
            "benchmark": "streams",
            "env": environment(),
            "native": native,
            "results": py,
            "targets": targets,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
