"""Random operators on vdev: queued like every operator, values a function of (seed, offset, shape)
only, CPU's distributions, and never the CPU generator."""

import pytest
import torch
import torch.nn.functional as F
from asyncutil import gated, run_bounded, sid, wait_until_blocked
from hypothesis import given
from hypothesis import strategies as st

from torch_vdev import _testing as rt

N = 100_000


# Every random operator a training script meets, each queued on the current stream.
QUEUED = {
    "rand": lambda x: torch.rand(1, device="vdev"),
    "randn": lambda x: torch.randn(4, 4, device="vdev"),
    "randint": lambda x: torch.randint(0, 10, (5,), device="vdev"),
    "randperm": lambda x: torch.randperm(8, device="vdev"),
    "normal_": lambda x: torch.empty(8, device="vdev").normal_(),
    "bernoulli": lambda x: torch.bernoulli(x.sigmoid()),
    "dropout": lambda x: F.dropout(x, 0.5),
    "multinomial": lambda x: torch.multinomial(x.abs() + 0.1, 3),
    "poisson": lambda x: torch.poisson(x.abs()),
    "rrelu": lambda x: F.rrelu(x, training=True),
    "exponential_": lambda x: torch.empty(8, device="vdev").exponential_(),
    "uniform_": lambda x: torch.empty(8, device="vdev").uniform_(-1, 1),
    "bernoulli_": lambda x: torch.empty(8, device="vdev").bernoulli_(0.3),
    "random_": lambda x: torch.empty(8, device="vdev", dtype=torch.int64).random_(),
    "random_.to": lambda x: torch.empty(8, device="vdev").random_(7),
    "random_.from": lambda x: torch.empty(8, device="vdev", dtype=torch.int8).random_(-3, 3),
    "random_ full range": lambda x: torch.empty(8, device="vdev", dtype=torch.int64).random_(
        -(2**63), None
    ),
    "geometric_": lambda x: torch.empty(8, device="vdev").geometric_(0.3),
    "log_normal_": lambda x: torch.empty(8, device="vdev").log_normal_(),
    "cauchy_": lambda x: torch.empty(8, device="vdev").cauchy_(),
    "randn complex": lambda x: torch.randn(8, device="vdev", dtype=torch.cfloat),
    # no meta kernel in ATen: vdev registers one (cpp/backend/ops/meta_kernels.cpp)
    "binomial": lambda x: torch.binomial(x.abs() * 10, torch.full_like(x, 0.5)),
    "_sample_dirichlet": lambda x: torch._sample_dirichlet(x[:16].abs().reshape(4, 4) + 0.1),
    "dirichlet rsample and its gradient": lambda x: _dirichlet_rsample_grad(x),
}


def _dirichlet_rsample_grad(x):
    # validate_args=False: argument validation reads the values on the host (it would on CUDA too)
    alpha = (x[:16].abs().reshape(4, 4) + 0.1).requires_grad_()
    sample = torch.distributions.Dirichlet(alpha, validate_args=False).rsample()
    (grad,) = torch.autograd.grad(sample.sum(), alpha)
    return grad


@pytest.mark.parametrize("name", sorted(QUEUED))
def test_a_random_operator_is_queued_not_synchronized(name):
    x = torch.randn(16, device="vdev")
    stream = torch.vdev.current_stream()
    out = []
    with gated(stream) as gate:
        wait_until_blocked(gate)
        finished = run_bounded(lambda: out.append(QUEUED[name](x)))
        assert finished, f"{name} waited for the stream: it synchronized"
        assert not rt.stream_query(*sid(stream))  # its work is behind the gate
    torch.vdev.synchronize()
    assert out[0].device.type == "vdev"
    assert torch.isfinite(out[0].float().cpu()).all()


def test_a_training_step_with_dropout_does_not_synchronize():
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1)
    ).to("vdev")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 8, device="vdev"), torch.randn(32, 1, device="vdev")
    stream = torch.vdev.current_stream()

    def step():
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()

    with gated(stream) as gate:
        wait_until_blocked(gate)
        assert run_bounded(step), "the training step synchronized"
    torch.vdev.synchronize()
    assert all(torch.isfinite(p.cpu()).all() for p in model.parameters())


def test_random_operators_never_consume_the_cpu_generator():
    x = torch.randn(64, device="vdev")
    torch.vdev.synchronize()
    before = torch.get_rng_state()
    for fn in QUEUED.values():
        fn(x)
    F.scaled_dot_product_attention(*(torch.randn(1, 2, 4, 8, device="vdev"),) * 3, dropout_p=0.5)
    torch.vdev.synchronize()
    assert torch.equal(torch.get_rng_state(), before)


