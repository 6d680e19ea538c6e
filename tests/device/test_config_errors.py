"""Every configuration error names what was set and what is valid (issue 50: "the tools never cry
wolf and never lie").

The table below holds malformed values of every ``VDEV_*`` variable the runtime reads
(cpp/runtime/config.cpp; Python reads none, it only sets VDEV_SANITIZER and the pytest plugin's two)
and of every field of a JSON profile (VDEV_PROFILE, cpp/runtime/capability_profile.h): wrong types,
out of range, overflow, negative, empty, whitespace, unknown fields, bytes that are not UTF-8. The
configuration is read once per process, at the first device use, so each case needs a process whose
configuration is unread: one fresh interpreter imports torch (vdev loads, reads nothing) and forks a
child per case, which sets the variable and uses a device. Each case asserts the exception type,
that the message names the variable or the profile file (and the field), that it states the valid
range, that the error comes at every use, and that the child exits normally (no crash)."""

import json
import re
from pathlib import Path

import torch

from child_process import run_python
from torch_vdev import _testing

INT64_MAX = 2**63 - 1

# The child interpreter: CASES is a JSON list of {variable: value} (lone surrogates stand for
# bytes that are not UTF-8, as os.environ writes them); it prints one JSON result per case.
CHILD = """
import json, os, warnings
import torch
from torch_vdev import _C

assert not _C._config_read(), "the configuration was read before the cases ran"


def use():
    try:
        torch.zeros(1, device="vdev")
        return ["ok", ""]
    except BaseException as e:  # what the user would see, whatever it is
        return [type(e).__name__, str(e)]


results = []
for env in json.loads(CASES):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.environ.update(env)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                count = torch.vdev.device_count()
            out = {"available": torch.vdev.is_available(), "count": count,
                   "warnings": [str(x.message) for x in caught], "uses": [use(), use()]}
        except BaseException as e:
            out = {"child": f"{type(e).__name__}: {e}"}
        with os.fdopen(w, "wb") as f:
            f.write(json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read().decode("utf-8", "replace")
    _, status = os.waitpid(pid, 0)
    results.append({"status": status, "data": data})
print(json.dumps(results))
"""


def shown(value: str) -> str:
    """How a message shows a value: bytes that are not UTF-8 as \\xNN."""
    return "".join(f"\\x{ord(c) - 0xDC00:02X}" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in value)


NOT_UTF8 = "\udcff"  # the byte 0xFF in os.environ

COUNT = "expected an integer in 1..64"
MEMORY = (
    "is not a valid memory size: expected a positive number of bytes (1 up to 2^64-1), "
    "optionally with a unit K, M, G or T"
)
MEMORY_RANGE = "is out of range: a memory size is at most 2^64-1 bytes"
RESERVE = "bytes is more than this machine can reserve for 2 device(s)"
THREADS = "expected an integer in 1..1024"
SANITIZER = "expected a comma-separated list of streams, init, poison and warn"
OOM = f"succeed before the injected out-of-memory error, an integer in 0..{INT64_MAX}"
DIST = "expected RANK:N:MODE, e.g. 1:3:abort (RANK an integer in 0..2147483647"
PROFILES = "is not a known profile: expected one of default, sm75, sm80, sm90, mps, or the path"

