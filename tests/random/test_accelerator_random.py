"""torch.accelerator.random (torch 2.14 and later) on vdev: it reads each device's default
generator through the hooks' getDefaultGenerator, as torch.vdev's own functions do."""

import pytest
import torch

pytestmark = pytest.mark.skipif(
    not hasattr(torch.accelerator, "random"),
    reason=f"torch {torch.__version__} has no torch.accelerator.random (added in 2.14)",
)


def test_states_and_seeds_are_the_devices_default_generators():
    torch.vdev.manual_seed_all(7)
    torch.randn(3, device="vdev:1")  # moves device 1's offset only
    assert torch.accelerator.random.initial_seed() == 7
    assert torch.accelerator.random.initial_seed(1) == 7
    for device in range(torch.vdev.device_count()):
        assert torch.equal(
            torch.accelerator.random.get_rng_state(device), torch.vdev.get_rng_state(device)
        )
    states = torch.accelerator.random.get_rng_state_all()
    assert len(states) == torch.vdev.device_count()
    assert not torch.equal(states[0], states[1])  # device 1 drew, device 0 did not
    with torch.vdev.device(1):
        assert torch.equal(torch.accelerator.random.get_rng_state(), states[1])


def test_a_bad_device_index_names_the_valid_range():
    with pytest.raises(IndexError, match=r"device index 5 out of range: 2 vdev devices \(0\.\.1\)"):
        torch.accelerator.random.initial_seed(5)
