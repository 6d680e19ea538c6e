"""Capability profiles (VDEV_PROFILE): what the simulated device is.

Each profile runs in a fresh interpreter (the environment is read once), which reports what it
saw as JSON; the assertions are made here. The texts a described device raises are its own:
MPS's (aten/src/ATen/mps/EmptyTensor.cpp, native/mps/OperationUtils.mm), and CUDA's answers on a
T4 come from CUDA's own code (torch.cuda.is_bf16_supported, torch.autocast) shown the profile's
properties."""

import json
import textwrap

import pytest

from child_process import run_python
from torch_vdev import _testing

MPS_FLOAT64 = (
    "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
    "Please use float32 instead."
)
MPS_COMPLEX128 = (
    "Trying to convert ComplexDouble to the MPS backend but it does not have support for that "
    "dtype."
)

# Helpers of the child interpreters: `attempt` records what a call returned or raised.
PRELUDE = """
import json, unittest.mock, warnings
import torch

out = {}

def attempt(key, f):
    try:
        r = f()
        out[key] = ["ok", str(r.dtype) if isinstance(r, torch.Tensor) else repr(r)]
    except Exception as e:
        out[key] = [type(e).__name__, str(e)]

def properties():
    p = torch.vdev.get_device_properties(1)
    return [p.name, p.total_memory, p.major, p.minor, p.multi_processor_count,
            torch.vdev.get_device_name(), list(torch.vdev.get_device_capability(1))]

def cuda_answers():
    # CUDA's own code, shown this device's properties, on a device where a bfloat16 tensor can be
    # made (torch.cuda._check_bf16_tensor_supported's probe), as a T4 can.
    props = torch.vdev.get_device_properties(0)
    p = unittest.mock.patch.object
    with p(torch.cuda, "is_available", lambda: True), p(torch.cuda, "current_device", lambda: 0), \\
            p(torch.cuda, "get_device_properties", lambda d=None: props), \\
            p(torch.cuda, "_check_bf16_tensor_supported", lambda d: True):
        answers = [torch.cuda.is_bf16_supported(), torch.cuda.is_bf16_supported(False)]
        try:
            torch.autocast("cuda", dtype=torch.bfloat16)
            answers.append("accepted")
        except RuntimeError as e:
            answers.append(str(e))
    return answers

def bf16_autocast():
    a = torch.ones(4, 4, device="vdev")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.autocast("vdev", dtype=torch.bfloat16):
            y = a @ a
    return [str(y.dtype), [str(x.message) for x in w]]

def supported_dtypes():
    return sorted(str(d) for d in torch.accelerator.get_device_capability(0)["supported_dtypes"])
"""


def run_profile(body: str, env: dict[str, str]) -> dict:
    code = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    r = run_python(code, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.splitlines()[-1])


GPU_BODY = """
out["properties"] = properties()
out["bf16"] = [torch.vdev.is_bf16_supported(), torch.vdev.is_bf16_supported(False)]
out["cuda"] = cuda_answers()
out["autocast"] = bf16_autocast()
out["amp"] = [str(d) for d in torch.vdev.get_amp_supported_dtype()]
attempt("float64", lambda: (torch.ones(2, dtype=torch.float64, device="vdev") * 2).cpu())
out["has_float64"] = "torch.float64" in supported_dtypes()
"""


@pytest.mark.parametrize(
    "profile,name,memory,capability,sms,bf16",
    [
        # A T4 emulates bfloat16: CUDA says supported, and not without emulation.
        ("sm75", "Tesla T4", 15095 << 20, [7, 5], 40, [True, False]),
        ("sm80", "NVIDIA A100-SXM4-40GB", 40536 << 20, [8, 0], 108, [True, True]),
        ("sm90", "NVIDIA H100 80GB HBM3", 81089 << 20, [9, 0], 132, [True, True]),
        # Today's CUDA-like device, named explicitly.
        ("default", "vdev virtual device 1", 4 << 30, [1, 0], 2, [True, True]),
    ],
)
def test_gpu_profile_is_the_device_it_names(profile, name, memory, capability, sms, bf16):
    out = run_profile(GPU_BODY, {"VDEV_PROFILE": profile})
    expected_name = "vdev virtual device 0" if profile == "default" else name
    assert out["properties"] == [name, memory, *capability, sms, expected_name, capability]
    assert out["bf16"] == bf16
    if profile != "default":  # (1, 0) is no CUDA device: CUDA's answers describe real ones
        # What CUDA answers for this device, and that it does not refuse bfloat16 autocast.
        assert out["cuda"] == [*bf16, "accepted"]
    # bfloat16 autocast runs (on a T4 too, as CUDA's own check lets it), without a warning.
    assert out["autocast"] == ["torch.bfloat16", []]
    assert out["amp"] == ["torch.float16", "torch.bfloat16", "torch.float32", "torch.float64"]
    assert out["float64"] == ["ok", "torch.float64"] and out["has_float64"]


