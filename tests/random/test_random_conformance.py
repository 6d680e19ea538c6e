"""Random operators on vdev, as CUDA's behave: reproducible from a seed, values independent of the
stream and of when the work runs, CPU's distribution in every dtype, parameters honoured.

The operators: every OpInfo of PyTorch's op_db whose samples call an operator tagged
nondeterministic_seeded (RANDOM_OPINFOS; test_op_db_random_operators_are_all_listed keeps the list
complete), and the tensor methods, factories, nn.functional calls and torch.distributions samplers
of METHODS. Each is checked for:
1. seeding: torch.manual_seed(s) twice gives bit-identical values; torch.vdev.manual_seed(s) (the
   current device only) gives those values too; another seed gives others;
2. streams and timing: the same values on a side stream, and when the call is queued behind a task
   held by a gate (tests/asyncutil.py) while other random calls are made meanwhile: a vdev random
   operator takes its generator offset when it is called, not when its stream runs it;
3. distribution (DISTRIBUTIONS, per dtype CUDA supports): N values drawn on vdev and on CPU from
   fixed seeds are compared, continuous ones with the two-sample Kolmogorov-Smirnov distance and
   discrete ones with a chi-square test on the counts (torch only: scipy is not a dependency), and
   the parameters' ranges hold (uniform_(-1, 5) in [-1, 5], random_(0, 7) in [0, 7), ...).
   NEGATIVE_CONTROLS show both statistics reject a shifted mean, a wrong scale, a wrong p and a
   wrong range at the same N and thresholds.
tests/random/test_distributions.py compares one dtype per operator, mostly float32, with the
default parameters; this file adds the dtypes, parameters and discrete tests.

The seeds are fixed, so every statistic is a fixed number and the outcome never changes between
runs; the thresholds are those a correct sampler exceeds with probability 1e-6, so a seed change
cannot plausibly make a correct sampler fail. Samples are 20,000 values: a KS bound of 0.027, which
a shift of a tenth of a standard deviation (KS distance 0.04) exceeds.
"""

import math
import os
import warnings

import pytest
import torch
import torch.nn.functional as F
from asyncutil import gated, on_stream, run_bounded, sid, wait_until_blocked

# The random-operator detector of the OpInfo sweep (tests/ops/opinfo_sweep.py), shared.
from opinfo_sweep import SeededOperators, op_name
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_map
from two_sample import ks_distance

from torch_vdev import _testing as rt

FULL = os.environ.get("VDEV_CONFORMANCE_FULL") == "1"
N = 20_000
ALPHA = 1e-6
# Two-sample KS critical distance at ALPHA for two samples of N: c(alpha) * sqrt(2 / N).
KS_BOUND = math.sqrt(-math.log(ALPHA / 2) / 2) * math.sqrt(2 / N)


def chi2_critical(df: int) -> float:
    """The upper ALPHA quantile of chi-square(df): P(X > x) = gammaincc(df / 2, x / 2), solved by
    bisection (torch.special has the regularized incomplete gamma function; scipy is not here)."""
    lo, hi = 0.0, 10.0 * df + 100.0
    half_df = torch.tensor(df / 2, dtype=torch.float64)
    for _ in range(100):
        mid = (lo + hi) / 2
        tail = torch.special.gammaincc(half_df, torch.tensor(mid / 2, dtype=torch.float64)).item()
        lo, hi = (mid, hi) if tail > ALPHA else (lo, mid)
    return hi