# (variable, value, what the message says besides "VARIABLE='value'"); None: the value is valid.
ENV_CASES = [
    *[
        ("VDEV_DEVICE_COUNT", v, [COUNT])
        for v in ("abc", "", "   ", "0", "-1", "65", "1.5", "0x2", "9" * 25, NOT_UTF8)
    ],
    *[
        ("VDEV_DEVICE_MEMORY", v, [MEMORY])
        for v in ("abc", "", "  ", "0", "-1", "1.5GiB", "4XB", "GiB", "4 GiB x", NOT_UTF8)
    ],
    ("VDEV_DEVICE_MEMORY", "9" * 25, [MEMORY_RANGE]),
    ("VDEV_DEVICE_MEMORY", "17179869184TiB", [MEMORY_RANGE]),
    *[("VDEV_LAUNCH_BLOCKING", v, ["expected 0 or 1"]) for v in ("2", "yes", "-1", "9" * 25)],
    ("VDEV_LAUNCH_BLOCKING", NOT_UTF8, ["expected 0 or 1"]),
    ("VDEV_LAUNCH_BLOCKING", "  ", None),
    *[("VDEV_STICKY_ASSERTS", v, ["expected 0 or 1"]) for v in ("2", "yes", "-1", NOT_UTF8)],
    ("VDEV_STICKY_ASSERTS", " 0 ", None),
    *[
        ("VDEV_DEVICE_THREADS", v, [THREADS])
        for v in ("abc", "", "0", "-1", "1025", "9" * 25, NOT_UTF8)
    ],
    ("VDEV_SANITIZER", "race", ["unknown tool 'race'", SANITIZER]),
    ("VDEV_SANITIZER", "streams,bogus", ["unknown tool 'bogus'", SANITIZER]),
    ("VDEV_SANITIZER", "streams;init", [SANITIZER]),
    ("VDEV_SANITIZER", NOT_UTF8, [SANITIZER]),
    ("VDEV_SANITIZER", " , ", None),
    *[("VDEV_OOM_AFTER", v, ["is not valid", OOM]) for v in ("abc", "-1", "1.5", NOT_UTF8)],
    *[("VDEV_OOM_AFTER", v, ["is out of range", OOM]) for v in (str(2**64 + 5), str(2**63))],
    ("VDEV_OOM_AFTER", " ", None),
    ("VDEV_DIST_FAULT", "abc", ["three parts separated by ':' are needed", DIST]),
    ("VDEV_DIST_FAULT", "1:2", ["three parts", DIST]),
    ("VDEV_DIST_FAULT", "x:1:abort", ["the rank 'x' is not an integer in 0..2147483647", DIST]),
    ("VDEV_DIST_FAULT", "-1:1:abort", ["the rank '-1' is not an integer in 0..2147483647"]),
    ("VDEV_DIST_FAULT", "2147483648:1:abort", ["is not an integer in 0..2147483647"]),
    ("VDEV_DIST_FAULT", "0:0:abort", [f"N '0' is not an integer in 1..{INT64_MAX}", DIST]),
    ("VDEV_DIST_FAULT", f"0:{2**64}:abort", [f"is not an integer in 1..{INT64_MAX}"]),
    ("VDEV_DIST_FAULT", "0:1:crash", ["the mode 'crash' is neither abort nor hang", DIST]),
    ("VDEV_DIST_FAULT", NOT_UTF8, [DIST]),
    ("VDEV_DIST_FAULT", "", None),
    ("VDEV_PROFILE", "sm70", [PROFILES]),
    ("VDEV_PROFILE", "SM80", [PROFILES]),
    ("VDEV_PROFILE", "/nonexistent/x.json", ["cannot read the profile file"]),
    ("VDEV_PROFILE", f"/tmp/{NOT_UTF8}.json", ["is not valid UTF-8 (at byte 5): expected a"]),
    ("VDEV_PROFILE", " ", None),
]

CAPABILITY = '"capability" must be [major, minor], two integers in 0..99'
MEMORY_FIELD = '"memory" must be a positive number of bytes (1 up to 2^64-1) or a size'
SMS = '"multi_processor_count" must be an integer in 1..1048576'
DTYPES = '"dtypes" must be an array of dtype names, from bool, uint8,'
OPERATORS = '"missing_operators" must be an array of operator names, "namespace::name" or'
OPERATOR_NAME = 'which is not an operator name: expected "namespace::name" or'

