"""Counts the rows test_opinfo.py wrote with VDEV_OPINFO_ROWS=DIR: per check, the (operator,
dtype) pairs that pass, fail, have no CPU reference, or have nothing to check; and the error
inputs. The figures docs/conformance.md quotes.

    VDEV_OPINFO_ROWS=/tmp/rows python -m pytest tests/ops/test_opinfo.py
    python tests/ops/opinfo_figures.py /tmp/rows
"""

import json
import sys
from collections import Counter
from pathlib import Path


def main() -> None:
    rows = []
    for f in sorted(Path(sys.argv[1]).glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines()]
    count = Counter((r["check"], r["status"]) for r in rows)
    figures = {}
    for check in sorted({c for c, _ in count}):
        passed, failed = count[(check, "pass")], count[(check, "fail")]
        figures[check] = {
            "pass": passed,
            "fail": failed,
            "noref": count[(check, "noref")],
            "skip": count[(check, "skip")],
            "rate": round(passed / (passed + failed), 4) if passed + failed else None,
        }
    inputs = sum(
        int(r["msg"].split()[0]) for r in rows if r["check"] == "errors" and r["status"] == "pass"
    )
    figures["errors"]["inputs"] = inputs
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
