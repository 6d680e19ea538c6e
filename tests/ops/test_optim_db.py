"""vdev against CPU on PyTorch's own optimizer database (OptimizerInfo optim_db).

Every optimizer of optim_db, with every configuration its optim_inputs_func gives, runs a few steps
on vdev in each implementation it supports (for-loop, foreach, fused, differentiable) and on CPU in
the for-loop implementation; the parameters and the optimizer state (every key of every parameter's
state: moments, step counts, LBFGS's history) must match at torch.testing's default tolerances.
Sparse gradients run where the optimizer takes them (SparseAdam only takes them).

The tests are PyTorch's own framework: instantiate_device_type_tests(only_for="privateuse1") with
the @optims decorator, so each optimizer is one test per implementation, named as in PyTorch
(test_foreach_Adam_privateuse1_float32). Two choices depart from what optim_db says for a device
named neither "cuda" nor "cpu", because optim_db keys them on device names, not on what torch.optim
accepts:
- the configurations are those optim_db gives CUDA (optim_inputs_func("cuda")): it keeps the
  capturable and Tensor-lr/Tensor-betas ones for CUDA_CONFIG_GPUS = ["cuda", "xpu"] only, while
  torch.optim accepts capturable=True on vdev (_get_capturable_supported_devices() names the
  PrivateUse1 backend). The CPU reference drops capturable (CPU refuses it; it only moves the step
  counters to the device, the arithmetic is the same).
- fused runs where optim_db's supports_fused_on names "cuda", since torch.optim accepts fused=True
  on vdev (_get_fused_kernels_supported_devices() names the PrivateUse1 backend) and vdev runs
  what CUDA runs; supports_fused_on itself never names a PrivateUse1 device, so PyTorch's own
  test_fused_matches_forloop would skip every fused test here.

The parameters are PyTorch's test_optim model (Linear(2, 3), Sigmoid, Linear(3, 1), Sigmoid) as
plain tensors, plus a 0-dim parameter (PyTorch adds one: foreach/fused once broke on them) and,
where the optimizer supports complex parameters, a complex64 one (not for fused: PyTorch refuses
complex parameters there, on CUDA too). The gradients come from a loss bounded below (LBFGS's line
search needs one) computed on each device; step 2 has no gradients (a step must then be a no-op)
and step 3 none for one layer (a frozen layer), as in PyTorch's _test_derived_optimizers. The
differentiable implementation also differentiates the final parameters with respect to the initial
ones, through every step, and compares that gradient with CPU's (where CPU cannot, vdev must refuse
too).

Cases vdev gets wrong are listed in EXPECTED_FAILURES with their reason; a listed case that passes
fails its test (remove it from the list). VDEV_CONFORMANCE_FULL=1 also runs float64 and runs LBFGS
for as many steps as the others (the default run keeps this file well under a minute).
"""

import os
from copy import deepcopy

import pytest
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_optimizers import optim_db, optims
from torch.testing._internal.common_utils import TestCase
from torch.utils._pytree import tree_map

# Optimizers read .grad of the (non-leaf) differentiable parameters: PyTorch warns, by design here.
pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")

FULL = os.environ.get("VDEV_CONFORMANCE_FULL") == "1"
DTYPES = [torch.float32, torch.float64] if FULL else [torch.float32]
# 7 steps as in PyTorch's parity tests: RAdam's rectified branch starts at step 6. LBFGS runs up
# to 20 evaluations per step, so 3 of its steps already are 60 updates.
STEPS = 7
LBFGS_STEPS = 7 if FULL else 3
IMPL_FLAGS = ("foreach", "fused", "differentiable")

# (optimizer, configuration desc or "*", implementation) -> why vdev does not match CPU.
# (Sparse gradients, listed here until issue 36, now match: tests/layouts/.)
EXPECTED_FAILURES: dict[tuple[str, str, str], str] = {}


def diverges(name: str, config: dict) -> bool:
    """Configurations not compared: LBFGS maximizing this file's loss, which is unbounded above
    (the complex parameter's term). Its line searches take steps large enough that the parameters
    overflow to +-inf within the steps on both devices, and past an overflow (inf - inf = nan) the
    values depend on the order of the reductions' sums (vdev's kernels run with another thread
    count than the host's), not on the device: a comparison would pass or fail by chance. torch
    2.14's optim_db added such configurations ("maximize", "maximize_strong_wolfe")."""
    return name == "LBFGS" and bool(config.get("maximize"))


def expected_failure(name: str, desc: str, impl: str) -> str | None:
    return EXPECTED_FAILURES.get((name, desc, impl)) or EXPECTED_FAILURES.get((name, "*", impl))


