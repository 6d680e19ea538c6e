"""A vdev tensor sent to another process raises where it is sent (python/torch_vdev/vdev/
_sending.py), instead of being dropped in a background thread while the receiver waits for ever.
Sharing device memory between processes for real is issue 13's."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.multiprocessing as mp

DEV = "vdev"
REFUSED = "a vdev tensor cannot be sent to another process"


def vdev_payloads():
    x = torch.ones(3, device=DEV)
    return {
        "tensor": x,
        "inside containers": {"batch": [1, (x,)]},
        "parameter": torch.nn.Parameter(torch.ones(2, device=DEV)),
        "view": x[1:],
        "inside an object": _Holder(x),
    }


class _Holder:
    def __init__(self, t):
        self.t = t


@pytest.mark.parametrize("payload", sorted(vdev_payloads()))
@pytest.mark.parametrize("queue", ["Queue", "JoinableQueue", "SimpleQueue"])
def test_putting_a_vdev_tensor_on_a_queue_raises_at_put(payload, queue):
    q = getattr(mp, queue)()
    with pytest.raises(RuntimeError, match=REFUSED):
        q.put(vdev_payloads()[payload])
    q.put(torch.arange(3))  # the queue still works, and nothing was queued before it
    assert q.get().tolist() == [0, 1, 2]
    assert q.empty()


def test_a_vdev_storage_and_a_pipe_send_raise_too():
    x = torch.ones(3, device=DEV)
    with pytest.raises(RuntimeError, match="a vdev storage cannot be sent"):
        mp.Queue().put(x.untyped_storage())
    a, b = mp.Pipe()
    with pytest.raises(RuntimeError, match=REFUSED):
        a.send([x])
    a.send(torch.ones(2))
    assert b.recv().tolist() == [1.0, 1.0]


def test_cpu_tensors_still_go_through_a_queue_once_vdev_is_initialised():
    q = mp.Queue()
    q.put({"x": torch.arange(4), "s": "text"})
    got = q.get(timeout=60)
    assert got["x"].tolist() == [0, 1, 2, 3] and got["s"] == "text"


def test_a_consumer_process_receives_what_follows_a_refused_put(tmp_path):
    # The scenario: put() returned, the feeder thread dropped the tensor, and the consumer
    # waited for ever. Now put() raises and the consumer gets the next object. (A script file: a
    # spawned child imports the parent's main module to find `consume`.)
    script = tmp_path / "producer.py"
    script.write_text(
        textwrap.dedent(
            """
        import torch
        import torch.multiprocessing as mp

        def consume(q, out):
            out.put(q.get(timeout=60).tolist())

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            q, out = ctx.Queue(), ctx.Queue()
            p = ctx.Process(target=consume, args=(q, out))
            p.start()
            try:
                q.put(torch.ones(2, device="vdev"))
            except RuntimeError as e:
                print("refused:", e)
            q.put(torch.arange(2))
            print("consumer got", out.get(timeout=60))
            p.join(60)
            print("exit", p.exitcode)
        """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDEV_")}
    r = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("refused: " + REFUSED)
    assert lines[1:] == ["consumer got [0, 1]", "exit 0"]
    assert "Traceback" not in r.stderr
