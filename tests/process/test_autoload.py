"""Autoload through the torch.backends entry point, both import orders, opt-out, failures."""

from importlib.metadata import entry_points

import pytest

from child_process import run_python


def test_entry_point_is_declared():
    eps = [ep for ep in entry_points(group="torch.backends") if ep.name == "vdev"]
    assert len(eps) == 1 and eps[0].value == "torch_vdev._autoload:_autoload"


def test_import_torch_registers_everything():
    r = run_python(
        """
        import sys, torch
        assert "torch_vdev" in sys.modules
        assert torch._C._get_privateuse1_backend_name() == "vdev"
        x = torch.tensor([1., 2.], device="vdev:1")
        print(x + 2, torch.vdev.device_count(), hasattr(torch.Tensor, "is_vdev"))
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "tensor([3., 4.], device='vdev:1') 2 True"
    assert r.stderr == ""  # autoload prints nothing, warns nothing


def test_import_torch_vdev_first_works():
    r = run_python(
        """
        import torch_vdev
        import torch
        print(torch.ones(2, device="vdev:1").sum().item())
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "2.0"


def test_autoload_disabled_then_explicit_import():
    r = run_python(
        """
        import sys, torch
        assert "torch_vdev" not in sys.modules, "backend loaded although autoload is off"
        assert not hasattr(torch, "vdev")
        import torch_vdev
        import torch_vdev  # idempotent
        torch_vdev._registration.register()  # idempotent
        print(torch.zeros(1, device="vdev:1").device)
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "vdev:1"


def test_loading_failure_shows_the_real_cause():
    # Simulate a broken installation: the native module cannot be imported.
    r = run_python(
        """
        import sys
        sys.modules["torch_vdev._C"] = None
        import torch
        """
    )
    assert r.returncode != 0
    assert "Failed to load the backend extension: vdev" in r.stderr
    assert "torch_vdev._C" in r.stderr  # the underlying ImportError is chained, not hidden


def test_a_process_group_naming_vccl_loads_vdev_with_autoload_off():
    # torch 2.14's c10d loads the torch.distributed.backends entry point named after an unknown
    # backend (Backend._ensure_backend_registered); 2.13 has no such lookup.
    import torch.distributed as dist

    if not hasattr(dist.Backend, "_ensure_backend_registered"):
        pytest.skip("torch 2.13 does not load torch.distributed.backends entry points")
    eps = [ep for ep in entry_points(group="torch.distributed.backends") if ep.name == "vccl"]
    assert len(eps) == 1 and eps[0].value == "torch_vdev._autoload:_autoload"
    r = run_python(
        """
        import sys, torch, torch.distributed as dist
        assert "torch_vdev" not in sys.modules
        dist.init_process_group("vccl", store=dist.HashStore(), rank=0, world_size=1)
        x = torch.ones(3, device="vdev")
        dist.all_reduce(x)
        print(dist.get_backend(), x.sum().item())
        dist.destroy_process_group()
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "vccl 3.0"
