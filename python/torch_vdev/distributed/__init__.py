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

With no backend and no device_id, torch would make Gloo the group's default backend (it names
NCCL alone as an accelerator's); _install_default_backend_fix makes it vccl, so CUDA's recipe
(init_process_group(rank=, world_size=), then DistributedDataParallel(device_ids=[rank])) works.
"""

from __future__ import annotations

import datetime
import functools
import inspect
import os

BACKEND_NAME = "vccl"


def _create_backend(store, rank: int, size: int, timeout: datetime.timedelta):
    import torch.distributed as dist

    from torch_vdev import _C

    # VDEV_DIST_FAULT names a global rank: this process's rank in the default group, or this
    # group's rank when it is the default group being made (no default group exists yet).
    if dist.is_initialized():
        _C._arm_dist_fault(dist.get_rank(), dist.get_world_size())
    else:
        _C._arm_dist_fault(rank, size)
    # A prefix of its own: with "cpu:gloo,vdev:vccl" the CPU's Gloo group shares the store. And
    # one per torchrun attempt: torchrun's store outlives the workers it restarts, so a restarted
    # rank would otherwise read the Gloo addresses of the attempt before and connect to a process
    # that no longer exists (Gloo's "connectFullMesh failed ... Connection refused").
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    prefix = f"{BACKEND_NAME}/" if attempt in ("", "0") else f"{BACKEND_NAME}/attempt_{attempt}/"
    gloo = dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), rank, size, timeout)
    return _C._new_comm_backend(gloo, rank, size)


def _default_backend_is_vccl(backend) -> bool:
    """Whether a group made with `backend` has vccl alone: init_process_group() (or new_group())
    with no backend name and no device_id, vdev being the accelerator."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import BackendConfig

    if str(backend) != dist.Backend.UNDEFINED:
        return False
    return BackendConfig(dist.Backend(backend)).get_device_backend_map() == {"vdev": BACKEND_NAME}


def _install_default_backend_fix() -> None:
    """Makes vccl the default backend of groups that torch builds for vdev with no backend named.

    Why a torch internal is wrapped: with no backend and no device_id, init_process_group uses
    backend "undefined"; BackendConfig maps it to the accelerator's registered backend
    ({"vdev": "vccl"}), and torch registers vccl for the vdev device, but
    distributed_c10d._new_process_group_helper then picks the group's *default* backend type
    with NCCL hard-coded:

        if backend == Backend.UNDEFINED:
            if Backend.NCCL in backend_config.get_device_backend_map().values():
                pg._set_default_backend(ProcessGroup.BackendType.NCCL)
            else:
                pg._set_default_backend(ProcessGroup.BackendType.GLOO)

    so the default is GLOO, which the group does not have, and whatever asks for the default
    backend (DistributedDataParallel's logger: ProcessGroup::getBackendName / getDefaultBackend)
    raises "Could not find backend type 1 for Process Group with name gloo". No registration
    argument reaches that choice (register_backend only fills the device map and the backend's
    capabilities). The wrapper calls torch's helper unchanged and then, only for such a group,
    sets the default to CUSTOM, the type torch registered vccl under, as it sets NCCL for CUDA.
    """
    from torch.distributed import distributed_c10d as c10d

    helper = c10d._new_process_group_helper
    if getattr(helper, "_vdev_default_backend_fix", False):
        return
    signature = inspect.signature(helper)

    @functools.wraps(helper)
    def _new_process_group_helper(*args, **kwargs):
        pg, store = helper(*args, **kwargs)
        backend = signature.bind(*args, **kwargs).arguments.get("backend")
        if isinstance(pg, c10d.ProcessGroup) and _default_backend_is_vccl(backend):
            pg._set_default_backend(c10d.ProcessGroup.BackendType.CUSTOM)
        return pg, store

    _new_process_group_helper._vdev_default_backend_fix = True
    c10d._new_process_group_helper = _new_process_group_helper


def register() -> None:
    """Registers vccl with torch.distributed as the backend of the "vdev" device (idempotent)."""
    import torch.distributed as dist

    if not dist.is_available() or BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, devices=["vdev"])
    _install_default_backend_fix()
