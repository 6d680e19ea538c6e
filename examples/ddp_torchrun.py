"""Data-parallel training on vdev, launched exactly as on GPUs:

    torchrun --nproc-per-node 2 examples/ddp_torchrun.py [--steps N] [--save weights.pt]

Each rank takes the vdev device of its LOCAL_RANK (as with NCCL, two ranks of a host may not share
a device: VDEV_DEVICE_COUNT, 2 by default, must be at least --nproc-per-node);
init_process_group() needs no backend name:
vdev is the accelerator, and its collectives backend is vccl (Gloo's algorithms on the device
bytes). On several hosts, run torchrun on each with --nnodes, --node-rank and --rdzv-endpoint (or
--master-addr/--master-port) as with NCCL; ranks connect through Gloo's TCP transport
(GLOO_SOCKET_IFNAME picks the interface).

Every rank trains on its slice of one global batch; after the all-reduce of the gradients, every
rank holds the weights one process would reach on the whole batch.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

GLOBAL_BATCH = 32


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def make_data(steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [
        (torch.randn(GLOBAL_BATCH, 16, generator=g), torch.randn(GLOBAL_BATCH, 4, generator=g))
        for _ in range(steps)
    ]


def train(model: nn.Module, batches, device, rank: int = 0, world_size: int = 1) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    per_rank = GLOBAL_BATCH // world_size
    for x, y in batches:
        x, y = (
            x[rank * per_rank : (rank + 1) * per_rank],
            y[rank * per_rank : (rank + 1) * per_rank],
        )
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--save", help="rank 0 saves the final weights (CPU) here")
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("vdev", local_rank)
    torch.vdev.set_device(device)
    dist.init_process_group(device_id=device)
    rank, world_size = dist.get_rank(), dist.get_world_size()

    model = DistributedDataParallel(make_model().to(device), device_ids=[device.index])
    train(model, make_data(args.steps), device, rank, world_size)

    if rank == 0:
        state = {k: v.cpu() for k, v in model.module.state_dict().items()}
        print(f"trained {args.steps} steps on {world_size} ranks ({dist.get_backend_config()})")
        if args.save:
            torch.save(state, args.save)
    # Every rank's queued collectives must finish before the group is destroyed: destroying it
    # fails work still in flight (as NCCL's shutdown does), and the peer then sees its connection
    # closed in the middle of the last all_reduce.
    torch.vdev.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