def chi2_two_sample(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """Chi-square homogeneity test of two samples' value counts; returns (statistic, critical
    value). Values expected fewer than 5 times in either sample are pooled into one category (the
    chi-square approximation needs expected counts of at least 5)."""
    values, inverse = torch.cat([a.flatten(), b.flatten()]).double().unique(return_inverse=True)
    counts = torch.zeros(2, len(values), dtype=torch.float64)
    counts[0].index_add_(0, inverse[: a.numel()], torch.ones(a.numel(), dtype=torch.float64))
    counts[1].index_add_(0, inverse[a.numel() :], torch.ones(b.numel(), dtype=torch.float64))
    share = counts.sum(1, keepdim=True) / counts.sum()
    expected = share * counts.sum(0)
    rare = (expected < 5).any(0)
    if rare.any():
        counts = torch.cat([counts[:, ~rare], counts[:, rare].sum(1, keepdim=True)], 1)
        expected = share * counts.sum(0)
    stat = ((counts - expected) ** 2 / expected).sum().item()
    return stat, chi2_critical(max(counts.shape[1] - 1, 1))


def assert_same_distribution(got: torch.Tensor, ref: torch.Tensor, discrete: bool, what: str):
    if discrete:
        stat, bound = chi2_two_sample(got, ref)
        assert stat < bound, f"{what}: chi-square {stat:.1f} >= {bound:.1f}"
    else:
        d = ks_distance(got.float(), ref.float())
        assert d < KS_BOUND, f"{what}: KS distance {d:.4f} >= {KS_BOUND:.4f}"


def bitwise_equal(a, b) -> None:
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


def to_cpu(x):
    return x.detach().cpu() if isinstance(x, torch.Tensor) else x


# --- 1 and 2 on the tensor methods, factories, nn.functional and torch.distributions ------------

D = "vdev"
METHODS = {
    "uniform_": lambda: torch.empty(1000, device=D).uniform_(-1, 5),
    "normal_": lambda: torch.empty(1000, device=D).normal_(3, 2),
    "bernoulli_": lambda: torch.empty(1000, device=D).bernoulli_(0.3),
    "bernoulli_ tensor p": lambda: torch.empty(1000, device=D).bernoulli_(
        torch.linspace(0, 1, 1000, device=D)
    ),
    "bernoulli": lambda: torch.bernoulli(torch.full((1000,), 0.4, device=D)),
    "exponential_": lambda: torch.empty(1000, device=D).exponential_(2.5),
    "geometric_": lambda: torch.empty(1000, device=D).geometric_(0.3),
    "log_normal_": lambda: torch.empty(1000, device=D).log_normal_(0.5, 0.4),
    "cauchy_": lambda: torch.empty(1000, device=D).cauchy_(1, 2),
    "random_": lambda: torch.empty(1000, device=D, dtype=torch.int64).random_(),
    "random_ to": lambda: torch.empty(1000, device=D).random_(7),
    "random_ from to": lambda: torch.empty(1000, device=D, dtype=torch.int16).random_(-4, 9),
    "multinomial replacement": lambda: torch.multinomial(
        torch.arange(1.0, 9.0, device=D), 500, replacement=True
    ),
    "multinomial no replacement": lambda: torch.multinomial(
        torch.arange(1.0, 9.0, device=D).expand(100, 8), 5
    ),
    "randperm": lambda: torch.randperm(1000, device=D),
    "randint": lambda: torch.randint(-3, 100, (1000,), device=D),
    "rand": lambda: torch.rand(1000, device=D),
    "randn": lambda: torch.randn(1000, device=D),
    "randn complex": lambda: torch.randn(1000, device=D, dtype=torch.complex64),
    "poisson": lambda: torch.poisson(torch.full((1000,), 4.0, device=D)),
    "dropout": lambda: F.dropout(torch.ones(1000, device=D), 0.3),
    "dropout1d": lambda: F.dropout1d(torch.ones(50, 20, 4, device=D), 0.3),
    "dropout2d": lambda: F.dropout2d(torch.ones(50, 20, 2, 2, device=D), 0.3),
    "dropout3d": lambda: F.dropout3d(torch.ones(50, 20, 2, 2, 1, device=D), 0.3),
    "alpha_dropout": lambda: F.alpha_dropout(torch.ones(1000, device=D), 0.3, training=True),
    "feature_alpha_dropout": lambda: F.feature_alpha_dropout(
        torch.ones(50, 20, 2, device=D), 0.3, training=True
    ),
    "rrelu": lambda: F.rrelu(torch.full((1000,), -1.0, device=D), training=True),
    "Normal.rsample": lambda: torch.distributions.Normal(
        torch.zeros(1000, device=D), torch.ones(1000, device=D), validate_args=False
    ).rsample(),  # validation reads the values on the host: it would wait for the stream
    "Gamma.sample": lambda: torch.distributions.Gamma(
        torch.full((1000,), 2.0, device=D), torch.ones(1000, device=D), validate_args=False
    ).sample(),
    "Beta.sample": lambda: torch.distributions.Beta(
        torch.full((1000,), 2.0, device=D), torch.full((1000,), 3.0, device=D), validate_args=False
    ).sample(),
    "Categorical.sample": lambda: torch.distributions.Categorical(
        probs=torch.arange(1.0, 5.0, device=D), validate_args=False
    ).sample((1000,)),
    "Binomial.sample": lambda: torch.distributions.Binomial(
        torch.full((1000,), 10.0, device=D), torch.full((1000,), 0.3, device=D), validate_args=False
    ).sample(),
}


def draw(fn, seed: int, seeder=torch.manual_seed):
    seeder(seed)
    out = tree_map(to_cpu, fn())
    torch.vdev.synchronize()
    return out


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_same_seed_same_values(name):
    fn = METHODS[name]
    ref = draw(fn, 11)
    bitwise_equal(draw(fn, 11), ref)
    bitwise_equal(draw(fn, 11, torch.vdev.manual_seed), ref)  # the current device's generator
    assert not torch.equal(draw(fn, 12), ref), "another seed gave the same values"


def queued_behind_a_gate(fn, seed: int):
    """fn's result, called on a side stream while that stream is held by a gate, with other random
    calls on the default stream before the gate opens."""
    torch.manual_seed(seed)
    side = torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())
    out = []
    with gated(side) as gate:
        wait_until_blocked(gate)
        # On a thread, bounded: a call that waited for its stream would wait for the gate
        finished = run_bounded(on_stream(side, lambda: out.append(fn())))
        assert finished, "the call waited for its stream (behind the gate)"
        assert not rt.stream_query(*sid(side)), "the call did not queue behind the gate"
        torch.rand(4096, device=D)  # drawn after `out` was called, run before it
    side.synchronize()
    return tree_map(to_cpu, out[0])


