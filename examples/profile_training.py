"""Profile a few training steps on vdev and write what torch.profiler saw.

    python examples/profile_training.py [OUTDIR]

Writes OUTDIR/vdev_trace.json (a chrome trace: open it in https://ui.perfetto.dev or
chrome://tracing: the host's operators, one track per vdev stream with the kernels, copies and
waits that ran there, and an arrow from each launch to its kernel) and prints the operators by
device time. With the memory timeline available (torch.profiler's export_memory_timeline), it also
writes the memory timeline of vdev:0 as OUTDIR/vdev_memory.json (torch's HTML form reads CUDA's
peak statistics, so it works on CUDA only); and the allocator's history
as OUTDIR/vdev_memory_snapshot.pickle, which https://pytorch.org/memory_viz draws (drag the file
there) as does `python -m torch.cuda._memory_viz trace_plot vdev_memory_snapshot.pickle -o a.html`.
"""

import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    ).to("vdev")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randn(64, 256).pin_memory()
    target = torch.randint(0, 10, (64,)).pin_memory()

    def step():
        x = data.to("vdev", non_blocking=True)
        y = target.to("vdev", non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    torch.vdev.memory._record_memory_history(max_entries=100_000)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        schedule=schedule(wait=1, warmup=1, active=2),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,  # the memory timeline needs it
    ) as prof:
        for _ in range(4):
            loss = step()
            prof.step()
    print(f"loss {loss.item():.4f}")
    torch.vdev.memory._dump_snapshot(str(out / "vdev_memory_snapshot.pickle"))
    torch.vdev.memory._record_memory_history(enabled=None)
    print(f"wrote {out / 'vdev_memory_snapshot.pickle'}")
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=12))
    prof.export_chrome_trace(str(out / "vdev_trace.json"))
    print(f"wrote {out / 'vdev_trace.json'}")
    memory = out / "vdev_memory.json"
    try:
        prof.export_memory_timeline(str(memory), device="vdev:0")
        print(f"wrote {memory}")
    except Exception as e:  # noqa: BLE001 (the example reports what the profiler refused)
        print(f"no memory timeline: {type(e).__name__}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
