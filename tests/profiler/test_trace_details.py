"""Details of the chrome trace that users' tools read (issue 50, item 13): the devices'
properties ("deviceProperties", which HTA and TensorBoard read), and copies named as CUDA's
(CUPTI's memcpy kinds and memory kinds; a copy that converts or strides is a copy kernel, as
CUDA runs it). (cpp/backend/profiler/kineto_plugin.cpp, cpp/backend/ops/copy.cpp)"""

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from child_process import run_python

DEVICE_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def trace(prof, tmp_path) -> dict:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())


def device_spans(events) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")]


def test_device_properties_list_each_device(tmp_path):
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        torch.ones(4, device="vdev").add_(1)
        torch.vdev.synchronize()
    props = trace(prof, tmp_path)["deviceProperties"]
    assert [p["id"] for p in props] == list(range(torch.vdev.device_count()))
    for p in props:
        want = torch.vdev.get_device_properties(p["id"])
        assert p["name"] == want.name
        assert p["totalGlobalMem"] == want.total_memory
        assert (p["computeMajor"], p["computeMinor"]) == (want.major, want.minor)
        assert p["numSms"] == want.multi_processor_count


def test_device_properties_are_valid_json_for_any_device_name(tmp_path):
    # A vendor's profile names the device: its text is escaped into the trace.
    profile_path = tmp_path / "acme.json"
    profile_path.write_text(
        json.dumps({"name": 'Acme "A1" \\ rev\tB', "capability": [9, 0], "memory": "1GiB"})
    )
    code = f"""
import json, torch
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    torch.ones(4, device="vdev").add_(1)
    torch.vdev.synchronize()
prof.export_chrome_trace({str(tmp_path / "t.json")!r})
print(json.dumps(json.load(open({str(tmp_path / "t.json")!r}))["deviceProperties"]))
"""
    r = run_python(code, env={"VDEV_PROFILE": str(profile_path)})
    assert r.returncode == 0, r.stderr
    props = json.loads(r.stdout.strip().splitlines()[-1])
    assert props[0]["name"] == 'Acme "A1" \\ rev\tB'
    assert (props[0]["computeMajor"], props[0]["totalGlobalMem"]) == (9, 1 << 30)


def test_a_converting_or_strided_copy_is_a_copy_kernel(tmp_path):
    x = torch.randn(64, 32, device="vdev")
    torch.vdev.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        x.t().contiguous()  # strided
        x.to(torch.float16)  # converting
        x.clone()  # same dtype, contiguous to contiguous: a memcpy
        torch.vdev.synchronize()
    names = [e["name"] for e in device_spans(trace(prof, tmp_path)["traceEvents"])]
    assert names.count("vdev_kernel<direct_copy_kernel>") == 2, names
    assert names.count("Memcpy DtoD (Device -> Device)") == 1, names


def test_copies_name_their_host_memory(tmp_path):
    pinned = torch.arange(1024, dtype=torch.float32).pin_memory()
    pageable = torch.arange(1024, dtype=torch.float32)
    dev = torch.empty(1024, device="vdev")
    torch.vdev.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        dev.copy_(pinned, non_blocking=True)
        dev.copy_(pageable)
        out = torch.empty(1024).pin_memory()
        out.copy_(dev, non_blocking=True)
        dev.cpu()
        torch.vdev.synchronize()
    copies = [e for e in device_spans(trace(prof, tmp_path)["traceEvents"])]
    names = sorted(e["name"] for e in copies if e["cat"] == "gpu_memcpy")
    assert names == [
        "Memcpy DtoH (Device -> Pageable)",
        "Memcpy DtoH (Device -> Pinned)",
        "Memcpy HtoD (Pageable -> Device)",
        "Memcpy HtoD (Pinned -> Device)",
    ]
    assert out[1023] == 1023


def test_a_copy_between_devices_is_peer_to_peer(tmp_path):
    if torch.vdev.device_count() < 2:
        pytest.skip("needs two devices")
    x = torch.randn(256, device="vdev:0")
    torch.vdev.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        y = x.to("vdev:1")
        x.to("vdev:1", torch.float16)  # converting: a copy kernel on the source device
        torch.vdev.synchronize(0)
        torch.vdev.synchronize(1)
    spans = device_spans(trace(prof, tmp_path)["traceEvents"])
    (p2p,) = [e for e in spans if e["cat"] == "gpu_memcpy"]
    assert p2p["name"] == "Memcpy PtoP (Device -> Device)"
    assert p2p["args"]["bytes"] == 256 * 4 and p2p["args"]["device"] == 0
    (kernel,) = [e for e in spans if e["name"] == "vdev_kernel<direct_copy_kernel>"]
    assert kernel["args"]["device"] == 0
    torch.testing.assert_close(y.cpu(), x.cpu())