# (file contents after '{"name": "x", ' unless they start with '{' or are not JSON text, what the
# message says besides "VDEV_PROFILE='<file>'", whether the runtime (True) or the backend, at the
# first tensor, refuses it: then the device is available and only its use raises).
PROFILE_CASES = [
    (b"", ["is not valid JSON: unexpected end of input at line 1, column 1"], True),
    (b"  \n ", ["is not valid JSON: unexpected end of input at line 2, column 2"], True),
    (b"\xef\xbb\xbf{", ["is not valid JSON: expected a string key"], True),
    (b'\xff{"name": "x"}', ["is not valid JSON: unexpected character '\\xFF'"], True),
    (b'{"name": "x",}', ["is not valid JSON: expected a string key at line 1, column 14"], True),
    (b"[]", ["a profile is a JSON object with the keys name, capability, memory"], True),
    (b"{}", ['"name" (the device name) is required'], True),
    *[
        (b'{"name": ' + v + b"}", ['"name" must be a non-empty string'], True)
        for v in (b"3", b'""', b'"   "', b"null", b'["x"]')
    ],
    (
        b'{"name": "caf\xe9"}',
        ["\"name\" is not valid UTF-8 (byte 0xE9 at offset 3 of 'caf\\xE9')"],
        True,
    ),
    *[
        (b'"capability": ' + v + b"}", [CAPABILITY], True)
        for v in (
            b'"9.0"',
            b"[9]",
            b"[9, -1]",
            b"[100, 0]",
            b"[99999999999999999999999, 0]",
            b"[9, 0.5]",
        )
    ],
    *[
        (b'"memory": ' + v + b"}", [MEMORY_FIELD], True)
        for v in (b"-1", b"1.5", b"1e9", b"true", b'""', b'"   "', b"null")
    ],
    *[
        (b'"memory": ' + v + b"}", ['"memory"=', MEMORY], True)
        for v in (b'"lots"', b'"-5GiB"', b"0", b'"4 GiB x"')
    ],
    (b'"memory": 99999999999999999999999}', ['"memory"=', MEMORY_RANGE], True),
    (b'"memory": "17179869184TiB"}', ['"memory"=', MEMORY_RANGE], True),
    (b'"memory": "1000000TiB"}', ['"memory" of 1099511627776000000 ' + RESERVE, "GiB per"], True),
    (b'"memory": "4GiB\xe9"}', ['"memory" is not valid UTF-8 (byte 0xE9 at offset 4'], True),
    *[
        (b'"multi_processor_count": ' + v + b"}", [SMS], True)
        for v in (b"0", b"-1", b"1048577", b'"8"', b"99999999999999999999", b"2.5")
    ],
    (b'"dtypes": "float32"}', [DTYPES], True),
    (b'"dtypes": [3]}', [DTYPES], True),
    (b'"dtypes": []}', ['"dtypes" must name at least one dtype, from bool, uint8,'], True),
    (b'"dtypes": ["double"]}', ["names an unknown dtype 'double': the dtypes are bool,"], True),
    (b'"dtypes": [" float32"]}', ["names an unknown dtype ' float32': the dtypes are"], True),
    (b'"dtypes": ["float\xe9"]}', ['"dtypes" is not valid UTF-8 (byte 0xE9 at offset 5'], True),
    (b'"missing_operators": "aten::cumsum"}', [OPERATORS], True),
    (b'"missing_operators": [3]}', [OPERATORS], True),
    (b'"missing_operators": ["cumsum"]}', ["names 'cumsum', " + OPERATOR_NAME], True),
    (b'"missing_operators": [""]}', ["names '', " + OPERATOR_NAME], True),
    (b'"missing_operators": ["aten::cum sum"]}', [OPERATOR_NAME], True),
    (b'"missing_operators": ["aten::\xe9"]}', ['"missing_operators" is not valid UTF-8'], True),
    (b'"colour": "red"}', ['unknown key "colour": the keys are name, capability, memory'], True),
    (b'"Name": "y"}', ['unknown key "Name": the keys are name,'], True),
    # Refused by the backend: the check at the call would never see these operators.
    (
        b'"missing_operators": ["aten::no_such_op"]}',
        ["'aten::no_such_op', which is not an aten"],
        False,
    ),
    (
        b'"missing_operators": ["aten::linear"]}',
        ["'aten::linear', which decomposes into other operators before any kernel of vdev's"],
        False,
    ),
    (
        b'"missing_operators": ["aten::copy_"]}',
        ["'aten::copy_', which vdev cannot mark missing: every copy to, from or on the device"],
        False,
    ),
    (
        b'"missing_operators": ["aten::native_dropout"]}',
        ["'aten::native_dropout', which vdev runs with a kernel of its own"],
        False,
    ),
]