def initial_params(dtype, with_complex: bool) -> list[torch.Tensor]:
    """The same values on every device: made on CPU from a fixed seed, then copied."""
    g = torch.Generator().manual_seed(1)
    params = [
        torch.randn(3, 2, generator=g, dtype=dtype),  # Linear(2, 3)
        torch.randn(3, generator=g, dtype=dtype),
        torch.randn(1, 3, generator=g, dtype=dtype),  # Linear(3, 1)
        torch.randn(1, generator=g, dtype=dtype),
        torch.rand((), generator=g, dtype=dtype),  # 0-dim
    ]
    if with_complex:
        params.append(torch.randn(2, 3, generator=g, dtype=torch.complex64))
    return params


def loss_fn(params, x):
    w1, b1, w2, b2, scalar, *extra = params
    out = torch.sigmoid(torch.sigmoid(x @ w1.T + b1) @ w2.T + b2)
    loss = (out - 0.75).pow(2).sum() + (scalar - 0.3).pow(2)
    for c in extra:  # bounded below, and its gradient mixes real and imaginary parts
        loss = loss + ((c * c.conj()).real - 1).pow(2).sum() + 0.1 * (c.real - c.imag).sum()
    return loss


def run(optim_info, kwargs, device, dtype, with_complex, sparse=False):
    """Steps an optimizer over fresh parameters; returns (leaves, parameters, optimizer)."""
    leaves = [p.to(device).requires_grad_() for p in initial_params(dtype, with_complex)]
    # A differentiable step updates its parameters in place inside the graph: they cannot be
    # leaves (PyTorch's differentiable tests clone them too).
    params = [p.clone() for p in leaves] if kwargs.get("differentiable") else leaves
    x = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], dtype=dtype).reshape(3, 2).to(device)
    stepped = params
    if optim_info.name == "Muon":  # Muon orthogonalises matrices: it refuses other parameters
        stepped = [p for p in params if p.dim() == 2]
    optimizer = optim_info.optim_cls(stepped, **kwargs)

    def closure():
        loss = loss_fn(params, x)
        for p, grad in zip(params, torch.autograd.grad(loss, params), strict=True):
            p.grad = grad.to_sparse() if sparse else grad
        return loss.detach()

    if optim_info.step_requires_closure:
        for _ in range(LBFGS_STEPS):
            optimizer.step(closure)
        return leaves, params, optimizer
    for i in range(STEPS):
        if i == 2:  # no gradients at all: the step must change nothing
            for p in params:
                p.grad = None
        else:
            closure()
            if i == 3:  # a frozen layer
                params[2].grad = None
        optimizer.step()
    return leaves, params, optimizer


def host(value):
    """A state value, comparable across devices: tensors on CPU, step counts as floats (fused and
    capturable keep them as device tensors, the for-loop as CPU tensors)."""
    return tree_map(lambda v: v.detach().cpu() if isinstance(v, torch.Tensor) else v, value)


def compare(got, ref):
    got_leaves, got_params, got_opt = got
    _, ref_params, ref_opt = ref
    torch.testing.assert_close(host(got_params), host(ref_params), check_device=False)
    pairs = zip(got_opt.param_groups[0]["params"], ref_opt.param_groups[0]["params"], strict=True)
    for p, r in pairs:
        state, ref_state = got_opt.state[p], ref_opt.state[r]
        assert state.keys() == ref_state.keys(), (sorted(state), sorted(ref_state))
        for key, value in ref_state.items():
            expected, actual = host(value), host(state[key])
            if key == "step":
                expected, actual = float(expected), float(actual)
            torch.testing.assert_close(
                actual, expected, check_device=False, msg=lambda m, key=key: f"state {key}: {m}"
            )


def release(result) -> None:
    """Breaks the autograd reference cycles a differentiable run leaves: with amsgrad, Adam's,
    Adamax's and RMSprop's state tensors end in a graph that holds them (on CPU too), which the
    garbage collector cannot see, so their device memory would outlive the test (and change which
    blocks later tests get)."""
    _, params, optimizer = result
    for t in [*params, *(v for st in optimizer.state.values() for v in st.values())]:
        if isinstance(t, torch.Tensor) and t.grad_fn is not None:
            t.detach_()


def differentiate(leaves, params):
    """d(sum of final parameters)/d(initial parameters), through every step."""
    total = sum(torch.view_as_real(p).sum() if p.is_complex() else p.sum() for p in params)
    return [g.cpu() for g in torch.autograd.grad(total, leaves)]