def test_device_memory_wins_over_the_profiles():
    out = run_profile(
        'out["properties"] = properties()\nout["total"] = torch.vdev.mem_get_info(0)[1]',
        {"VDEV_PROFILE": "sm90", "VDEV_DEVICE_MEMORY": "1GiB"},
    )
    assert out["properties"][:2] == ["NVIDIA H100 80GB HBM3", 1 << 30]
    assert out["total"] == 1 << 30


def test_mps_profile_has_no_float64_and_no_complex128():
    out = run_profile(
        """
        import numpy as np
        x = torch.ones(3, device="vdev")
        f64, c128 = torch.float64, torch.complex128
        # Creation, at every factory.
        attempt("zeros", lambda: torch.zeros(2, dtype=f64, device="vdev"))
        attempt("empty", lambda: torch.empty(2, dtype=f64, device="vdev"))
        attempt("empty_strided", lambda: torch.empty_strided((2,), (1,), dtype=f64, device="vdev"))
        attempt("tensor", lambda: torch.tensor([1.0], dtype=f64, device="vdev"))
        attempt("numpy", lambda: torch.tensor(np.ones(2), device="vdev"))
        attempt("randn", lambda: torch.randn(2, dtype=f64, device="vdev"))
        # Conversion, and an operator's float64 result.
        attempt("to", lambda: x.to(f64))
        attempt("double", lambda: x.double())
        attempt("from_cpu", lambda: torch.ones(2, dtype=f64).to("vdev"))
        attempt("sum", lambda: x.sum(dtype=f64))
        attempt("c128", lambda: torch.zeros(2, dtype=c128, device="vdev"))
        attempt("c128_to", lambda: x.to(c128))
        attempt("c128_from_cpu", lambda: torch.ones(2, dtype=c128).to("vdev"))
        # What the device does have works, printing included (torch formats in float64 elsewhere).
        attempt("c64", lambda: (torch.ones(2, dtype=torch.complex64, device="vdev") * 2).cpu())
        attempt("scalar", lambda: (x * 2.5 + torch.tensor(1.0, dtype=f64)).cpu())
        out["print"] = [repr(x * 2), repr(torch.ones(1, dtype=torch.complex64, device="vdev"))]
        model = torch.nn.Linear(4, 2).to("vdev")
        opt = torch.optim.Adam(model.parameters())
        model(torch.randn(3, 4, device="vdev")).square().mean().backward()
        opt.step()
        out["trained"] = str(model.weight.dtype)
        out["properties"] = properties()
        out["dtypes"] = supported_dtypes()
        out["amp"] = [str(d) for d in torch.vdev.get_amp_supported_dtype()]
        out["bf16"] = [torch.vdev.is_bf16_supported(), torch.vdev.is_bf16_supported(False)]
        out["autocast"] = bf16_autocast()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out["fp32_autocast"] = torch.autocast("vdev", dtype=torch.float32)._enabled
        out["fp32_warning"] = [str(x.message) for x in w]
        """,
        {"VDEV_PROFILE": "mps"},
    )
    for key in ("zeros", "empty", "empty_strided", "tensor", "numpy", "randn"):
        assert out[key] == ["TypeError", MPS_FLOAT64], key
    for key in ("to", "double", "from_cpu", "sum"):
        assert out[key] == ["TypeError", MPS_FLOAT64], key
    for key in ("c128", "c128_to", "c128_from_cpu"):
        assert out[key] == ["TypeError", MPS_COMPLEX128], key
    assert out["c64"] == ["ok", "torch.complex64"] and out["scalar"] == ["ok", "torch.float32"]
    assert out["print"] == [
        "tensor([2., 2., 2.], device='vdev:0')",
        "tensor([1.+0.j], device='vdev:0')",
    ]
    assert out["trained"] == "torch.float32"
    assert out["properties"] == [
        "Apple M2 Pro",
        21845 << 20,
        0,
        0,
        19,
        "Apple M2 Pro",
        [0, 0],
    ]
    assert "torch.float32" in out["dtypes"] and "torch.bfloat16" in out["dtypes"]
    assert "torch.float64" not in out["dtypes"] and "torch.complex128" not in out["dtypes"]
    # MPS's autocast takes float16 and bfloat16 only, and warns and disables itself for others.
    assert out["amp"] == ["torch.float16", "torch.bfloat16"]
    assert out["bf16"] == [True, True] and out["autocast"] == ["torch.bfloat16", []]
    assert out["fp32_autocast"] is False
    assert any("target dtype is not supported" in w for w in out["fp32_warning"])


