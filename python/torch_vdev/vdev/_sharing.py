"""vdev tensors sent to another process on this host (torch.multiprocessing), shared as CUDA
tensors are: the receiver gets a vdev tensor over the same device memory.

torch.multiprocessing registers reductions with ForkingPickler for tensors and storages; they know
CUDA storages (``_share_cuda_``) and CPU ones, not PrivateUse1 ones. From registration on, those
reductions are wrapped: a vdev tensor is reduced here, everything else as before.

What a vdev tensor's message carries (backend/memory/ipc_sharing.h has the mechanism):
* its storage's place in the device memory: the memfd behind the device's arena and the offset,
  and a slot (a reference count and a signal) in a table of shared slots; the memfds travel as
  ``multiprocessing.reduction.DupFd`` (over a Unix socket, or inherited by a spawned child), each
  once per message however many tensors name it (``_MessageFd``);
* the sender's pid, the dtype, size, stride and storage offset, and requires_grad.

CUDA's rules, the same here:
* spawn or forkserver start methods (a child forked after vdev was used cannot use vdev);
* the sender keeps the memory until every receiver has freed its tensor: a storage the sender
  frees before that waits in a limbo (``torch.vdev.ipc_collect()`` frees what was released);
* the receiver's current stream waits for the sender's writes queued before the send;
* the receiver's storage cannot be resized; a received tensor sent on (or back) is shared again;
* the same storage received twice is the same storage (a cache by memfd and offset, as torch's
  ``shared_cache``; a sender receiving its own tensor gets its own storage);
* a vdev storage on its own cannot be pickled (send a tensor); a tensor that requires grad and is
  not a leaf is refused, as by torch;
* a receiver that cannot take a tensor (a device it does not have, not enough memory even after
  emptying its cache: IndexError, torch.OutOfMemoryError) gives the reference back, so the
  sender does not keep the memory for it (CUDA's receiver leaks it).

Sparse and nested vdev tensors are refused (torch's reductions for them recurse into torch's own
tensor reduction, which has no vdev case): their storages raise where they are pickled.

Thread rules: installed once under the registration lock; the reductions run in any thread (a
Queue's feeder thread pickles), the caches are torch's (locked).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import weakref
from multiprocessing.reduction import DupFd, ForkingPickler
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef, fd_id, shared_cache, storage_from_cache

from torch_vdev import _C


def _is_vdev(obj: Any) -> bool:
    if isinstance(obj, torch.TypedStorage):
        obj = obj._untyped_storage  # its own .device warns that TypedStorage is deprecated
    device = getattr(obj, "device", None)
    return isinstance(device, torch.device) and device.type == "vdev"


class _MessageFd:
    """A descriptor sent once per message, however many tensors of the message need it.

    Every tensor of a device names the same memfd (and of a slot table the same table): one
    DupFd each would send the same descriptor again and again (spawn refuses duplicates in a
    Process's arguments, forkserver allows 256, and a queue message of many tensors would use up
    descriptors). The sender makes one _MessageFd per descriptor while a message is being pickled
    (``_message_fd``): the pickler's memo then writes it once and the receiver's unpickler makes
    one object for all the tensors that refer to it. The receiver detaches the descriptor on first
    use and closes it when the message's objects are done with it."""

    def __init__(self, sent: Any, fd_to_send: int | None = None) -> None:
        self._sent = sent  # the receiver's DupFd (None on the sender's side)
        self._fd_to_send = fd_to_send
        self._fd: int | None = None

    def __reduce__(self) -> tuple:
        # A DupFd per pickler that writes this object (made now: spawn's needs the Process
        # being started), however many tensors of its message refer to it.
        return (_MessageFd, (DupFd(self._fd_to_send),))

    def fd(self) -> int:
        if self._fd is None:
            self._fd = self._sent.detach()
        return self._fd

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)


# The _MessageFd of each descriptor while some message being pickled refers to it (its pickler's
# memo keeps it alive until the message is written; concurrent messages may share one object,
# each pickler still writes its own DupFd).
_message_fds: weakref.WeakValueDictionary[int, _MessageFd] = weakref.WeakValueDictionary()
_message_fds_lock = threading.Lock()


def _message_fd(fd: int) -> _MessageFd:
    with _message_fds_lock:
        found = _message_fds.get(fd)
        if found is None:
            found = _MessageFd(None, fd_to_send=fd)
            _message_fds[fd] = found
        return found


