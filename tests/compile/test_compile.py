"""torch.compile on vdev (issue 14, items 1, 2 and 4): Inductor's C++ kernels run as tasks on the
current stream, compiled calls are asynchronous like eager ones, stream and event calls inside
compiled functions are traced in order, and what Inductor cannot lower runs as eager vdev
operators."""

import pytest
import torch
import torch._dynamo
import torch._inductor.config as inductor_config
from asyncutil import gated, wait_until_blocked
from torch._dynamo.testing import CompileCounter
from torch._inductor.utils import run_and_get_code

from child_process import run_python
from torch_vdev.compile import index_checks, inductor_backend, inductor_device_rules, kernels


def assert_close(got, want):
    got = (got,) if isinstance(got, torch.Tensor) else got
    want = (want,) if isinstance(want, torch.Tensor) else want
    for g, w in zip(got, want, strict=True):
        assert g.device == w.device
        torch.testing.assert_close(g.cpu(), w.cpu(), atol=1e-5, rtol=1e-4)


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # conftest.py


def test_kernels_are_vdev_kernels_queued_on_the_stream_and_the_call_returns_first():
    def f(x, y):
        return (x.sin() * y + 1).relu().sum(0)

    x, y = torch.randn(64, 32, device="vdev"), torch.randn(64, 32, device="vdev")
    compiled = torch.compile(f)
    _, (code,) = run_and_get_code(compiled, x, y)
    assert "vdev_kernels.cpp_kernel(async_compile, 'cpp_fused" in code
    assert "cpp_pybinding" not in code  # no kernel runs on the host
    stream = torch.vdev.current_stream()
    with gated(stream) as gate:
        wait_until_blocked(gate)
        out = compiled(x, y)  # returns while the stream is blocked
        done = stream.record_event()
        assert not done.query() and out.device == x.device
    done.synchronize()
    assert_close(out, f(x, y))


def test_buffers_and_kernels_on_the_inputs_device(device_count):
    def f(x):
        return x.cos() * 2, x.exp().sum()

    x = torch.randn(8, 16, device=f"vdev:{device_count - 1}")
    got = torch.compile(f)(x)
    assert all(t.device == x.device for t in got)
    assert torch.vdev.current_device() == 0
    assert_close(got, f(x))


def test_one_element_cpu_tensor_is_read_when_the_kernel_is_queued():
    x = torch.randn(1024, device="vdev")
    scale = torch.tensor(3.0)
    compiled = torch.compile(lambda x, s: x * s + 1)
    compiled(x, scale)
    with gated(torch.vdev.current_stream()) as gate:
        wait_until_blocked(gate)
        out = compiled(x, scale)
        scale.fill_(100.0)  # after the call, before the kernel runs: as CUDA passes it by value
    torch.testing.assert_close(out.cpu(), x.cpu() * 3 + 1)


def test_dynamic_shapes_compile_once_and_match_eager():
    counter = CompileCounter()

    def f(x):
        return torch.nn.functional.softmax(x * 2, dim=-1).sum(0)

    compiled = torch.compile(f, backend=counter, dynamic=True)
    inductor = torch.compile(f, dynamic=True)
    for rows, cols in ((3, 5), (7, 11), (16, 33)):
        x = torch.randn(rows, cols, device="vdev")
        compiled(x)
        assert_close(inductor(x), f(x))
    assert counter.frame_count == 1


def side_stream_program(x, side):
    done = torch.vdev.Event()
    current = torch.vdev.current_stream()
    side.wait_stream(current)
    with torch.vdev.stream(side):
        y = x * 2
        done.record()
    current.wait_event(done)
    z = y + 1
    torch.vdev.synchronize()
    return z.sin()


def test_stream_event_and_synchronize_calls_are_traced_in_order():
    # (Inductor may fuse work that follows synchronize into a kernel before it, as for CUDA:
    # synchronize orders the host, not the data.)
    x = torch.randn(256, device="vdev")
    side = torch.vdev.Stream()
    compiled = torch.compile(side_stream_program, fullgraph=True)  # a graph break would raise
    _, (code,) = run_and_get_code(compiled, x, side)
    body = code[code.index("def call(") :]
    order = [
        body.index(op)
        for op in ("streams.wait_stream", "cpp_fused_mul", "streams.record_event",
                   "streams.wait_event", "cpp_fused_add", "streams.synchronize_device")
    ]  # fmt: skip
    assert order == sorted(order)
    assert_close(compiled(x, side), side_stream_program(x, side))


