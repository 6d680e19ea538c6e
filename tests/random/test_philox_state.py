"""torch.Generator.philox_state (torch 2.14 and later): vdev's generator reserves Philox counter
ranges as CUDA's does, so a custom kernel that draws through it composes with vdev's own random
operators."""

import pytest
import torch

pytestmark = pytest.mark.skipif(
    not hasattr(torch.Generator, "philox_state"),
    reason=f"torch {torch.__version__} has no Generator.philox_state (added in 2.14)",
)


def test_reserves_a_rounded_range_and_returns_it_as_cpu_int64_tensors():
    g = torch.Generator(device="vdev:1").manual_seed(123)
    seed, offset, intragraph = g.philox_state(5)
    for t in (seed, offset, intragraph):
        assert t.device == torch.device("cpu") and t.dtype == torch.int64 and t.numel() == 1
    assert (seed.item(), offset.item(), intragraph.item()) == (123, 0, 0)
    assert g.get_offset() == 8  # 5 rounded up to a multiple of 4
    assert g.philox_state(0)[1].item() == 8 and g.get_offset() == 8
    assert g.philox_state(4)[1].item() == 8 and g.get_offset() == 12


def test_seed_bits_above_int64_are_kept():
    g = torch.Generator(device="vdev").manual_seed(2**64 - 1)
    seed, _, _ = g.philox_state(4)
    assert seed.item() & (2**64 - 1) == 2**64 - 1


def test_random_operators_after_a_reservation_draw_past_it():
    g = torch.Generator(device="vdev").manual_seed(7)
    g.philox_state(16)
    after = torch.rand(8, device="vdev", generator=g)
    reference = torch.Generator(device="vdev").manual_seed(7)
    reference.set_offset(16)
    assert torch.equal(after, torch.rand(8, device="vdev", generator=reference))


def test_default_generator_and_capture():
    torch.vdev.manual_seed(5)
    seed, offset, _ = torch.vdev.default_generators[0].philox_state(4)
    assert (seed.item(), offset.item()) == (5, 0)
    graph = torch.vdev.VdevGraph()
    stream = torch.vdev.Stream()
    with torch.vdev.stream(stream), pytest.raises(NotImplementedError, match="graph capture"):
        graph.capture_begin()
        try:
            torch.vdev.default_generators[0].philox_state(4)
        finally:
            graph.capture_end()
