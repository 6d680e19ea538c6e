"""torch.compile(mode="reduce-overhead") on vdev (issue 15, item 5): compiled functions are replayed
as vdev graphs, with cudagraph trees' rules: warm-up, then record, then one replay per call; static
inputs read in place and recorded again when they move; mutated inputs and mixed devices run
without graphs; outputs of an earlier generation are overwritten and raise CUDA's error when used.

The model sweep (``test_models.py``) covers training and inference of real models in this mode."""

import gc

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from asyncutil import gated, wait_until_blocked
from torch._dynamo.utils import counters

from torch_vdev.compile import graph_policy
from torch_vdev.vdev.graphs import VdevGraph

OVERWRITTEN = "overwritten by a subsequent run"


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # conftest.py


@pytest.fixture
def replays(monkeypatch):
    """Counts graph replays and recordings of vdev graphs."""
    seen = {"replays": 0, "captures": 0}
    replay, capture_begin = VdevGraph.replay, torch._C._acceleratorGraph.capture_begin

    def counted_replay(self):
        seen["replays"] += 1
        return replay(self)

    def counted_capture_begin(self, *args, **kwargs):
        seen["captures"] += 1
        return capture_begin(self, *args, **kwargs)

    monkeypatch.setattr(VdevGraph, "replay", counted_replay)
    monkeypatch.setattr(torch._C._acceleratorGraph, "capture_begin", counted_capture_begin)
    return seen


def test_calls_after_the_warm_up_replay_one_graph_and_match_eager(replays):
    def f(x, w):
        return (x @ w).relu() + x.sum(), x.cos()

    w = torch.randn(16, 16, device="vdev")
    compiled = torch.compile(f, mode="reduce-overhead")
    for call in range(4):
        x = torch.randn(8, 16, device="vdev")
        got = compiled(x, w)
        want = f(x, w)
        for g, e in zip(got, want, strict=True):
            torch.testing.assert_close(g.cpu(), e.cpu())
        # call 0 warms up; call 1 records and replays; later calls replay
        assert replays == {"replays": max(call, 0), "captures": min(call, 1)}
    assert counters["inductor"]["cudagraph_skips"] == 0


def test_a_replay_is_queued_and_the_call_returns_first(replays):
    compiled = torch.compile(lambda x: (x * 2).sin(), mode="reduce-overhead")
    x = torch.randn(32, device="vdev")
    compiled(x), compiled(x)  # warm up and record
    stream = torch.vdev.current_stream()
    with gated(stream) as gate:
        wait_until_blocked(gate)
        out = compiled(x + 1)
        done = stream.record_event()
        assert not done.query()
    torch.testing.assert_close(out.cpu(), ((x + 1) * 2).sin().cpu())
    assert replays["replays"] == 2


def test_an_output_of_an_earlier_call_is_overwritten_and_raises_when_used():
    compiled = torch.compile(lambda x: x * 3, mode="reduce-overhead")
    x = torch.ones(4, device="vdev")
    for _ in range(3):
        kept = compiled(x)
    first = compiled(x)
    second = compiled(x * 2)
    with pytest.raises(RuntimeError, match=OVERWRITTEN):
        first.cpu()
    with pytest.raises(RuntimeError, match=OVERWRITTEN):
        first + 1
    assert kept.shape == (4,)  # metadata stays readable, as on CUDA
    torch.testing.assert_close(second.cpu(), torch.full((4,), 6.0))
    cloned = compiled(x).clone()  # the documented way to keep an output
    compiled(x)
    torch.testing.assert_close(cloned.cpu(), torch.full((4,), 3.0))