def test_compiled_work_on_a_side_stream_waits_for_it():
    def f(x, side):
        done = torch.vdev.Event()
        with torch.vdev.stream(side):
            y = x * 2
            done.record()
        torch.vdev.current_stream().wait_event(done)
        return y + 1

    x, side = torch.randn(64, device="vdev"), torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())  # x is written on the default stream
    compiled = torch.compile(f, fullgraph=True)
    compiled(x, side)
    # The side stream's buffers are reused by the next call: it must not overwrite them before
    # the default stream has read the last call's (without this, the sanitizer reports it).
    side.wait_stream(torch.vdev.current_stream())
    with gated(side) as gate:
        wait_until_blocked(gate)
        out = compiled(x, side)
        after = torch.vdev.current_stream().record_event()
        assert not after.query()  # the default stream waits for the blocked side stream
    after.synchronize()
    torch.testing.assert_close(out.cpu(), x.cpu() * 2 + 1)


def test_kernels_of_nested_control_flow_subgraphs_are_vdev_kernels():
    def inner(x):
        return torch.cond(x.mean() > 0, lambda x: x.sin() * 2, lambda x: x.cos() + 1, (x,))

    def f(x):
        return torch.cond(x.sum() > 0, lambda x: inner(x) * 3, lambda x: x.exp(), (x,))

    for sign in (1, -1):
        x = sign * torch.rand(64, device="vdev") + 0.01
        got, (code,) = run_and_get_code(torch.compile(f, fullgraph=True), x)
        assert "cpp_pybinding" not in code
        assert_close(got, f(x))


def test_an_operator_inductor_does_not_lower_runs_as_the_eager_vdev_operator():
    def f(x):
        values, indices = torch.cummax(x, 0)
        return values + 1, indices

    x = torch.randn(16, 4, device="vdev")
    got, (code,) = run_and_get_code(torch.compile(f), x)
    assert "aten.cummax" in code  # a fallback to the eager operator, not a generated kernel
    assert_close(got, f(x))