def on_side_stream(fn, seed: int):
    torch.manual_seed(seed)
    side = torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())
    with torch.vdev.stream(side):
        out = fn()
    side.synchronize()
    return tree_map(to_cpu, out)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_values_independent_of_stream_and_timing(name):
    fn = METHODS[name]
    ref = draw(fn, 21)
    bitwise_equal(on_side_stream(fn, 21), ref)
    bitwise_equal(queued_behind_a_gate(fn, 21), ref)


# --- 1 and 2 on op_db's random operators ------------------------------------------------------


OPINFOS = {op_name(op): op for op in op_db}
# Found by SeededOperators over every sample (VDEV_CONFORMANCE_FULL=1 checks it is complete).
RANDOM_OPINFOS = [
    "bernoulli",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "multinomial",
    "nn.functional.alpha_dropout",
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
    "nn.functional.multi_head_attention_forward",
    "nn.functional.rrelu",
    "nn.functional.scaled_dot_product_attention",
    "normal",
    "normal.in_place",
    "normal.number_mean",
    "pca_lowrank",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "svd_lowrank",
    "torch.ops.aten._efficient_attention_forward",
    "torch.ops.aten._flash_attention_forward",
    "uniform",
]
# OpInfos of later torch releases (absent from 2.13's op_db).
RANDOM_OPINFOS += [
    name
    for name in ["torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"]  # torch 2.14
    if any(op.name == name for op in op_db)
]
# No sample runs on CPU (CPU has no such kernel, and vdev runs CPU's kernels): nothing to compare.
NO_CPU_KERNEL = {
    "torch.ops.aten._efficient_attention_forward",
    "torch.ops.aten._flash_attention_forward",
}
# They wait for their own result on the host (linalg_svd checks its result, as on CUDA): queued
# behind a gate they would wait for the gate. Checked on a side stream only.
SYNCHRONIZING = {
    "pca_lowrank": "torch.linalg.svd waits for its result",
    "svd_lowrank": "torch.linalg.svd waits for its result",
}


