"""One-time registration of the vdev backend with torch (idempotent, thread-safe).

Steps, in order: check that this build is for the installed torch, load the native extension
(which registers the kernels, device guard, allocator and hooks), rename PrivateUse1 to ``vdev``,
install ``torch.vdev``, generate the ``Tensor.vdev()`` / ``Tensor.is_vdev`` style methods, share
vdev tensors sent to other processes, print vdev tensors as the capability profile allows, list
vdev's profiler activity only while a device is available, register the vccl collectives backend,
prepare torch.compile's registrations (made when Dynamo and Inductor are first used) and register
the exit handler. Every step either succeeds or raises; none of them can fail silently.
"""

import atexit
import threading

_lock = threading.Lock()
_registered = False
_torch_supported_activities = None  # torch.autograd._supported_activities before register()


def _supported_activities() -> set:
    """torch.autograd._supported_activities, without vdev's activity while no vdev device is
    available. torch lists PrivateUse1 whenever the backend is renamed (``_supported_activities``
    in torch/csrc/autograd/init.cpp), CUDA only when a GPU is there (``at::getNumGPUs() > 0``);
    ``torch.profiler.profile()`` profiles every listed activity and, for vdev's, synchronizes
    the devices at exit, so with a malformed ``VDEV_*`` variable a CPU-only profile raised the
    configuration error there and lost its trace. Unlisted, it runs CPU-only, as without a GPU;
    the error still comes at the first use of a device (or of ``ProfilerActivity.PrivateUse1``,
    asked for by name)."""
    import torch

    activities = _torch_supported_activities()
    if not torch.vdev.is_available():  # never raises: False when the configuration is malformed
        activities.discard(torch.profiler.ProfilerActivity.PrivateUse1)
    return activities


def _at_exit() -> None:
    # Autograd's device threads finish with the last backward first (bindings/autograd_exit.cpp);
    # not while other threads live, as one may hold what it needs.
    import torch

    from torch_vdev import _C

    if threading.active_count() == 1 and torch.vdev.is_initialized():
        try:
            _C._drain_autograd_device_threads()
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

        # First: a build for another torch release fails here with what to do, not at loading
        # libtorch_vdev (an undefined symbol) nor half-registered.
        from torch_vdev._compat import check_torch_release

        check_torch_release()
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
        from torch_vdev.vdev import _capability

        _capability.install()
        # torch.profiler: vdev's activity is supported while a device is available (see above).
        global _torch_supported_activities
        _torch_supported_activities = torch.autograd._supported_activities
        torch.autograd._supported_activities = _supported_activities
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