def test_an_operator_without_a_fake_kernel_is_named_in_the_compile_error():
    @torch.library.custom_op("vdev_compile_test::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    x = torch.randn(4, device="vdev")
    with pytest.raises(Exception, match="vdev_compile_test::twice"):
        torch.compile(lambda x: twice(x) + 1, fullgraph=True)(x)


def test_integer_division_by_zero_fails_the_kernel_and_the_device_keeps_working():
    a = torch.tensor([5, 7], device="vdev")
    b = torch.tensor([1, 0], device="vdev")
    torch.compile(lambda a, b: a // b)(a, b)
    with pytest.raises(RuntimeError, match=r"cpp_fused_floor_divide.*ZeroDivisionError"):
        torch.vdev.synchronize()
    assert (a + 1).cpu().tolist() == [6, 8]


@pytest.mark.parametrize("threads", ["1", "2"])
def test_an_index_out_of_bounds_fails_the_kernel_as_a_device_side_assert(threads):
    # Inside an OpenMP parallel region (2 threads) the failed TORCH_CHECK called std::terminate;
    # now it fails the task, raised at the next synchronize, and the process goes on (as CUDA's
    # device-side assert). Loads (gather) and stores (scatter).
    script = """
        import torch
        import torch_vdev
        torch.set_num_threads(2)
        calls = {
            "gather": lambda x, i: x[i] * 2,
            "scatter": lambda x, i: x.index_put((i,), x[:1].expand(len(i), -1), accumulate=True),
        }
        x = torch.randn(1000, 64, device="vdev")
        for name, fn in calls.items():
            f = torch.compile(fn)
            i = torch.randint(0, 1000, (4096,), device="vdev")
            torch.testing.assert_close(f(x, i).cpu(), fn(x.cpu(), i.cpu()))
            i[5] = 5000
            f(x, i)
            try:
                torch.vdev.synchronize()
                print(name, "no error")
            except RuntimeError as e:
                print(name, "error:", "index out of bounds" in str(e), str(e).split("] ")[0] + "]")
                # A Triton device_assert on CUDA: sticky, the device unusable until cleared.
                cleared = torch_vdev._C._clear_device_assert(0) is not None
                print(name, "sticky:", type(e).__name__, cleared)
            i[5] = 7
            torch.testing.assert_close(f(x, i).cpu(), fn(x.cpu(), i.cpu()))
        print("alive")
    """
    r = run_python(script, env={"VDEV_DEVICE_THREADS": threads}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.split("\n")
    prefix = "error: True vdev error: device-side assert triggered: [cpp_fused"
    assert lines[0].startswith(f"gather {prefix}"), r.stdout
    assert lines[1] == "gather sticky: AcceleratorError True", r.stdout
    assert lines[2].startswith(f"scatter {prefix}"), r.stdout
    assert lines[3] == "scatter sticky: AcceleratorError True", r.stdout
    assert lines[4] == "alive"


def test_index_checks_are_wrapped_in_their_innermost_loop():
    source = """#include <x.h>
extern "C" void kernel(const long* i, float* out)
{
    auto s = "{ not a block }";  // nor this: {
    #pragma omp parallel
    {
        #pragma omp for
        for(long x0=0; x0<4; x0+=1)
        {
            #pragma omp simd simdlen(8)
            for(long x1=0; x1<8; x1+=1)
            {
                auto tmp0 = [&]
                {
                    TORCH_CHECK(i[x1] < 4L, "index out of bounds: i < 4L");
                    return 1.0f;
                }
                ();
                out[x1] = tmp0;
            }
        }
    }
}
"""
    out = index_checks.guard_index_checks(source)
    # The simd loop may not hold a try block: the omp for's body does.
    body_open = out.index("for(long x0=0; x0<4; x0+=1)")
    assert out[body_open:].lstrip().startswith("for(long x0=0; x0<4; x0+=1)\n        { try {")
    assert out.count(" try {") == 1 and out.count("catch (...)") == 1
    assert out.index("catch (...)") > out.index("out[x1] = tmp0;")
    assert "VdevKernelError vdev_kernel_error;" in out and "vdev_kernel_error.rethrow();" in out
    assert out.index("struct VdevKernelError") > out.index("#include <x.h>")
    assert "{ not a block }" in out
    assert index_checks.guard_index_checks(
        source.replace("index out of bounds", "x")
    ) == source.replace("index out of bounds", "x")


def test_cpp_wrapper_is_refused_naming_the_setting():
    x = torch.randn(4, device="vdev")
    with inductor_config.patch(cpp_wrapper=True), pytest.raises(Exception, match="cpp_wrapper"):
        torch.compile(lambda x: x + 1)(x)


SCALE_KERNEL = """
#include <cstdint>
extern "C" void kernel(const float* in_ptr0, float* out_ptr0, const int64_t ks0, const float s) {
    for (int64_t i = 0; i < ks0; ++i) out_ptr0[i] = in_ptr0[i] * s;
}
"""


def test_a_kernel_launcher_passes_pointers_sizes_and_scalars_and_checks_them():
    from torch._inductor.async_compile import AsyncCompile

    argtypes = ["const float*", "float*", "const int64_t", "const float"]
    kernel = kernels.cpp_kernel(AsyncCompile(), "scale_kernel", argtypes, SCALE_KERNEL)
    kernel = kernel.result() if hasattr(kernel, "result") else kernel
    assert (kernel.name, kernel.kinds) == ("scale_kernel", "pPif")
    x = torch.arange(6, dtype=torch.float32, device="vdev:1")
    out = torch.zeros(6, device="vdev:1")
    kernel(x[2:], out, 3, 2.5)  # a view: its data pointer, offset included
    assert out.cpu().tolist() == [5.0, 7.5, 10.0, 0.0, 0.0, 0.0]
    with pytest.raises(TypeError, match="takes 4 arguments"):
        kernel(x, out, 3)
    with pytest.raises(TypeError, match="argument 1 must be a Tensor"):
        kernel(x, 2.0, 3, 1.0)
    with pytest.raises(ValueError, match="argument 0 is a CPU tensor of 6 elements"):
        kernel(x.cpu(), out, 3, 1.0)
    with pytest.raises(RuntimeError, match="same device.*vdev:1 and vdev:0"):
        kernel(x, torch.zeros(6, device="vdev:0"), 3, 1.0)
    with pytest.raises(TypeError):
        kernel(x, out, "three", 1.0)
    with pytest.raises(kernels.UnsupportedKernelArgument, match="odd_kernel.*'half2'"):
        kernels.cpp_kernel(AsyncCompile(), "odd_kernel", ["half2"], SCALE_KERNEL)
    assert out.cpu().tolist() == [5.0, 7.5, 10.0, 0.0, 0.0, 0.0]  # nothing queued by a refusal


def test_inductor_registration_and_cache_identity():
    torch.compile(lambda x: x + 1)(torch.ones(2, device="vdev"))
    from torch._inductor.codegen import common

    assert common.get_scheduling_for_device("vdev") is inductor_backend.VdevScheduling
    identity = common.custom_backend_passes["vdev"]
    assert isinstance(identity, inductor_backend.CodegenIdentity)
    assert identity.uuid().startswith("torch_vdev-")
    assert inductor_device_rules._applied


def test_the_inductor_backend_is_registered_once_compile_fx_is_imported():
    """By torch_vdev.compile's post-import hook, before Inductor lowers anything: torch.vdev has no
    attribute for Inductor's init_backend_registration to read (it does not import torch_vdev's
    compile support)."""
    script = """
        import sys
        import torch
        from torch._inductor.codegen import common
        before = common.get_scheduling_for_device("vdev")
        import torch._inductor.compile_fx
        from torch_vdev.compile import inductor_backend
        after = common.get_scheduling_for_device("vdev")
        print(before is None, after is inductor_backend.VdevScheduling)
        print(hasattr(torch.vdev, "Scheduling"), "torch_vdev.compile" in sys.modules)
    """
    run = run_python(script)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True", "False", "True"]


def test_inductor_takes_cpu_codegen_decisions_for_vdev():
    from torch._inductor import ir, scheduler, utils

    inductor_backend.register()  # as Inductor's first compilation does
    vdev, cuda = torch.device("vdev", 0), torch.device("cuda", 0)
    assert utils.get_current_backend("vdev") == "cpp"
    assert utils.get_current_backend("cuda") == inductor_config.cuda_backend
    assert ir.is_cpu(vdev) and ir.is_cpu(torch.device("cpu")) and not ir.is_cpu(cuda)
    assert scheduler.device_need_guard("vdev") and not scheduler.device_need_guard("cpu")

    class Node:
        def __init__(self, device):
            self.device = device

        def get_device(self):
            return self.device

    assert scheduler.BaseSchedulerNode.is_cpu(Node(vdev))
    assert not scheduler.BaseSchedulerNode.is_cpu(Node(cuda))


@pytest.mark.parametrize("which", ["input", "weight"])
def test_a_channels_last_convolution_compiles_with_the_layout_vdev_gives(which):
    # torch's fake convolution gives PrivateUse1 devices a contiguous output; vdev's keeps CUDA's
    # channels-last rule, and compiled code asserts the layout the fake tensors predicted.
    x = torch.randn(2, 3, 8, 8, device="vdev", requires_grad=True)
    w = torch.randn(4, 3, 3, 3, device="vdev", requires_grad=True)
    cl = torch.channels_last

    def f(x, w):
        if which == "input":
            x = x.contiguous(memory_format=cl)
        else:
            w = w.contiguous(memory_format=cl)
        return torch.nn.functional.conv2d(x, w, padding=1).relu()

    got = torch.compile(f)(x, w)
    got.sum().backward()
    grads = [x.grad.cpu(), w.grad.cpu()]
    x.grad = w.grad = None
    want = f(x, w)
    want.sum().backward()
    torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-5)
    for g, w_ in zip(grads, [x.grad.cpu(), w.grad.cpu()], strict=True):
        torch.testing.assert_close(g, w_, rtol=1e-4, atol=1e-5)


def test_kernels_are_generated_for_the_device_thread_count():
    # A vdev kernel runs on a stream worker with at most VDEV_DEVICE_THREADS OpenMP threads
    # (cpp/backend/common/task.h); Inductor writes the thread count into the kernel.
    script = """
        import torch
        from torch._inductor.utils import run_and_get_code
        from torch_vdev.compile import inductor_backend
        torch.set_num_threads(2)
        f = lambda x: x.sin() * 2
        x = torch.randn(1 << 20)
        _, (cpu,) = run_and_get_code(torch.compile(f), x)
        torch._dynamo.reset()
        _, (vdev,) = run_and_get_code(torch.compile(f), x.to("vdev"))
        uuid = torch._inductor.codegen.common.custom_backend_passes["vdev"].uuid()
        print("#pragma omp parallel" in cpu, "#pragma omp parallel" in vdev, uuid.rsplit("-", 1)[1])
    """
    one = run_python(script, env={"VDEV_DEVICE_THREADS": "1"})
    assert one.returncode == 0, one.stderr
    assert one.stdout.split() == ["True", "False", "threads1"]
    two = run_python(script, env={"VDEV_DEVICE_THREADS": "2"})
    assert two.returncode == 0, two.stderr
    assert two.stdout.split() == ["True", "True", "threads2"]


def test_attention_compiles_to_the_fused_operator_cpu_uses():
    # vdev's SDPA choice is CPU's, for fake tensors too: the compiled graph keeps the fused
    # operator (an eager vdev operator) in both directions instead of the math path's kernels.
    def f(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    q, k, v = (torch.randn(2, 4, 16, 8, device="vdev", requires_grad=True) for _ in range(3))
    out, codes = run_and_get_code(lambda: torch.compile(f)(q, k, v).sum().backward())
    code = "\n".join(codes)
    assert "_scaled_dot_product_flash_attention_for_cpu.default(" in code
    assert "_scaled_dot_product_flash_attention_for_cpu_backward.default(" in code
    assert "extern_kernels.bmm" not in code
    grads = [t.grad for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    f(q, k, v).sum().backward()
    assert_close(tuple(grads), tuple(t.grad for t in (q, k, v)))


def test_kernels_are_grouped_into_modules_as_on_cpu(monkeypatch):
    """Consecutive kernels are compiled as one C++ module, as CPU's scheduling groups them (a
    module per kernel made graphs compile several times slower): vdev defines as many modules
    as CPU does for the same function."""
    from torch._inductor import metrics
    from torch._inductor.async_compile import AsyncCompile

    defined = {"cpu": 0, "vdev": 0}
    cpu_binding, vdev_kernel = AsyncCompile.cpp_pybinding, kernels.cpp_kernel

    def count(device, define):
        def counted(*args, **kwargs):
            defined[device] += 1
            return define(*args, **kwargs)

        return counted

    monkeypatch.setattr(AsyncCompile, "cpp_pybinding", count("cpu", cpu_binding))
    monkeypatch.setattr(kernels, "cpp_kernel", count("vdev", vdev_kernel))

    def f(x, y, w):
        h = (x @ w).relu()  # an extern kernel: the scheduler flushes before it
        return h.sum(1), (y.cos() * 2).amax(0), h.softmax(-1)

    args = [torch.randn(32, 16), torch.randn(8, 64), torch.randn(16, 16)]
    with inductor_config.patch(force_disable_caches=True):
        for device in ("cpu", "vdev"):
            torch._dynamo.reset()
            on_device = [a.to(device) for a in args]
            metrics.reset()
            assert_close(torch.compile(f)(*on_device), f(*on_device))
            assert metrics.generated_kernel_count > defined[device] >= 1  # grouped loop nests
    assert defined["vdev"] == defined["cpu"]


def test_kernels_of_different_streams_are_never_grouped():
    """Consecutive kernels on different streams stay separate calls, each in its stream's
    context: a group is one call, and a default-stream result computed in a side-stream group
    would be read on the default stream without waiting for it."""

    def f(x, side):
        a = x * 2
        with torch.vdev.stream(side):
            b = x + 1
        return a.cos(), b

    x, side = torch.randn(64, device="vdev"), torch.vdev.Stream()
    side.wait_stream(torch.vdev.current_stream())  # x is written on the default stream
    compiled = torch.compile(f, fullgraph=True)
    compiled(x, side)
    want = (x * 2).cos().cpu()
    with gated(side) as gate:
        wait_until_blocked(gate)
        c, b = compiled(x, side)
        torch.testing.assert_close(c.cpu(), want)  # computed on the default stream: no wait
    torch.vdev.current_stream().wait_stream(side)  # b is the side stream's
    torch.testing.assert_close(b.cpu(), x.cpu() + 1)