def dtype_for(op) -> torch.dtype:
    dtypes = op.supported_dtypes("cuda")
    return torch.float32 if torch.float32 in dtypes else sorted(dtypes, key=str)[0]


def random_samples(op, limit: int):
    """Up to `limit` of op's samples (made on CPU from a fixed seed) that draw random numbers."""
    torch.manual_seed(0)
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in op.sample_inputs("cpu", dtype_for(op)):
            mode = SeededOperators()
            try:
                with mode:
                    op(s.input, *s.args, **s.kwargs)
            except Exception:  # noqa: BLE001 (a sample the CPU reference cannot run)
                continue
            if mode.seen:
                found.append(s)
                if len(found) == limit:
                    break
    return found


def test_op_db_random_operators_are_all_listed():
    # The first sample is enough to find most (2 s); every sample finds them all (40 s, FULL).
    found = set()
    for name, op in OPINFOS.items():
        if not op.supported_dtypes("cuda"):
            continue
        torch.manual_seed(0)
        try:
            samples = op.sample_inputs("cpu", dtype_for(op))
            samples = list(samples) if FULL else [next(iter(samples))]
        except Exception:  # noqa: BLE001 (a sample function that does not run here)
            continue
        for s in samples:
            mode = SeededOperators()
            try:
                with warnings.catch_warnings(), mode:
                    warnings.simplefilter("ignore")
                    op(s.input, *s.args, **s.kwargs)
            except Exception:  # noqa: BLE001 (tagged operators are recorded before they run)
                pass
            if mode.seen:
                found.add(name)
                break
    assert found <= set(RANDOM_OPINFOS), (
        f"random OpInfos to add: {sorted(found - set(RANDOM_OPINFOS))}"
    )
    if FULL:
        assert found == set(RANDOM_OPINFOS), sorted(set(RANDOM_OPINFOS) - found)


def opinfo_call(name: str):
    """A call of op's first random sample on vdev (inputs copied from the CPU sample)."""
    if name in NO_CPU_KERNEL:
        assert not random_samples(OPINFOS[name], 1), f"{name} now runs on CPU: test it"
        pytest.skip("no sample runs on CPU: no CPU kernel, and vdev runs CPU's kernels")
    op = OPINFOS[name]
    (sample,) = random_samples(op, 1)
    s = sample.transform(lambda x: x.to(D) if isinstance(x, torch.Tensor) else x)
    return lambda: op(s.input, *s.args, **s.kwargs)


@pytest.mark.parametrize("name", RANDOM_OPINFOS)
def test_opinfo_same_seed_same_values(name):
    fn = opinfo_call(name)
    ref = draw(fn, 11)
    bitwise_equal(draw(fn, 11), ref)
    bitwise_equal(draw(fn, 11, torch.vdev.manual_seed), ref)


@pytest.mark.parametrize("name", RANDOM_OPINFOS)
def test_opinfo_values_independent_of_stream_and_timing(name):
    fn = opinfo_call(name)
    ref = draw(fn, 21)
    bitwise_equal(on_side_stream(fn, 21), ref)
    if name not in SYNCHRONIZING:
        bitwise_equal(queued_behind_a_gate(fn, 21), ref)


# --- 3: distributions and parameters, per dtype -------------------------------------------------

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def within(lo, hi, hi_open=False):
    def check(x):
        x = x.double()
        return bool((x >= lo).all() and ((x < hi) if hi_open else (x <= hi)).all())

    return check