def profile_file(tmp_path, i: int, text: bytes) -> str:
    if text and not text.startswith((b"{", b"[", b"\xef", b"\xff")) and text.strip():
        text = b'{"name": "x", ' + text
    path = tmp_path / f"case{i}.json"
    path.write_bytes(text)
    return str(path)


def run_cases(envs: list[dict[str, str]]) -> list[dict]:
    code = CHILD.replace("json.loads(CASES)", f"json.loads({json.dumps(envs)!r})")
    r = run_python(code, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    results = json.loads(r.stdout.splitlines()[-1])
    assert len(results) == len(envs)
    return results


def test_every_malformed_variable_and_profile_field_is_named_with_its_valid_range(tmp_path):
    cases = []  # (id, env, needles or None, refused by the runtime)
    for variable, value, needles in ENV_CASES:
        named = None if needles is None else [f"{variable}='{shown(value)}'", *needles]
        cases.append((f"{variable}={value!r}", {variable: value}, named, True))
    for i, (text, needles, runtime) in enumerate(PROFILE_CASES):
        path = profile_file(tmp_path, i, text)
        cases.append(
            (
                f"VDEV_PROFILE: {text!r}",
                {"VDEV_PROFILE": path},
                [f"VDEV_PROFILE='{path}'", *needles],
                runtime,
            )
        )
    results = run_cases([env for _, env, _, _ in cases])

    failures = []
    for (case, _, needles, runtime), result in zip(cases, results, strict=True):
        if result["status"] != 0:
            failures.append(f"{case}: the child died (wait status {result['status']})")
            continue
        out = json.loads(result["data"])
        if "child" in out:
            failures.append(f"{case}: {out['child']}")
            continue
        uses = out["uses"]
        if needles is None:
            if uses != [["ok", ""], ["ok", ""]] or not out["available"]:
                failures.append(f"{case}: a valid value was refused: {uses}")
            continue
        kind, message = uses[0]
        if uses[1] != uses[0] or kind != "RuntimeError":
            failures.append(f"{case}: not one RuntimeError at every use: {uses}")
        if not message.startswith("[config] "):
            failures.append(f"{case}: not a configuration error: {message}")
        missing = [n for n in needles if n not in message]
        if missing:
            failures.append(f"{case}: {message!r} lacks {missing}")
        # A malformed configuration leaves no device; one the backend refuses leaves the devices
        # there (their count is the runtime's) and fails their first use.
        if runtime and (out["available"] or out["count"] != 0 or message not in out["warnings"][0]):
            failures.append(f"{case}: available={out['available']}, count={out['count']}")
        if not runtime and not out["available"]:
            failures.append(f"{case}: no device, yet only the backend refuses the profile")
    assert not failures, "\n".join(failures)


def test_a_profile_with_a_byte_order_mark_is_read_as_utf8(tmp_path):
    """A UTF-8 byte-order mark is skipped, as Python's json skips it in bytes; the name is UTF-8."""
    assert json.loads(b'\xef\xbb\xbf{"name": "B\xc3\xa9ta"}')["name"] == "Béta"
    text = '\ufeff{"name": "Béta", "capability": [8, 6]}'.encode()
    p = _testing.parse_profile_json(text.decode("utf-8", "surrogateescape"), "/v/bom.json")
    assert p["device_name"] == "Béta" and p["capability"] == (8, 6)
    path = tmp_path / "bom.json"
    path.write_bytes(text)
    r = run_python(
        "import torch; print(torch.vdev.get_device_name(1), torch.vdev.get_device_capability())",
        env={"VDEV_PROFILE": str(path)},
    )
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "Béta (8, 6)", r.stdout + r.stderr


def test_a_latin1_profile_is_refused_when_read_naming_the_field(tmp_path):
    """Bytes that are not UTF-8 were accepted, and get_device_name() then raised a bare
    UnicodeDecodeError; now the profile is refused when it is read."""
    path = tmp_path / "latin1.json"
    path.write_bytes('{"name": "Café A1"}'.encode("latin-1"))
    r = run_python(
        """
        import warnings
        import torch
        warnings.simplefilter("ignore")
        print("AVAILABLE", torch.vdev.is_available())
        try:
            torch.vdev.get_device_name(0)
        except Exception as e:
            print("ERR", type(e).__name__, e)
        """,
        env={"VDEV_PROFILE": str(path)},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "AVAILABLE False" in r.stdout.splitlines()
    assert (
        f"ERR RuntimeError [config] VDEV_PROFILE='{path}': \"name\" is not valid UTF-8 (byte 0xE9 "
        "at offset 3 of 'Caf\\xE9 A1'): a profile's strings must be UTF-8 text"
    ) in r.stdout, r.stdout


def test_a_cpu_only_profile_works_and_keeps_its_trace_while_vdev_is_unavailable(tmp_path):
    """With a malformed VDEV_* variable vdev is unavailable: torch.profiler lists no vdev activity
    (as it lists no CUDA one without a GPU), so profile() of CPU code runs CPU-only and keeps its
    trace; using a device still raises the configuration error."""
    trace = tmp_path / "trace.json"
    r = run_python(
        f"""
        import json, warnings
        import torch
        from torch.profiler import ProfilerActivity, profile
        warnings.simplefilter("ignore")
        print("SUPPORTED", sorted(a.name for a in torch.profiler.supported_activities()))
        with profile() as p:
            torch.ones(3).add(1)
        print("EVENTS", sorted({{e.name for e in p.events()}} & {{"aten::add", "aten::ones"}}))
        p.export_chrome_trace({str(trace)!r})
        try:
            torch.zeros(1, device="vdev")
        except RuntimeError as e:
            print("ERR", e)
        """,
        env={"VDEV_DEVICE_COUNT": "abc"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "SUPPORTED ['CPU']" in lines
    assert "EVENTS ['aten::add', 'aten::ones']" in lines
    assert any(e.get("name") == "aten::add" for e in json.loads(trace.read_text())["traceEvents"])
    assert "ERR [config] VDEV_DEVICE_COUNT='abc' is not a valid device count: " + COUNT in lines


def test_vdev_activity_is_supported_while_vdev_is_available():
    assert torch.vdev.is_available()
    supported = torch.profiler.supported_activities()
    assert torch.profiler.ProfilerActivity.PrivateUse1 in supported


# Variables vdev sets for itself, not configuration a user writes: no malformed value to refuse.
# VDEV_SANITIZER_FINDINGS_DIR is the folder `python -m torch_vdev.sanitize` makes and names for the
# processes its script starts (their findings, counted in its summary).
INTERNAL = {"VDEV_SANITIZER_FINDINGS_DIR"}


def test_the_table_covers_every_variable_vdev_reads():
    """A new VDEV_* variable gets its rows above: every one the C++ layers (getenv) or the Python
    package (os.environ, os.getenv) name is in the table, or is one vdev sets itself."""
    root = Path(__file__).resolve().parents[2]
    read = set()
    for path in [*root.joinpath("cpp").rglob("*.cpp"), *root.joinpath("python").rglob("*.py")]:
        text = path.read_text()
        read |= set(re.findall(r'getenv\(\s*"(VDEV_[A-Z_]+)"', text))
        read |= set(re.findall(r'environ(?:\.get\(|\[)\s*"(VDEV_[A-Z_]+)"', text))
    assert read - INTERNAL == {variable for variable, _, _ in ENV_CASES}
