"""Reading the expected-failure lists of the sweeps (tests/ops/opinfo_expected_failures.txt,
tests/fidelity/module_expected_failures.txt)."""

from pathlib import Path


def expected_failures(path: Path, dtype: str) -> dict[str, str]:
    """Lines `DTYPE NAME  # reason`, where DTYPE may be `*` (every dtype): {NAME: reason}."""
    out = {}
    for line in path.read_text().splitlines():
        body, _, reason = line.partition("#")
        if not body.strip():
            continue
        dt, name = body.split()
        assert reason.strip(), f"expected failure without a reason: {line!r}"
        if dt in ("*", dtype):
            out[name] = reason.strip()
    return out
