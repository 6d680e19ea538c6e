"""vdev tensors sent to another process: refused where they are sent, with a clear error.

Sharing device memory between processes is not built yet (it needs device memory that another
process can map). Without this, ``torch.multiprocessing``'s reductions fail on a vdev storage with
"_share_fd_: only available on CPU"; and ``multiprocessing.Queue.put`` pickles in a background
feeder thread, so put() returned, the feeder printed that error and dropped the object, and the
consumer waited for ever.

So, from registration on (at ``import torch``: a Queue's put method may be looked up before the
argument that initialises vdev is evaluated):
* the reductions ``torch.multiprocessing`` registered for tensors and storages raise a
  RuntimeError that names vdev, for vdev ones (SimpleQueue.put, Connection.send, Pool arguments:
  they pickle in the caller's thread, so they raise there);
* ``multiprocessing.queues.Queue.put`` (and JoinableQueue's) first looks for a vdev tensor in the
  object and raises the same error in the caller, before anything is queued. The look is a pickle
  walk that writes nothing and does not reduce tensors, storages or anything torch's
  ForkingPickler reductions handle (file descriptors, connections): no side effect but the
  objects' own ``__reduce__``. An object that cannot be pickled is left for the feeder to report,
  as before.

Before vdev is initialised no vdev tensor can exist: put() then checks nothing (one flag read),
so programs that never use vdev pay nothing for the walk.

Thread rules: installed once under the registration lock; the wrappers are stateless.
"""

import io
import multiprocessing.queues
import pickle
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

_MESSAGE = (
    "a vdev {what} cannot be sent to another process: sharing vdev device memory between "
    "processes is not supported yet (send {what}.cpu() instead)"
)


class _VdevObjectFound(Exception):
    pass


def _is_vdev(obj: Any) -> bool:
    if isinstance(obj, torch.TypedStorage):
        obj = obj._untyped_storage  # its own .device warns that TypedStorage is deprecated
    device = getattr(obj, "device", None)
    return isinstance(device, torch.device) and device.type == "vdev"


def _describe(obj: Any) -> str:
    return "tensor" if isinstance(obj, torch.Tensor) else "storage"


def _nothing() -> None:
    return None


class _VdevFinder(pickle.Pickler):
    """Walks an object as pickling would and stops at the first vdev tensor or storage."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
            if _is_vdev(obj):
                raise _VdevObjectFound(_describe(obj))
            return (_nothing, ())  # not reduced: its reduction moves it to shared memory
        if type(obj) in ForkingPickler._extra_reducers:
            return (_nothing, ())  # fds, connections: their reductions have side effects
        return NotImplemented


class _Discard(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        return len(b)


def refuse_vdev_objects(obj: Any) -> None:
    """Raises RuntimeError if pickling ``obj`` would send a vdev tensor or storage."""
    if isinstance(obj, (type(None), bool, int, float, str, bytes)):
        return
    if isinstance(obj, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
        if _is_vdev(obj):
            raise RuntimeError(_MESSAGE.format(what=_describe(obj)))
        return
    try:
        _VdevFinder(_Discard(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    except _VdevObjectFound as found:
        raise RuntimeError(_MESSAGE.format(what=found.args[0])) from None
    except Exception:  # noqa: BLE001  (not picklable: the feeder reports it, as before)
        return


def _refusing(reduce: Any) -> Any:
    def reduce_unless_vdev(obj: Any) -> Any:
        if _is_vdev(obj):
            raise RuntimeError(_MESSAGE.format(what=_describe(obj)))
        return reduce(obj)

    reduce_unless_vdev.__wrapped__ = reduce  # type: ignore[attr-defined]
    return reduce_unless_vdev


def _checked_put(put: Any) -> Any:
    def put_unless_vdev(self: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.vdev._initialized:
            refuse_vdev_objects(obj)
        return put(self, obj, *args, **kwargs)

    put_unless_vdev.__wrapped__ = put  # type: ignore[attr-defined]
    return put_unless_vdev


_installed = False


def install() -> None:
    """Wraps the tensor and storage reductions and Queue.put (once)."""
    global _installed
    if _installed:
        return
    import torch.multiprocessing  # noqa: F401  (registers torch's reductions first)

    for cls, reduce in list(ForkingPickler._extra_reducers.items()):
        if isinstance(cls, type) and issubclass(
            cls, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)
        ):
            ForkingPickler.register(cls, _refusing(reduce))
    for queue in (multiprocessing.queues.Queue, multiprocessing.queues.JoinableQueue):
        if "put" in vars(queue):
            queue.put = _checked_put(vars(queue)["put"])
    _installed = True