class TestOptimDbVdev(TestCase):
    def _check(self, device, dtype, optim_info, impl):
        name = optim_info.name
        sparse = impl == "sparse"
        if sparse:  # the configurations PyTorch tunes for its sparse tests
            inputs = [(name + " sparse", optim_info.metadata_for_sparse[0])]
            if optim_info.only_supports_sparse_grads:
                inputs = [(i.desc, i.kwargs) for i in optim_info.optim_inputs_func("cuda", dtype)]
        else:
            inputs = [(i.desc, i.kwargs) for i in optim_info.optim_inputs_func("cuda", dtype)]
        with_complex = optim_info.supports_complex and impl not in ("fused", "sparse")
        passed, failed = [], {}
        for desc, config in inputs:
            if diverges(name, config):
                continue
            ref_kwargs = {k: v for k, v in deepcopy(config).items() if k != "capturable"}
            kwargs = deepcopy(config)
            for flag in IMPL_FLAGS:
                if flag in optim_info.supported_impls:
                    ref_kwargs[flag] = False
                    kwargs[flag] = impl == flag
            ref = got = None
            try:
                ref = run(optim_info, ref_kwargs, "cpu", dtype, with_complex, sparse)
                got = run(optim_info, kwargs, device, dtype, with_complex, sparse)
                torch.vdev.synchronize()
                compare(got, ref)
                if impl == "differentiable" and not config.get("capturable"):
                    self._check_gradient(optim_info, ref_kwargs, dtype, with_complex, got)
                passed.append(desc)
            except Exception as e:  # noqa: BLE001 (any failure of a case is reported below)
                try:
                    torch.vdev.synchronize()  # no error of this case is left for the next one
                except RuntimeError:
                    pass
                failed[desc] = f"{type(e).__name__}: {str(e).strip()[:400]}"
            finally:
                for result in (ref, got):
                    if result is not None:
                        release(result)
        self.assertTrue(passed or failed, "no configuration ran")
        unexpected = {d: m for d, m in failed.items() if not expected_failure(name, d, impl)}
        self.assertFalse(
            unexpected,
            "\n".join(f"{name} [{d}] {impl}: {m}" for d, m in unexpected.items()),
        )
        fixed = [d for d in passed if expected_failure(name, d, impl)]
        self.assertFalse(fixed, f"{name} {impl} now passes {fixed}: remove from EXPECTED_FAILURES")

    def _check_gradient(self, optim_info, ref_kwargs, dtype, with_complex, got):
        """The gradient through the steps matches CPU's, or both devices refuse to compute it.
        Not for capturable configurations: capturable replaces Python branches on the step count
        by tensor arithmetic (torch.where over both branches), another graph than CPU's."""
        kwargs = {**ref_kwargs, "differentiable": True}
        cpu = run(optim_info, kwargs, "cpu", dtype, with_complex)
        try:
            expected = differentiate(*cpu[:2])
        except RuntimeError as e:
            # Some updates (complex parameters' state, modified in place through view_as_real)
            # cannot be differentiated through several steps, on any device
            with self.assertRaises(type(e)):
                differentiate(*got[:2])
            return
        finally:
            release(cpu)
        torch.testing.assert_close(differentiate(*got[:2]), expected, check_device=False)

    @optims(optim_db, dtypes=DTYPES)
    def test_forloop(self, device, dtype, optim_info):
        if optim_info.only_supports_sparse_grads:
            self.skipTest("takes only sparse gradients: see test_sparse")
        self._check(device, dtype, optim_info, "forloop")

    @optims([o for o in optim_db if "foreach" in o.supported_impls], dtypes=DTYPES)
    def test_foreach(self, device, dtype, optim_info):
        self._check(device, dtype, optim_info, "foreach")

    @optims([o for o in optim_db if "cuda" in o.supports_fused_on], dtypes=DTYPES)
    def test_fused(self, device, dtype, optim_info):
        self._check(device, dtype, optim_info, "fused")

    @optims([o for o in optim_db if "differentiable" in o.supported_impls], dtypes=DTYPES)
    def test_differentiable(self, device, dtype, optim_info):
        self._check(device, dtype, optim_info, "differentiable")

    @optims(
        [o for o in optim_db if o.supports_sparse or o.only_supports_sparse_grads], dtypes=DTYPES
    )
    def test_sparse(self, device, dtype, optim_info):
        self._check(device, dtype, optim_info, "sparse")


instantiate_device_type_tests(TestOptimDbVdev, globals(), only_for="privateuse1")


def test_every_optimizer_of_optim_db_is_covered():
    # optim_db growing an optimizer, or the framework generating nothing on vdev (PrivateUse1 not
    # detected), must not pass silently.
    generated = [n for n in globals() if n.startswith("TestOptimDbVdev") and n != "TestOptimDbVdev"]
    assert generated == ["TestOptimDbVdevPRIVATEUSE1"], generated
    names = {n for n in dir(TestOptimDbVdevPRIVATEUSE1) if n.startswith("test_forloop_")}  # noqa: F821
    assert len(names) == len(optim_db) * len(DTYPES) >= 15, sorted(names)
