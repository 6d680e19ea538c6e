"""Per-device generators and torch.vdev's RNG API, with torch.cuda's semantics.

A vdev generator's state is (seed, offset), 16 bytes: the seed then the offset (CUDA's layout);
every random operator reserves 4 offsets when it is queued.
"""

import struct

import pytest
import torch

from child_process import run_python

OFFSET_PER_OP = 4


def seed_offset(state: torch.Tensor) -> tuple[int, int]:
    return struct.unpack("<QQ", bytes(state.tolist()))


def state_of(seed: int, offset: int) -> torch.Tensor:
    return torch.tensor(list(struct.pack("<QQ", seed, offset)), dtype=torch.uint8)


def test_one_default_generator_per_device():
    torch.vdev.init()
    gens = torch.vdev.default_generators
    assert len(gens) == torch.vdev.device_count()
    assert [g.device for g in gens] == [torch.device("vdev", i) for i in range(len(gens))]
    assert torch.vdev.default_generators is gens  # made once


def test_torch_generator_on_vdev():
    assert torch.Generator(device="vdev:1").device == torch.device("vdev:1")
    with torch.vdev.device(1):
        assert torch.Generator(device="vdev").device == torch.device("vdev:1")
    g = torch.Generator(device="vdev:0")
    assert g.initial_seed() == torch.Generator().initial_seed()  # the same default seed as CUDA
    with pytest.raises(IndexError, match="index 7 out of range"):
        torch.Generator(device="vdev:7")


def test_state_is_seed_then_offset_and_random_ops_advance_the_offset():
    torch.vdev.manual_seed(1234)
    assert seed_offset(torch.vdev.get_rng_state()) == (1234, 0)
    state = torch.vdev.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu" and state.numel() == 16
    torch.rand(3, device="vdev")
    torch.randn(1000, device="vdev")
    assert seed_offset(torch.vdev.get_rng_state()) == (1234, 2 * OFFSET_PER_OP)


def test_state_round_trip_replays_the_same_numbers():
    torch.manual_seed(5)
    torch.rand(7, device="vdev")
    state = torch.vdev.get_rng_state()
    a = torch.randn(100, device="vdev").cpu()
    torch.vdev.set_rng_state(state)
    b = torch.randn(100, device="vdev").cpu()
    assert torch.equal(a, b)
    g = torch.Generator(device="vdev")
    g.set_state(state)
    assert torch.equal(torch.randn(100, device="vdev", generator=g).cpu(), a)


def test_a_seed_only_state_sets_offset_zero():
    torch.vdev.set_rng_state(torch.tensor(list(struct.pack("<Q", 99)), dtype=torch.uint8))
    assert seed_offset(torch.vdev.get_rng_state()) == (99, 0)


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (torch.zeros(16), TypeError, "torch.float32"),
        (torch.zeros(16, dtype=torch.int64), TypeError, "torch.int64"),
        (torch.zeros(15, dtype=torch.uint8), ValueError, "got 15"),
        (torch.zeros(17, dtype=torch.uint8), ValueError, "expected 16 bytes"),
        (state_of(1, 6), ValueError, "multiple of 4, got 6"),
        ([0] * 16, TypeError, "list"),
    ],
)
def test_a_bad_state_is_a_clear_error_and_changes_nothing(bad, error, message):
    torch.vdev.manual_seed(77)
    torch.rand(1, device="vdev")
    before = torch.vdev.get_rng_state()
    with pytest.raises(error, match=message):
        torch.vdev.set_rng_state(bad)
    with pytest.raises(error, match=message):
        torch.vdev.set_rng_state_all([before, bad])
    assert torch.equal(torch.vdev.get_rng_state(), before)
    assert torch.equal(torch.vdev.get_rng_state(0), before)


def test_a_device_state_tensor_is_rejected():
    before = torch.vdev.get_rng_state()
    with pytest.raises(TypeError, match="CPU torch.ByteTensor.*on vdev:0"):
        torch.vdev.set_rng_state(before.to("vdev"))
    assert torch.equal(torch.vdev.get_rng_state(), before)


def test_torch_manual_seed_seeds_every_device_and_devices_are_independent():
    torch.manual_seed(42)
    a0 = torch.rand(50, device="vdev:0").cpu()
    a1 = torch.rand(50, device="vdev:1").cpu()
    assert torch.equal(a0, a1)  # same seed, same offset, same shape: same numbers
    torch.manual_seed(42)
    for _ in range(3):
        torch.randn(10, device="vdev:0")  # drawing on vdev:0 ...
    assert torch.equal(torch.rand(50, device="vdev:1").cpu(), a1)  # ... moves nothing on vdev:1


def test_manual_seed_seeds_only_the_current_device():
    torch.vdev.manual_seed_all(1)
    with torch.vdev.device(1):
        torch.vdev.manual_seed(2)
    assert seed_offset(torch.vdev.get_rng_state(0))[0] == 1
    assert seed_offset(torch.vdev.get_rng_state("vdev:1"))[0] == 2
    assert torch.vdev.initial_seed() == 1


def test_seed_and_seed_all():
    torch.vdev.manual_seed_all(0)
    torch.vdev.seed()
    s0 = torch.vdev.initial_seed()
    assert seed_offset(torch.vdev.get_rng_state(1))[0] == 0  # seed() touches the current device
    torch.vdev.seed_all()
    seeds = {seed_offset(s)[0] for s in torch.vdev.get_rng_state_all()}
    assert len(seeds) == 1 and seeds != {s0}