# name -> (dtypes, sample(device, dtype, generator), discrete, range check). Every operator with a
# generator argument takes the test's generator; the others draw from the seeded default one.
DISTRIBUTIONS = {
    "uniform_(-1, 5)": (
        FLOATS,
        lambda d, t, g: torch.empty(N, device=d, dtype=t).uniform_(-1, 5, generator=g),
        False,
        within(-1, 5),
    ),
    "normal_(3, 2)": (
        FLOATS,
        lambda d, t, g: torch.empty(N, device=d, dtype=t).normal_(3, 2, generator=g),
        False,
        None,
    ),
    "normal(mean tensor, std tensor)": (
        FLOATS,
        lambda d, t, g: torch.normal(
            torch.full((N,), -2.0, device=d, dtype=t),
            torch.full((N,), 0.5, device=d, dtype=t),
            generator=g,
        ),  # fmt: skip
        False,
        None,
    ),
    "exponential_(2.5)": (
        FLOATS,
        lambda d, t, g: torch.empty(N, device=d, dtype=t).exponential_(2.5, generator=g),
        False,
        within(0, math.inf),
    ),
    "log_normal_(0.5, 0.4)": (
        FLOATS,
        lambda d, t, g: torch.empty(N, device=d, dtype=t).log_normal_(0.5, 0.4, generator=g),
        False,
        within(0, math.inf),
    ),
    "cauchy_(1, 2)": (
        FLOATS,
        lambda d, t, g: torch.empty(N, device=d, dtype=t).cauchy_(1, 2, generator=g),
        False,
        None,
    ),
    "rand": (
        FLOATS,
        lambda d, t, g: torch.rand(N, device=d, dtype=t, generator=g),
        False,
        within(0, 1, hi_open=True),
    ),  # fmt: skip
    "randn": (FLOATS, lambda d, t, g: torch.randn(N, device=d, dtype=t, generator=g), False, None),
    "random_(0, 7)": (
        INTS + FLOATS,
        lambda d, t, g: torch.empty(N, device=d, dtype=t).random_(0, 7, generator=g),
        True,
        within(0, 7, hi_open=True),
    ),
    "random_(-5, 5)": (
        [torch.int8, torch.int16, torch.int32, torch.int64, torch.float32],
        lambda d, t, g: torch.empty(N, device=d, dtype=t).random_(-5, 5, generator=g),
        True,
        within(-5, 5, hi_open=True),
    ),
    "random_ bool": (
        [torch.bool],
        lambda d, t, g: torch.empty(N, device=d, dtype=t).random_(generator=g),
        True,
        None,
    ),
    "randint(-3, 7)": (
        INTS[1:] + [torch.float32],
        lambda d, t, g: torch.randint(-3, 7, (N,), device=d, dtype=t, generator=g),
        True,
        within(-3, 7, hi_open=True),
    ),
    "bernoulli_(0.3)": (
        FLOATS + INTS + [torch.bool],
        lambda d, t, g: torch.empty(N, device=d, dtype=t).bernoulli_(0.3, generator=g),
        True,
        within(0, 1),
    ),
    "geometric_(0.3)": (
        FLOATS,
        lambda d, t, g: torch.empty(N, device=d, dtype=t).geometric_(0.3, generator=g),
        True,
        within(1, math.inf),
    ),
    "poisson(3.5)": (
        FLOATS,
        lambda d, t, g: torch.poisson(torch.full((N,), 3.5, device=d, dtype=t), generator=g),
        True,
        within(0, math.inf),
    ),
    "multinomial replacement": (
        FLOATS,
        lambda d, t, g: torch.multinomial(
            torch.tensor([1.0, 2.0, 3.0, 4.0], device=d, dtype=t), N, True, generator=g
        ),
        True,
        within(0, 3),
    ),
    "multinomial no replacement, first two": (
        FLOATS,
        lambda d, t, g: torch.multinomial(
            torch.tensor([[1.0, 2.0, 3.0, 4.0]], device=d, dtype=t).expand(N // 2, 4),
            2,
            generator=g,
        ),  # fmt: skip
        True,
        lambda x: within(0, 3)(x) and bool((x[:, 0] != x[:, 1]).all()),
    ),
    "randperm(5) positions": (
        [torch.int64, torch.int32, torch.float32],
        lambda d, t, g: torch.stack(
            [torch.randperm(5, device=d, dtype=t, generator=g) for _ in range(400)]
        ),
        True,
        lambda x: torch.equal(x.sort(1).values.long(), torch.arange(5).expand(400, 5)),
    ),
    "dropout(0.3) kept": (
        FLOATS,
        lambda d, t, g: F.dropout(torch.ones(N, device=d, dtype=t), 0.3),
        True,
        lambda x: bool(((x == 0) | (x == torch.tensor(1 / 0.7, dtype=x.dtype))).all()),
    ),
}
DIST_CASES = [(name, t) for name, (dtypes, *_) in DISTRIBUTIONS.items() for t in dtypes]


def dist_sample(name, device, dtype, seed=1):
    _, fn, _, _ = DISTRIBUTIONS[name]
    torch.manual_seed(seed)  # seeds the CPU generator and every vdev device
    g = torch.Generator(device=device).manual_seed(seed + 1)
    return fn(device, dtype, g).cpu()


@pytest.mark.parametrize("name, dtype", DIST_CASES, ids=[f"{n}-{t}" for n, t in DIST_CASES])
def test_distribution_matches_cpu_per_dtype(name, dtype):
    _, _, discrete, in_range = DISTRIBUTIONS[name]
    got = dist_sample(name, D, dtype)
    ref = dist_sample(name, "cpu", dtype)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if in_range is not None:
        assert in_range(got), f"{name} {dtype}: a value outside the parameters' range"
        assert in_range(ref)  # the check itself is right
    if name == "randperm(5) positions":  # each column (position) is uniform over 0..4
        for col in range(5):
            assert_same_distribution(got[:, col], ref[:, col], True, f"{name} column {col}")
        return
    assert_same_distribution(got, ref, discrete, f"{name} {dtype}")


# The statistics reject wrong distributions at the same N and thresholds: (name, a wrong sampler,
# discrete). Each is compared with CPU's correct sample of DISTRIBUTIONS[name] in float32.
NEGATIVE_CONTROLS = {
    "normal_ shifted mean": (
        "normal_(3, 2)",
        lambda d, g: torch.empty(N, device=d).normal_(3.2, 2, generator=g),
        False,
    ),
    "normal_ wrong std": (
        "normal_(3, 2)",
        lambda d, g: torch.empty(N, device=d).normal_(3, 2.4, generator=g),
        False,
    ),
    "uniform_ narrower": (
        "uniform_(-1, 5)",
        lambda d, g: torch.empty(N, device=d).uniform_(-1, 4.7, generator=g),
        False,
    ),
    "exponential_ wrong rate": (
        "exponential_(2.5)",
        lambda d, g: torch.empty(N, device=d).exponential_(2.2, generator=g),
        False,
    ),
    "bernoulli_ wrong p": (
        "bernoulli_(0.3)",
        lambda d, g: torch.empty(N, device=d).bernoulli_(0.33, generator=g),
        True,
    ),
    "random_ wrong range": (
        "random_(0, 7)",
        lambda d, g: torch.empty(N, device=d).random_(0, 8, generator=g),
        True,
    ),
    "geometric_ wrong p": (
        "geometric_(0.3)",
        lambda d, g: torch.empty(N, device=d).geometric_(0.27, generator=g),
        True,
    ),
    "poisson wrong rate": (
        "poisson(3.5)",
        lambda d, g: torch.poisson(torch.full((N,), 3.8, device=d), generator=g),
        True,
    ),
}


@pytest.mark.parametrize("control", sorted(NEGATIVE_CONTROLS))
@pytest.mark.parametrize("device", ["cpu", D])
def test_negative_control_a_wrong_distribution_is_rejected(control, device):
    name, wrong, discrete = NEGATIVE_CONTROLS[control]
    ref = dist_sample(name, "cpu", torch.float32)
    torch.manual_seed(1)
    got = wrong(device, torch.Generator(device=device).manual_seed(2)).cpu()
    with pytest.raises(AssertionError):
        assert_same_distribution(got, ref, discrete, control)


def test_the_critical_values_are_right():
    # chi-square(1) is a squared standard normal: its upper ALPHA quantile is ndtri(1 - ALPHA / 2)^2
    z = torch.special.ndtri(torch.tensor(1 - ALPHA / 2, dtype=torch.float64)).item()
    assert abs(chi2_critical(1) - z**2) < 1e-6 * z**2
    assert abs(chi2_critical(2) - 2 * math.log(1 / ALPHA)) < 1e-6  # exponential(1/2): closed form
    assert abs(KS_BOUND - 0.0269) < 0.0005