VENDOR = {
    "name": "Acme A1",
    "capability": [9, 1],
    "memory": "3GiB",
    "multi_processor_count": 8,
    "dtypes": ["bool", "uint8", "int32", "int64", "float16", "float32"],
    "missing_operators": ["aten::cumsum", "aten::sort.stable"],
}


def test_vendor_json_profile(tmp_path):
    path = tmp_path / "acme.json"
    path.write_text(json.dumps(VENDOR))
    out = run_profile(
        """
        x = torch.arange(6.0, device="vdev")
        attempt("cumsum", lambda: x.cumsum(0))
        attempt("sort", lambda: x.sort(stable=True))
        attempt("sort_default", lambda: x.sort())  # decomposes into sort.stable
        attempt("argsort", lambda: x.argsort(stable=True))
        attempt("cummax", lambda: x.cummax(0)[0].cpu())  # not lacking
        attempt("add", lambda: (x + 1).sum().item())
        attempt("to_bf16", lambda: x.to(torch.bfloat16))
        attempt("f64", lambda: torch.zeros(1, dtype=torch.float64, device="vdev"))
        attempt("int16", lambda: torch.zeros(1, dtype=torch.int16, device="vdev"))
        out["properties"] = properties()
        out["dtypes"] = supported_dtypes()
        out["amp"] = [str(d) for d in torch.vdev.get_amp_supported_dtype()]
        out["bf16"] = [torch.vdev.is_bf16_supported(), torch.vdev.is_bf16_supported(False)]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out["bf16_autocast"] = torch.autocast("vdev", dtype=torch.bfloat16)._enabled
        """,
        {"VDEV_PROFILE": str(path)},
    )
    who = f"'Acme A1' (VDEV_PROFILE={path})"
    for key, op in (("cumsum", "aten::cumsum"), ("sort", "aten::sort.stable")):
        assert out[key] == [
            "NotImplementedError",
            f"The operator '{op}' is not currently implemented for the vdev device: its profile "
            f"{who} lacks it.",
        ], key
    assert out["sort_default"] == out["sort"] == out["argsort"]
    assert out["cummax"] == ["ok", "torch.float32"] and out["add"] == ["ok", "21.0"]
    supported = "bool, uint8, int32, int64, float16, float32"
    for key, dtype in (("to_bf16", "bfloat16"), ("f64", "float64"), ("int16", "int16")):
        assert out[key] == [
            "TypeError",
            f"torch.{dtype} is not supported by the vdev device of profile {who}: it has no "
            f"tensors of this dtype (its dtypes: {supported})",
        ], key
    assert out["properties"] == ["Acme A1", 3 << 30, 9, 1, 8, "Acme A1", [9, 1]]
    assert {"torch.float32", "torch.int64"} <= set(out["dtypes"])
    assert not {"torch.float64", "torch.bfloat16", "torch.int16"} & set(out["dtypes"])
    assert out["amp"] == ["torch.float16", "torch.float32"]
    # No bfloat16 at all: unsupported, and bfloat16 autocast is disabled (torch warns).
    assert out["bf16"] == [False, False] and out["bf16_autocast"] is False


