"""vccl: the torch.distributed backend for vdev tensors.

vccl is to vdev what NCCL is to CUDA, built on Gloo, the collective engine torch ships: each
process group gets a ProcessGroupGloo of its own (on its own store prefix), and the native
backend (cpp/backend/distributed/comm_backend.h) runs Gloo's algorithms on the device bytes, on a
communication stream of the group's device, with NCCL's stream semantics. Ranks on other hosts
connect through Gloo's TCP transport, exactly as with the gloo backend (MASTER_ADDR/MASTER_PORT
or any init_method; GLOO_SOCKET_IFNAME picks the network interface).

Registered for the "vdev" device, so all of these pick it:
    dist.init_process_group()                                  # vdev is the accelerator
    dist.init_process_group(device_id=torch.device("vdev", i))
    dist.init_process_group("vccl")
    dist.init_process_group("cpu:gloo,vdev:vccl")
"""

from __future__ import annotations

import datetime

BACKEND_NAME = "vccl"


def _create_backend(store, rank: int, size: int, timeout: datetime.timedelta):
    import torch.distributed as dist

    from torch_vdev import _C

    # A prefix of its own: with "cpu:gloo,vdev:vccl" the CPU's Gloo group shares the store.
    gloo = dist.ProcessGroupGloo(dist.PrefixStore(f"{BACKEND_NAME}/", store), rank, size, timeout)
    return _C._new_comm_backend(gloo, rank, size)


def register() -> None:
    """Registers vccl with torch.distributed as the backend of the "vdev" device (idempotent)."""
    import torch.distributed as dist

    if not dist.is_available() or BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, devices=["vdev"])
