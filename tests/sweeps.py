"""The sweeps against CPU (tests/ops/opinfo_sweep.py, tests/fidelity/module_sweep.py): running one
in its own process, and reading its expected-failure list."""

import json
import subprocess
import sys
from pathlib import Path

from child_process import child_env


def run_sweep(script: Path, *args: str, min_rows: int) -> list[dict]:
    """Runs `script` with `args` in a fresh interpreter; its JSON lines, at least `min_rows`."""
    r = subprocess.run(
        [sys.executable, str(script), *args],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, f"the sweep crashed (exit {r.returncode}):\n{r.stderr[-3000:]}"
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) >= min_rows, r.stderr[-2000:]
    return rows


def listed(path: Path, dtype: str):
    """The entries of an expected-failure list that apply to `dtype`: (fields, reason) for each
    line `DTYPE FIELD...  # reason`, where DTYPE may be `*` (every dtype)."""
    for line in path.read_text().splitlines():
        body, _, reason = line.partition("#")
        if not body.strip():
            continue
        dt, *fields = body.split()
        assert reason.strip(), f"expected failure without a reason: {line!r}"
        if dt in ("*", dtype):
            yield fields, reason.strip()


def expected_failures(path: Path, dtype: str) -> dict[str, str]:
    """Lines `DTYPE NAME  # reason`: {NAME: reason}."""
    return {name: reason for (name,), reason in listed(path, dtype)}


def expected_failures_by_check(path: Path, dtype: str) -> dict[tuple[str, str], str]:
    """Lines `DTYPE CHECK NAME  # reason`, where CHECK may be `*` (every check of
    tests/ops/opinfo_sweep.py): {(CHECK, NAME): reason} for `dtype`, `*` expanded."""
    checks = ("forward", "strides", "backward", "fwad", "out", "variants", "errors")
    out = {}
    for (check, name), reason in listed(path, dtype):
        assert check == "*" or check in checks, f"unknown check {check!r} for {name}"
        for c in checks if check == "*" else (check,):
            out[(c, name)] = reason
    return out
