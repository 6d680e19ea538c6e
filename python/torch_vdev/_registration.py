"""One-time registration of the vdev backend with torch (idempotent, thread-safe).

Steps, in order: load the native extension (which registers the kernels, device guard, allocator
and hooks), rename PrivateUse1 to ``vdev``, install ``torch.vdev``, generate the
``Tensor.vdev()`` / ``Tensor.is_vdev`` style methods, share vdev tensors sent to other processes,
print vdev tensors as the capability profile allows, register the vccl collectives backend,
prepare torch.compile's registrations (made when Dynamo and Inductor are first used) and register
the exit handler. Every step either succeeds or raises; none of them can fail silently.
"""

import atexit
import threading

_lock = threading.Lock()
_registered = False


def _drain_autograd_device_threads() -> None:
    """Lets autograd's vdev device threads finish with the last backward before Python finalizes.

    torch 2.13's ``_engine_run_backward`` stashes a Python object (a contextvars context) in the
    thread-local state every GraphTask copies. A device thread drops its reference to the
    GraphTask just after it wakes the thread that called backward; when that reference is the
    last, releasing the Python object needs the GIL. A script that ends right after a backward
    races that release against interpreter finalization, which ends the waiting thread inside a
    noexcept destructor: "terminate called without an active exception" (about 1 in 3 runs of a
    five-line script). One more backward on each device, run through the engine directly (no
    Python object stashed), is queued behind that release on the same device thread; it returns
    once the thread has run it, so the release has happened, with the GIL free for it while
    this thread waits in the engine.
    """
    import torch

    if not torch.vdev.is_initialized():
        return
    engine = torch.autograd.Variable._execution_engine
    for index in range(torch.vdev.device_count()):
        device = torch.device("vdev", index)
        leaf = torch.zeros((), device=device, requires_grad=True)
        out = leaf * 2  # a node on the device: autograd runs it on the device's thread
        engine.run_backward((out,), (torch.ones((), device=device),), False, False, (), True, True)


def _at_exit() -> None:
    from torch_vdev import _C

    try:
        _drain_autograd_device_threads()
    except Exception:  # noqa: BLE001  (exiting: a failure here must not hide the real exit)
        pass
    if threading.active_count() > 1:
        # Daemon threads still inside vdev calls park there (cpp/runtime/process.h) and keep
        # their arguments alive: leaks on purpose, which nanobind would report as refcount bugs.
        _C._disable_leak_warnings()
    _C._shutdown()


def register() -> None:
    global _registered
    if _registered:
        return
    with _lock:
        if _registered:
            return
        import torch

        from torch_vdev import _C  # noqa: F401  (loads libtorch_vdev: kernels, guard, hooks)
        from torch_vdev import vdev as device_module

        torch.utils.rename_privateuse1_backend("vdev")
        torch._register_device_module("vdev", device_module)
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
        # Lazy modules: an UninitializedParameter lets through only the methods it lists
        # (torch.Tensor.cuda among them), so LazyLinear(2).vdev() raised where .cuda() works.
        from torch.nn.parameter import UninitializedTensorMixin

        if torch.Tensor.vdev not in UninitializedTensorMixin._allowed_methods:
            UninitializedTensorMixin._allowed_methods.append(torch.Tensor.vdev)
        # vdev tensors sent to other processes (torch.multiprocessing) share device memory.
        from torch_vdev.vdev import _sharing

        _sharing.install()
        # Printing a vdev tensor on a device without float64 (VDEV_PROFILE=mps), as on MPS.
        from torch_vdev.vdev import _profile

        _profile.install()
        # torch.distributed's backend for vdev tensors (vccl), the default for the device.
        from torch_vdev import distributed as vccl

        vccl.register()
        # torch.compile: Dynamo's device interface, registered when Dynamo is first imported.
        from torch_vdev import compile as vdev_compile

        vdev_compile.install()
        # Exit (cpp/runtime/process.h): the workers stop while the interpreter is still whole,
        # after the user's atexit handlers (registered later, run earlier) and after the
        # non-daemon threads have been joined.
        atexit.register(_at_exit)
        _registered = True