def test_the_warm_up_calls_output_is_overwritten_by_the_next_call():
    # The cudagraph trees documentation's own example ("Limitations"), which raises on CUDA: the
    # warm-up runs in the graphs' pool and its outputs are freed when the next generation begins.
    @torch.compile(mode="reduce-overhead")
    def my_model(x):
        y = torch.matmul(x, x)
        return y

    x = torch.randn(10, 10, device="vdev")
    y1 = my_model(x)
    y2 = my_model(x)
    with pytest.raises(RuntimeError, match=OVERWRITTEN) as error:
        print(y1)
    assert "my_model" in str(error.value)  # the stack trace of the operation, as on CUDA
    torch.testing.assert_close(y2.cpu(), (x @ x).cpu())
    kept = my_model(x * 1).clone()  # the documented way out
    my_model(x)
    torch.testing.assert_close(kept.cpu(), (x @ x).cpu())


def test_after_mark_step_begin_a_second_call_keeps_the_first_output_until_the_next_step(replays):
    compiled = torch.compile(lambda x: x + 1, mode="reduce-overhead")
    x = torch.zeros(3, device="vdev")
    for _ in range(2):
        torch.compiler.cudagraph_mark_step_begin()
        compiled(x)
    torch.compiler.cudagraph_mark_step_begin()
    a = compiled(x)
    b = compiled(x + 1)  # same step: a second graph is recorded rather than overwrite a
    torch.testing.assert_close(a.cpu(), torch.ones(3))
    torch.testing.assert_close(b.cpu(), torch.full((3,), 2.0))
    assert replays["captures"] == 2
    torch.compiler.cudagraph_mark_step_begin()
    compiled(x)
    with pytest.raises(RuntimeError, match=OVERWRITTEN):
        a.cpu()


def test_a_function_mutating_a_non_static_input_runs_without_graphs(replays):
    def f(x):
        x.add_(1)
        return x * 2

    compiled = torch.compile(f, mode="reduce-overhead")
    x = torch.zeros(5, device="vdev")
    for step in range(1, 4):
        out = compiled(x)
        torch.testing.assert_close(x.cpu(), torch.full((5,), float(step)))
        torch.testing.assert_close(out.cpu(), torch.full((5,), 2.0 * step))
    assert replays == {"replays": 0, "captures": 0}
    assert counters["inductor"]["cudagraph_skips"] >= 1


@pytest.mark.skipif(
    not hasattr(torch._inductor.config.triton, "cudagraph_trees_generation_cloning"),
    reason="torch 2.14's triton.cudagraph_trees_generation_cloning",
)
def test_with_generation_cloning_outputs_of_earlier_calls_stay_readable(replays):
    # CUDA's trees then clone live outputs out of the pool at a new generation; vdev's graphs do
    # not clone, so they step aside rather than report an overwritten output a GPU would not.
    compiled = torch.compile(lambda x: x * 2, mode="reduce-overhead")
    x = torch.ones(4, device="vdev")
    with torch._inductor.config.patch(
        {"triton.cudagraph_trees_generation_cloning": "user_visible"}
    ):
        outs = [compiled(x) for _ in range(3)]
    assert [o.sum().item() for o in outs] == [8.0, 8.0, 8.0]
    assert replays == {"replays": 0, "captures": 0}
    assert counters["inductor"]["cudagraph_skips"] >= 1


def test_graph_policy_refuses_an_argument_no_torch_release_passes():
    from torch_vdev._compat.compile import graph_policy_options

    graph_policy_options({"kernel_free_cudagraph": False, "user_visible_output_idxs": ()})
    with pytest.raises(TypeError, match="no_such_option"):
        graph_policy_options({"no_such_option": 1})


def test_a_moved_parameter_is_read_at_its_new_address_after_recording_again(replays):
    model = torch.nn.Linear(6, 3).to("vdev")
    compiled = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(2, 6, device="vdev")
    with torch.no_grad():
        for _ in range(3):
            compiled(x)
        assert replays["captures"] == 1
        model.weight.data = torch.randn(3, 6, device="vdev")  # a new address
        got = compiled(x)
        torch.testing.assert_close(got.cpu(), model(x).cpu())
        assert replays["captures"] == 2


