"""``python -m torch_vdev.sanitize [--tool streams,init,poison] [--error] script.py [args...]``

Runs a script under vdev's sanitizer (torch.vdev.sanitizer), the way compute-sanitizer runs a CUDA
program: findings are reported as they happen and the script goes on (``--error`` stops at the
first, raising it in the script), then a summary lists what was found. The exit status is the
script's, or 1 when the script succeeded but something was found. Processes the script starts
inherit the tools through ``VDEV_SANITIZER`` (their findings are reported there, not summarised).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import warnings


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m torch_vdev.sanitize",
        description="Run a Python script under vdev's sanitizer and summarise its findings.",
    )
    parser.add_argument(
        "--tool",
        default="streams",
        help="comma-separated tools: streams (races between streams), init (uninitialized "
        "reads), poison (fill fresh and freed memory with NaN bits); default: streams",
    )
    parser.add_argument(
        "--error", action="store_true", help="raise the first finding in the script and stop"
    )
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return parser.parse_args(argv)


def _summary(findings: list, total: int) -> str:
    if total == 0:
        return "========= vdev sanitizer: no findings"
    kinds: dict[str, int] = {}
    for f in findings:
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    counts = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in sorted(kinds.items()))
    lines = [f"========= vdev sanitizer: {total} finding{'s' if total > 1 else ''} ({counts})"]
    for i, f in enumerate(findings, 1):
        lines.append(f"========= [{i}] {f.message}")
    if total > len(findings):
        lines.append(
            f"========= ... and {total - len(findings)} more (the first {len(findings)} kept)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    options = _parse(sys.argv[1:] if argv is None else argv)
    import torch

    sanitizer = torch.vdev.sanitizer
    tools = options.tool + ("" if options.error else ",warn")
    try:
        flags = sanitizer._flags(tools)
    except ValueError as e:
        print(f"python -m torch_vdev.sanitize: {e}", file=sys.stderr)
        return 2
    os.environ["VDEV_SANITIZER"] = tools
    sanitizer.clear_findings()
    sanitizer._C._sanitizer_set_flags(flags)
    # Findings are printed once, in the summary (the warnings that report them are silenced).
    warnings.filterwarnings("ignore", message=r"(data race|uninitialized read):")
    sys.argv = [options.script, *options.args]
    status = 0
    try:
        runpy.run_path(options.script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # the script's own failure: shown as Python shows it
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        try:
            torch.vdev.synchronize()
        except Exception:  # noqa: BLE001 - a queued error the script never saw: reported above
            pass
    total = sanitizer.finding_count()
    print(_summary(sanitizer.findings(), total), file=sys.stderr)
    if status == 0 and total > 0:
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