# Calls CPU (and CUDA) reject, from ATen's argument checks and from CPU's kernels' dtype checks.
REJECTED = {
    "uniform_ from > to": lambda d: torch.empty(4, device=d).uniform_(2, 1),
    "uniform_ on int": lambda d: torch.empty(4, device=d, dtype=torch.int32).uniform_(),
    "normal_ std < 0": lambda d: torch.empty(4, device=d).normal_(0, -1),
    "normal_ on int": lambda d: torch.empty(4, device=d, dtype=torch.int32).normal_(),
    "normal_ overlapping": lambda d: torch.empty(2, device=d).expand(3, 2).normal_(),
    "bernoulli_ p > 1": lambda d: torch.empty(4, device=d).bernoulli_(1.5),
    "random_ from >= to": lambda d: torch.empty(4, device=d).random_(5, 5),
    "random_ to - 1 out of bounds": lambda d: torch.empty(4, device=d, dtype=torch.bool).random_(3),
    "random_ full range on half": lambda d: torch.empty(4, device=d, dtype=torch.half).random_(
        -(2**63), None
    ),
    "exponential_ lambda <= 0": lambda d: torch.empty(4, device=d).exponential_(-1),
    "exponential_ on int": lambda d: torch.empty(4, device=d, dtype=torch.int32).exponential_(),
    "geometric_ p = 0": lambda d: torch.empty(4, device=d).geometric_(0),
    "log_normal_ std = 0": lambda d: torch.empty(4, device=d).log_normal_(0, 0),
    "log_normal_ on int": lambda d: torch.empty(4, device=d, dtype=torch.int32).log_normal_(),
    "cauchy_ on int": lambda d: torch.empty(4, device=d, dtype=torch.int32).cauchy_(),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_a_rejected_call_raises_cpus_error_at_the_call_and_draws_nothing(name):
    with pytest.raises(Exception) as on_cpu:
        REJECTED[name]("cpu")
    gen = torch.vdev.default_generators[0]
    offset = gen.get_offset()
    with pytest.raises(type(on_cpu.value)) as on_vdev:
        REJECTED[name]("vdev")
    assert str(on_vdev.value) == str(on_cpu.value)
    assert gen.get_offset() == offset  # no draw reserved
    torch.vdev.synchronize()  # and nothing failed later on the stream


def test_values_do_not_depend_on_the_stream():
    torch.manual_seed(9)
    ref = [torch.randn(100, device="vdev").cpu(), F.dropout(torch.ones(100, device="vdev")).cpu()]
    torch.manual_seed(9)
    side = torch.vdev.Stream()
    with torch.vdev.stream(side):
        got = [torch.randn(100, device="vdev"), F.dropout(torch.ones(100, device="vdev"))]
    side.synchronize()
    assert all(torch.equal(a, b.cpu()) for a, b in zip(ref, got, strict=True))


OPS = {
    "rand": lambda n: torch.rand(n, device="vdev"),
    "randn": lambda n: torch.randn(n, device="vdev"),
    "randint": lambda n: torch.randint(-5, 5, (n,), device="vdev"),
    "bernoulli_": lambda n: torch.empty(n, device="vdev").bernoulli_(0.3),
    "normal_": lambda n: torch.empty(n, 2, device="vdev").normal_(1.0, 2.0),
    "dropout": lambda n: F.dropout(torch.ones(n, device="vdev"), 0.4),
    "multinomial": lambda n: torch.multinomial(torch.ones(n, device="vdev"), 1),
}


@given(
    calls=st.lists(
        st.tuples(
            st.integers(0, 1),  # device
            st.integers(0, 2),  # stream: 0 = default, 1 and 2 = side streams
            st.sampled_from(sorted(OPS)),
            st.integers(1, 40),  # size
        ),
        min_size=1,
        max_size=12,
    )
)
def test_any_interleaving_over_streams_and_devices_gives_the_same_values(calls):
    # Reference: each device's calls in order, device 0 first, all on the default streams.
    torch.manual_seed(2024)
    ref = {}
    for dev in (0, 1):
        with torch.vdev.device(dev):
            for i, (d, _, name, n) in enumerate(calls):
                if d == dev:
                    ref[i] = OPS[name](n).cpu()
    # The same calls interleaved across devices as listed, each on the stream drawn for it.
    torch.manual_seed(2024)
    streams = {d: [torch.vdev.default_stream(d)] + [torch.vdev.Stream(d) for _ in range(2)]
               for d in (0, 1)}  # fmt: skip
    got = {}
    for i, (d, s, name, n) in enumerate(calls):
        with torch.vdev.device(d), torch.vdev.stream(streams[d][s]):
            got[i] = OPS[name](n)
    for d in (0, 1):
        torch.vdev.synchronize(d)
    for i in ref:
        assert torch.equal(ref[i], got[i].cpu()), calls[i]