def test_dynamic_shapes_record_one_graph_per_size(replays):
    compiled = torch.compile(lambda x: x.exp().sum(0), mode="reduce-overhead", dynamic=True)
    for n in (3, 5, 3, 5, 3, 5):
        x = torch.randn(n, 4, device="vdev")
        torch.testing.assert_close(compiled(x).cpu(), x.exp().sum(0).cpu())
    assert replays["captures"] == 2


def test_random_numbers_are_fresh_at_each_replay():
    compiled = torch.compile(lambda x: F.dropout(x, 0.5, training=True), mode="reduce-overhead")
    x = torch.ones(4096, device="vdev")
    masks = [(compiled(x) != 0).cpu() for _ in range(4)]
    for earlier, later in zip(masks, masks[1:], strict=False):
        assert not torch.equal(earlier, later)
    assert all(0.4 < m.float().mean() < 0.6 for m in masks)


def test_a_function_with_cpu_work_runs_without_graphs(replays):
    def f(x, y):
        return x + 1, y * 2

    compiled = torch.compile(f, mode="reduce-overhead")
    x, y = torch.ones(3, device="vdev"), torch.ones(3)
    for _ in range(3):
        a, b = compiled(x, y)
    assert a.device.type == "vdev" and b.device.type == "cpu"
    torch.testing.assert_close(a.cpu(), torch.full((3,), 2.0))
    assert replays["captures"] == 0


def test_graphs_on_another_device_capture_there(device_count, replays):
    device = f"vdev:{device_count - 1}"
    compiled = torch.compile(lambda x: x.sqrt() + 1, mode="reduce-overhead")
    x = torch.rand(8, device=device)
    for _ in range(3):
        out = compiled(x)
    assert out.device == x.device and replays["captures"] == 1
    torch.testing.assert_close(out.cpu(), x.sqrt().cpu() + 1)
    assert torch.vdev.current_device() == 0


def test_gradient_accumulation_records_a_second_forward_and_matches_eager(replays):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    eager = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    eager.load_state_dict(model.state_dict())
    model, eager = model.to("vdev"), eager.to("vdev")
    compiled = torch.compile(model, mode="reduce-overhead")
    for _ in range(3):
        batches = [torch.randn(4, 8, device="vdev") for _ in range(2)]
        for module, fn in ((eager, eager), (model, compiled)):
            module.zero_grad(set_to_none=True)
            losses = [fn(b).square().mean() for b in batches]  # two forwards, then backward
            sum(losses).backward()
        for p, q in zip(eager.parameters(), model.parameters(), strict=True):
            torch.testing.assert_close(q.grad.cpu(), p.grad.cpu(), rtol=1e-4, atol=1e-5)
    # Step 1 warms up the forward and the backward and records each once (the backward graph reads
    # the saved tensors of the eager warm-up forward in place). In step 2 the second forward finds
    # the first one's outputs waiting for backward (a second forward graph), and each backward reads
    # the saved outputs of one forward graph in place (two more backward graphs). Step 3 replays.
    assert replays["captures"] == 5


def test_the_policy_is_vdevs_only_for_vdev_graphs():
    import torch._inductor.config as inductor_config
    from torch._inductor.cudagraph_utils import check_multiple_devices_or_any_cpu_nodes

    assert inductor_config.cudagraph_policy is None  # CUDA graphs keep Inductor's own path
    vdev, cpu = torch.device("vdev", 0), torch.device("cpu")
    assert "multiple devices" in check_multiple_devices_or_any_cpu_nodes(
        {vdev: None, torch.device("vdev", 1): None}
    )
    cpu_node = type("Node", (), {"name": "add", "users": {}})()
    assert "cpu device" in check_multiple_devices_or_any_cpu_nodes({vdev: None, cpu: cpu_node})
    with inductor_config.patch(cudagraph_policy=graph_policy.CUDAGraphPolicy()):
        assert "multiple devices" in check_multiple_devices_or_any_cpu_nodes({vdev: None})


