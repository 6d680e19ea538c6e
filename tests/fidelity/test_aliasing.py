"""Aliasing as on CPU and CUDA: an operator whose written argument shares memory with what it
reads raises ATen's overlap error at the call (copies and setitem included), and legitimate
aliasing (in place on self, views of views, out= equal to the input where CPU allows it) still
computes CPU's values (cpp/backend/checks/overlap.h)."""

import pytest
import torch

OVERLAP = "some elements of the input tensor and the written-to tensor refer to a single memory"


def arange(d, n=8):
    return torch.arange(float(n), device=d)


def matrix(d):
    return torch.arange(9.0, device=d).reshape(3, 3)


def index(d, *values):
    return torch.tensor(values, device=d)


def setitem(d):
    x = arange(d)
    x[2:6] = x[0:4]
    return x


def copy_transposed(d):
    m = matrix(d)
    m.copy_(m.t())
    return m


def out_into(fn):
    def run(d):
        x = arange(d)
        fn(x, d)
        return x

    return run


REJECTED = {
    "setitem from an overlapping slice": setitem,
    "copy_ from its transpose": copy_transposed,
    "neg out= its transpose": lambda d: torch.neg(m := matrix(d), out=m.t()),
    "gather out= a slice of its input": out_into(
        lambda x, d: torch.gather(x, 0, index(d, 1, 2, 3, 4), out=x[:4])
    ),
    "cat out= overlapping its inputs": out_into(
        lambda x, d: torch.cat([x[:2], x[2:4]], out=x[1:5])
    ),
    "stack out= overlapping its inputs": out_into(
        lambda x, d: torch.stack([x[:2], x[2:4]], out=x[1:5].view(2, 2))
    ),
    "index_select out= a slice of its input": out_into(
        lambda x, d: torch.index_select(x, 0, index(d, 0, 1), out=x[:2])
    ),
    "masked_select out= a slice of its input": out_into(
        lambda x, d: torch.masked_select(x, x > 3, out=x[:4])
    ),
    "take out= a slice of its input": out_into(
        lambda x, d: torch.take(x, index(d, 1, 2), out=x[:2])
    ),
    "where out= overlapping its inputs": out_into(
        lambda x, d: torch.where(x[:4] > 1, x[:4], x[4:], out=x[2:6])
    ),
    "add out= overlapping its input": out_into(lambda x, d: torch.add(x[:4], 1, out=x[2:6])),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_an_overlapping_write_raises_cpus_error_at_the_call(name):
    with pytest.raises(RuntimeError, match=OVERLAP):
        REJECTED[name]("cpu")
    with pytest.raises(RuntimeError, match=OVERLAP) as err:
        REJECTED[name]("vdev")
    assert not str(err.value).startswith("[aten::"), "raised by the stream, not at the call"
    torch.vdev.synchronize()


def test_writing_an_expanded_tensor_raises_cpus_error():
    for d in ("cpu", "vdev"):
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            torch.zeros(2, device=d).expand(3, 2).add_(1)


def _inplace_square(d):
    x = arange(d)
    return x.mul_(x)


def _add_out_self(d):
    x = arange(d)
    return torch.add(x, x, out=x)


def _views_of_views(d):
    x = arange(d)
    x[2:][1:3].add_(1)
    return x


def _where_out_self(d):
    x = arange(d)
    return torch.where(x > 3, x, x * 2, out=x)


def _disjoint_slices(d):
    x = arange(d)
    x[4:].copy_(x[:4])
    return x


def _strided_halves(d):
    x = arange(d)
    torch.add(x[::2], 10, out=x[1::2])  # same storage, interleaved: no element shared
    return x


def _cumsum_out_resized_within_its_storage(d):
    a = arange(d, 10)
    out = a[0:2]
    with pytest.warns(UserWarning, match="was resized"):
        torch.cumsum(a[0:4], 0, out=out)
    assert out.shape == (4,)
    return a


def _sort_in_place_with_fresh_indices(d):
    a = torch.tensor([3.0, 1, 2, 0, 5], device=d)
    _, indices = torch.sort(a[0:4], out=(a[0:4], torch.empty(0, dtype=torch.long, device=d)))
    return torch.cat([a, indices.to(a.dtype)])


LEGAL = {
    "out= resized within its storage": _cumsum_out_resized_within_its_storage,
    "sort into its input with empty indices": _sort_in_place_with_fresh_indices,
    "in place on self with self": _inplace_square,
    "out= equal to the inputs": _add_out_self,
    "views of views": _views_of_views,
    "where out= its input": _where_out_self,
    "copy between disjoint slices": _disjoint_slices,
    "out= interleaved with the input": _strided_halves,
}


@pytest.mark.parametrize("name", sorted(LEGAL))
def test_legitimate_aliasing_computes_cpus_values(name):
    assert torch.equal(LEGAL[name]("vdev").cpu(), LEGAL[name]("cpu"))


def test_an_operator_rejecting_out_equal_to_its_input_raises_at_the_call():
    # The same tensor as input and out=: CPU's check fails on the stand-ins (one stand-in for
    # both, cpp/backend/checks/stand_in_check.h), and the call run on CPU aliases of the device
    # bytes raises CPU's error at the call (see the note in cpp/backend/checks/overlap.h).
    with pytest.raises(RuntimeError, match=OVERLAP):
        torch.index_select(x := arange("cpu"), 0, index("cpu", 1, 0), out=x)
    x = arange("vdev")
    i = index("vdev", 1, 0, 3, 2, 5, 4, 7, 6)
    with pytest.raises(RuntimeError, match=OVERLAP):
        torch.index_select(x, 0, i, out=x)
    torch.vdev.synchronize()  # nothing was queued to fail later
    assert torch.equal(x.cpu(), arange("cpu"))  # nothing was written


@pytest.mark.parametrize("out_is", ["first input", "second input"])
def test_an_out_that_is_an_input_and_must_grow_is_resized_then_refused_as_on_cpu(out_is):
    # CPU's and CUDA's cat size the output from the inputs, resize out= (with the deprecation
    # warning), and only then find that out= is one of the inputs. Before: "Trying to resize
    # storage that is not resizable".
    def run(d):
        x, y = torch.ones(2, device=d), torch.full((2,), 2.0, device=d)
        out = x if out_is == "first input" else y
        with pytest.warns(UserWarning, match=r"resized since it had shape \[2\]") as record:
            with pytest.raises(RuntimeError, match=OVERLAP):
                torch.cat((x, y), out=out)
        return out, len(record)

    out_cpu, warned_cpu = run("cpu")
    out_vdev, warned_vdev = run("vdev")
    assert warned_vdev == warned_cpu == 1
    assert out_vdev.shape == out_cpu.shape == (4,)  # resized before the refusal, as on CPU
    torch.vdev.synchronize()
    assert torch.equal(out_vdev.cpu()[:2], out_cpu[:2])  # its own bytes kept


def test_an_out_that_grows_through_the_host_keeps_cpus_values():
    # A call whose argument checks fail on stand-ins (an integer remainder by the stand-ins' 0)
    # runs on the host on its real arguments; its out= grows there, in host memory, and is copied
    # back to the device, with one warning, as on CPU.
    def run(d):
        x = torch.arange(4, device=d) + 5
        y = torch.tensor([2, 3, 4, 5], device=d)
        out = torch.zeros(1, dtype=torch.long, device=d)
        with pytest.warns(UserWarning, match="resized") as record:
            torch.remainder(x, y, out=out)
        return out, len(record)

    out_cpu, warned_cpu = run("cpu")
    out_vdev, warned_vdev = run("vdev")
    assert warned_vdev == warned_cpu == 1
    assert torch.equal(out_vdev.cpu(), out_cpu)