def _rebuild_vdev_tensor(
    cls: type,
    size: torch.Size,
    stride: tuple[int, ...],
    storage_offset: int,
    dtype: torch.dtype,
    handle: tuple[int, ...],
    memory_fd: _MessageFd | None,
    slot_fd: _MessageFd | None,
    requires_grad: bool,
) -> torch.Tensor:
    device, _, offset, nbytes = handle[:4]
    if nbytes == 0:
        storage = torch.UntypedStorage(0, device=torch.device("vdev", device))
    else:
        assert memory_fd is not None and slot_fd is not None
        memory, slot = memory_fd.fd(), slot_fd.fd()
        key = ("vdev",) + fd_id(memory) + (offset,)
        storage = storage_from_cache(torch.UntypedStorage, key)
        if storage is not None and storage.nbytes() == nbytes:
            _C._ipc_wait_and_release(handle, slot)
        else:
            try:
                storage = torch.UntypedStorage(0, device=torch.device("vdev", device))
            except Exception:
                _C._ipc_give_back(handle, slot)  # the sender must not keep the memory for nothing
                raise
            _C._ipc_adopt_storage(storage._cdata, handle, memory, slot)
            shared_cache[key] = StorageWeakRef(storage)
    typed = torch.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)
    t = torch._utils._rebuild_tensor(typed, storage_offset, size, stride)
    if cls == torch.nn.parameter.Parameter:
        # an integer Parameter must get requires_grad=False in its constructor
        return torch.nn.parameter.Parameter(t, requires_grad=requires_grad)
    t.requires_grad = requires_grad
    return t


def _reduce_vdev_tensor(tensor: torch.Tensor) -> tuple:
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
            "does not support crossing process boundaries. If you just want to transfer the "
            "data, call detach() on the tensor before serializing (e.g., putting it on the queue)."
        )
    torch.utils.hooks.warn_if_has_hooks(tensor)
    storage = tensor.untyped_storage()
    if storage.nbytes() == 0:
        handle: tuple = (tensor.device.index, -1, 0, 0)
        fds: tuple = (None, None)
    else:
        handle = _C._ipc_share_storage(storage._cdata)
        memory_fd, offset, slot_fd = handle[1], handle[2], handle[4]
        # the sender's own storage, if this process receives the tensor back
        shared_cache[("vdev",) + fd_id(memory_fd) + (offset,)] = StorageWeakRef(storage)
        fds = (_message_fd(memory_fd), _message_fd(slot_fd))
    return (
        _rebuild_vdev_tensor,
        (
            type(tensor),
            tensor.size(),
            tensor.stride(),
            tensor.storage_offset(),
            tensor.dtype,
            handle,
            *fds,
            tensor.requires_grad,
        ),
    )


def _tensor_reduction(reduce: Any) -> Any:
    def reduce_tensor(tensor: torch.Tensor) -> Any:
        if tensor.device.type == "vdev" and tensor.layout == torch.strided and not tensor.is_nested:
            return _reduce_vdev_tensor(tensor)
        return reduce(tensor)

    reduce_tensor.__wrapped__ = reduce  # type: ignore[attr-defined]
    return reduce_tensor


def _storage_reduction(reduce: Any) -> Any:
    def reduce_storage(storage: Any) -> Any:
        if _is_vdev(storage):
            raise RuntimeError("Cannot pickle vdev storage; try pickling a vdev tensor instead")
        return reduce(storage)

    reduce_storage.__wrapped__ = reduce  # type: ignore[attr-defined]
    return reduce_storage


def ipc_collect() -> None:
    """Frees the device memory this process shared with other processes and they have released
    (as torch.cuda.ipc_collect)."""
    _C._ipc_collect()


def _warn_if_still_shared() -> None:
    if not torch.vdev._initialized:
        return
    _C._ipc_collect()
    if _C._ipc_in_limbo():
        print(
            "[torch_vdev] Producer process is exiting before every vdev tensor it shared was "
            "released by its receivers (keep the producer running until its consumers are "
            "done with what it sent, as with CUDA tensors)",
            file=sys.stderr,
        )


_installed = False


def install() -> None:
    """Wraps torch.multiprocessing's tensor and storage reductions (once)."""
    global _installed
    if _installed:
        return
    import torch.multiprocessing  # noqa: F401  (registers torch's reductions first)

    for cls, reduce in list(ForkingPickler._extra_reducers.items()):
        if not isinstance(cls, type):
            continue
        if issubclass(cls, torch.Tensor):
            ForkingPickler.register(cls, _tensor_reduction(reduce))
        elif issubclass(cls, (torch.UntypedStorage, torch.TypedStorage)):
            ForkingPickler.register(cls, _storage_reduction(reduce))
    atexit.register(_warn_if_still_shared)
    _installed = True