def test_a_fresh_process_replays_a_graph_inductor_loads_from_its_cache(tmp_path):
    """The policy is in place before Inductor loads a compiled graph from its FX cache (the
    second process compiles nothing)."""
    from child_process import run_python

    code = """
        import torch
        from torch._dynamo.utils import counters
        from torch_vdev.vdev.graphs import VdevGraph

        replays, replay = [], VdevGraph.replay
        VdevGraph.replay = lambda g: replays.append(g) or replay(g)
        compiled = torch.compile(lambda x: x.cos() * 2, mode="reduce-overhead")
        x = torch.randn(16, device="vdev")
        for _ in range(3):
            out = compiled(x)
        torch.testing.assert_close(out.cpu(), x.cos().cpu() * 2)
        print(len(replays), counters["inductor"]["fxgraph_cache_hit"])
    """
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    runs = [run_python(code, env=env, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    assert runs[0].stdout.split() == ["2", "0"]
    assert runs[1].stdout.split() == ["2", "1"]  # loaded from the cache, replayed all the same


def test_importing_inductor_first_still_installs_the_policy():
    """``import torch._inductor.config`` imports Dynamo while Inductor's package is half-made: the
    policy waits for Inductor's output_code rather than importing half-made modules (which
    failed with a circular ImportError, and reduce-overhead silently ran without graphs)."""
    from child_process import run_python

    out = run_python(
        """
        import warnings
        warnings.simplefilter("error", UserWarning)
        import torch
        import torch._inductor.config
        from torch_vdev.vdev.graphs import VdevGraph

        replays, replay = [], VdevGraph.replay
        VdevGraph.replay = lambda g: replays.append(g) or replay(g)
        compiled = torch.compile(lambda x: x.sin() + 1, mode="reduce-overhead")
        x = torch.randn(16, device="vdev")
        for _ in range(3):
            out = compiled(x)
        torch.testing.assert_close(out.cpu(), x.sin().cpu() + 1)
        print(len(replays))
        """,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["2"]


def test_data_dependent_control_flow_runs_without_graphs(replays):
    def f(x):
        return torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 100, (x,))

    compiled = torch.compile(f, mode="reduce-overhead")
    for sign in (1.0, -1.0, 1.0, -1.0):
        x = torch.full((4,), sign, device="vdev")
        torch.testing.assert_close(compiled(x).cpu(), f(x).cpu())
    assert replays["captures"] == 0 and counters["inductor"]["cudagraph_skips"] == 1


def test_threads_calling_one_compiled_function_have_graphs_of_their_own(replays):
    import threading

    compiled = torch.compile(lambda x: x * 2 + 1, mode="reduce-overhead")
    failures = []

    def work(value):
        try:
            x = torch.full((64,), float(value), device="vdev")
            for _ in range(20):
                out = compiled(x)
                got = out.cpu()  # before this thread's next call, whatever the other thread does
                if not torch.equal(got, torch.full((64,), 2.0 * value + 1)):
                    failures.append((value, got[:2].tolist()))
        except Exception as e:  # noqa: BLE001
            failures.append((value, repr(e)))

    threads = [threading.Thread(target=work, args=(v,)) for v in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert failures == []
    # a graph per thread (a thread may also get its own compilation when both compile at once)
    assert replays["captures"] >= 2 and replays["replays"] >= 30


def test_an_output_kept_after_its_graph_is_freed_raises():
    compiled = torch.compile(lambda x: x + 5, mode="reduce-overhead")
    x = torch.zeros(8, device="vdev")
    for _ in range(3):
        kept = compiled(x)
    del compiled
    torch._dynamo.reset()
    gc.collect()
    torch.vdev.empty_cache()  # the graph's pool goes back to the device
    with pytest.raises(RuntimeError, match="graph has been freed"):
        kept.cpu()