@pytest.mark.parametrize(
    "value,needle",
    [
        ("sm70", "VDEV_PROFILE='sm70' is not a known profile: expected one of default, sm75, "),
        ("/nonexistent/x.json", "VDEV_PROFILE='/nonexistent/x.json': cannot read the profile"),
        ("BAD_JSON", "is not valid JSON: expected ',' or '}' at line 2, column 1"),
        ("BAD_MEMORY", "\"memory\"='lots' is not a valid memory size"),
    ],
)
def test_bad_profile_keeps_import_safe_and_fails_clearly_on_use(value, needle, tmp_path):
    if value == "BAD_JSON":
        value = str(tmp_path / "bad.json")
        (tmp_path / "bad.json").write_text('{"name": "x"\n')
    elif value == "BAD_MEMORY":
        value = str(tmp_path / "mem.json")
        (tmp_path / "mem.json").write_text('{"name": "x", "memory": "lots"}')
    r = run_python(
        """
        import warnings
        import torch
        assert not torch.vdev.is_available()
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            assert torch.vdev.device_count() == 0
        for use in (lambda: torch.zeros(1, device="vdev"), torch.vdev.is_bf16_supported):
            try:
                print("RESULT", use())
            except RuntimeError as e:
                print("ERR", e)
        """,
        env={"VDEV_PROFILE": value},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    errors = [line for line in lines if line.startswith("ERR")]
    assert len(errors) == 1 and needle in errors[0] and value in errors[0], r.stdout
    assert "RESULT False" in lines  # is_bf16_supported: no device is available


@pytest.mark.parametrize(
    "operator,needle",
    [
        ("aten::no_such_operator", "names 'aten::no_such_operator', which is not an aten operator"),
        # Composite (linear, and linear.out): it decomposes before any device kernel sees it.
        ("aten::linear", "names 'aten::linear', which decomposes into other operators"),
        ("aten::add.Scalar", "names 'aten::add.Scalar', which decomposes into other operators"),
        # A kernel of vdev's own, which the check at the call does not see.
        ("aten::native_dropout", "names 'aten::native_dropout', which vdev runs with a kernel of"),
    ],
)
def test_missing_operator_that_no_device_kernel_sees_is_refused(operator, needle, tmp_path):
    path = tmp_path / "ops.json"
    path.write_text(json.dumps({"name": "x", "missing_operators": [operator]}))
    r = run_python(
        """
        import torch
        for _ in range(2):  # raised at every use, not once
            try:
                torch.zeros(1, device="vdev")
            except RuntimeError as e:
                print("ERR", e)
        """,
        env={"VDEV_PROFILE": str(path)},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    errors = [line for line in r.stdout.splitlines() if line.startswith("ERR")]
    assert len(errors) == 2 and all(needle in e and str(path) in e for e in errors), r.stdout


def test_builtin_profiles_and_names():
    assert _testing.profile_names() == ["default", "sm75", "sm80", "sm90", "mps"]
    assert _testing.load_profile("")["id"] == "default"
    assert _testing.load_profile(" mps ")["unsupported_dtypes"] == ["float64", "complex128"]
    sm75 = _testing.load_profile("sm75")
    assert sm75["capability"] == (7, 5) and sm75["bf16_emulated"]
    assert not any(_testing.load_profile(n)["bf16_emulated"] for n in ("sm80", "sm90", "mps"))


def test_json_profile_fields():
    p = _testing.parse_profile_json(json.dumps(VENDOR), "/v/acme.json")
    assert p["id"] == "/v/acme.json" and p["device_name"] == "Acme A1"
    assert p["capability"] == (9, 1) and p["memory"] == "3GiB"
    assert p["multi_processor_count"] == 8
    assert p["missing_operators"] == ["aten::cumsum", "aten::sort.stable"]
    every = _testing.profile_dtype_names()
    assert p["unsupported_dtypes"] == [d for d in every if d not in VENDOR["dtypes"]]
    # Only the name is required; the rest is the default device's.
    p = _testing.parse_profile_json('{"name": "B\\u00e9ta", "memory": 1048576}', "b.json")
    assert p["device_name"] == "Béta" and p["memory"] == "1048576"
    assert p["capability"] == (1, 0) and p["unsupported_dtypes"] == []


@pytest.mark.parametrize(
    "text,needle",
    [
        ("", "is not valid JSON: unexpected end of input at line 1, column 1"),
        ('{"name": "a",}', "is not valid JSON: expected a string key at line 1, column 14"),
        ('{"name": "a"} x', "unexpected text after the JSON value"),
        ('{"name": "a", "name": "b"}', 'duplicate key "name"'),
        ("[]", "a profile is a JSON object with the keys name, capability, memory"),
        ("{}", '"name" (the device name) is required'),
        ('{"name": 3}', '"name" must be a non-empty string'),
        ('{"name": "a", "capability": [8]}', '"capability" must be [major, minor]'),
        ('{"name": "a", "capability": [8, 0.5]}', '"capability" must be [major, minor]'),
        ('{"name": "a", "memory": -1}', '"memory" must be a positive number of bytes (1 up to'),
        ('{"name": "a", "multi_processor_count": 0}', '"multi_processor_count" must be an integer'),
        ('{"name": "a", "dtypes": ["double"]}', "names an unknown dtype 'double': the dtypes are"),
        ('{"name": "a", "dtypes": "float32"}', '"dtypes" must be an array of dtype names, from'),
        ('{"name": "a", "missing_operators": ["cumsum"]}', "which is not an operator name"),
        ('{"name": "a", "colour": "red"}', 'unknown key "colour": the keys are name, capability'),
    ],
)
def test_bad_json_profile_names_the_file_and_the_fault(text, needle):
    with pytest.raises(ValueError) as info:
        _testing.parse_profile_json(text, "/v/bad.json")
    assert "VDEV_PROFILE='/v/bad.json'" in str(info.value) and needle in str(info.value)
