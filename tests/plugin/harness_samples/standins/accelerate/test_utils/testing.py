"""Stand-in for accelerate.test_utils.testing (see ../../README.md): a fixed ladder of devices,
evaluated once at import, and decorators that read the module's globals when they decorate."""

import unittest

import torch


def get_backend():
    # accelerate's ladder: xla, cuda, mps, mlu, sdaa, musa, npu, xpu, hpu, neuron, then cpu.
    if torch.cuda.is_available():
        return "cuda", torch.cuda.device_count(), torch.cuda.memory_allocated
    return "cpu", 1, lambda: 0


torch_device, device_count, memory_allocated_func = get_backend()


def get_launch_command(**kwargs):
    return ["accelerate", "launch"] + [f"--{k}={v}" for k, v in kwargs.items()]


DEFAULT_LAUNCH_COMMAND = get_launch_command(num_processes=device_count, monitor_interval=0.1)


def require_non_cpu(test_case):
    return unittest.skipUnless(torch_device != "cpu", "test requires a GPU")(test_case)


def require_single_device(test_case):
    return unittest.skipUnless(
        torch_device != "cpu" and device_count == 1, "test requires a single device accelerator"
    )(test_case)


def require_multi_device(test_case):
    return unittest.skipUnless(device_count > 1, "test requires multiple hardware accelerators")(
        test_case
    )