def test_state_all_round_trip():
    torch.manual_seed(3)
    torch.rand(2, device="vdev:1")
    states = torch.vdev.get_rng_state_all()
    a = [torch.rand(4, device=f"vdev:{i}").cpu() for i in range(2)]
    torch.vdev.set_rng_state_all(states)
    b = [torch.rand(4, device=f"vdev:{i}").cpu() for i in range(2)]
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_explicit_generators_are_independent_of_the_default_one():
    g = torch.Generator(device="vdev").manual_seed(11)
    before = torch.vdev.get_rng_state()
    a = torch.randn(20, device="vdev", generator=g).cpu()
    assert torch.equal(torch.vdev.get_rng_state(), before)
    assert g.get_offset() == OFFSET_PER_OP
    g.manual_seed(11)
    assert torch.equal(torch.randn(20, device="vdev", generator=g).cpu(), a)


def test_a_generator_of_another_device_type_is_an_error_that_changes_nothing():
    x = torch.zeros(8, device="vdev")
    before = torch.vdev.get_rng_state()
    allocated = torch.vdev.memory_allocated()
    cpu_gen = torch.Generator()
    for call in (
        lambda: torch.rand(3, device="vdev", generator=cpu_gen),
        lambda: x.normal_(generator=cpu_gen),
        lambda: torch.bernoulli(x, generator=cpu_gen),
        lambda: torch.randperm(5, device="vdev", generator=cpu_gen),
        lambda: torch.multinomial(x + 1, 2, generator=cpu_gen),
    ):
        with pytest.raises(RuntimeError, match="Expected a 'vdev' device type for generator but "):
            call()
    assert torch.equal(torch.vdev.get_rng_state(), before)
    assert torch.vdev.memory_allocated() == allocated
    assert torch.equal(x.cpu(), torch.zeros(8))


def test_a_vdev_generator_cannot_drive_a_cpu_operator():
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator"):
        torch.rand(3, generator=torch.Generator(device="vdev"))


def test_graphsafe_state_is_shared_and_clone_state_is_a_copy():
    g = torch.Generator(device="vdev").manual_seed(8)
    shared = g.graphsafe_get_state()
    copy = g.clone_state()
    torch.rand(1, device="vdev", generator=g)
    assert shared.get_offset() == OFFSET_PER_OP  # the same state object
    assert copy.get_offset() == 0  # a copy taken before the draw
    other = torch.Generator(device="vdev").manual_seed(100)
    g.graphsafe_set_state(other)
    assert g.initial_seed() == 100
    torch.rand(1, device="vdev", generator=g)
    assert other.get_offset() == OFFSET_PER_OP
    with pytest.raises(RuntimeError, match="Expected a 'vdev' generator state"):
        g.graphsafe_set_state(torch.Generator())


def test_set_offset_must_be_a_multiple_of_four():
    g = torch.Generator(device="vdev")
    g.set_offset(8)
    assert g.get_offset() == 8
    with pytest.raises(ValueError, match="multiple of 4, got 5"):
        g.set_offset(5)
    assert g.get_offset() == 8


def test_lazy_initialisation_contract():
    # torch.cuda's: not initialised after import; the first tensor initialises; checkpoint reads
    # `_initialized`; default_generators is filled by initialisation. Seeding does not initialise.
    r = run_python(
        """
        import torch
        m = torch.vdev
        assert not m.is_initialized() and not m._initialized and m.default_generators == ()
        torch.manual_seed(3)
        assert not m.is_initialized()
        torch.ones(1, device="vdev")
        assert m.is_initialized() and m._initialized and len(m.default_generators) == 2
        assert m.initial_seed() == 3
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    r = run_python("import torch; torch.vdev.init(); print(torch.vdev.is_initialized())")
    assert r.stdout.strip() == "True", r.stderr


def test_small_normal_draws_replay_exactly():
    # CPU's normal kernel caches the second Box-Muller value of a pair in its generator; a cached
    # value must never carry over from one operator to the next (each is keyed on its own).
    state = torch.vdev.get_rng_state()
    a = [torch.randn(1, device="vdev").cpu() for _ in range(5)]
    torch.vdev.set_rng_state(state)
    b = [torch.randn(1, device="vdev").cpu() for _ in range(5)]
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert len({x.item() for x in a}) == 5


def test_concurrent_draws_each_reserve_their_own_offsets():
    # Threads queueing random operators on their own streams with one shared generator: every
    # operator gets a distinct counter range (no lost or doubled reservation), and each stream's
    # values are those of the ranges it reserved.
    import threading

    g = torch.Generator(device="vdev").manual_seed(21)
    threads, per_thread = 4, 50
    results = [[] for _ in range(threads)]

    def body(i):
        s = torch.vdev.Stream()
        with torch.vdev.stream(s):
            for _ in range(per_thread):
                results[i].append(torch.rand(2, device="vdev", generator=g))
        s.synchronize()

    workers = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert g.get_offset() == threads * per_thread * OFFSET_PER_OP
    values = {tuple(t.cpu().tolist()) for r in results for t in r}
    assert len(values) == threads * per_thread  # every draw had its own range
    g.manual_seed(21)
    serial = {tuple(torch.rand(2, device="vdev", generator=g).cpu().tolist())
              for _ in range(threads * per_thread)}  # fmt: skip
    assert values == serial  # the same ranges, whatever the order they were taken in


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.vdev.get_rng_state(5),
        lambda: torch.vdev.set_rng_state(torch.vdev.get_rng_state(0), "vdev:3"),
        lambda: torch.vdev.get_rng_state(-1),
    ],
)
def test_a_device_out_of_range_is_a_clear_error(call):
    before = torch.vdev.get_rng_state_all()
    with pytest.raises(
        IndexError, match=r"device index -?\d out of range: 2 vdev devices \(0..1\)"
    ):
        call()
    assert all(
        torch.equal(a, b) for a, b in zip(before, torch.vdev.get_rng_state_all(), strict=True)
    )
