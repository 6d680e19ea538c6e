"""Index checks of vdev kernels fail as a device-side assert does: reported at the next
synchronize, the process alive.

Inductor's C++ kernels check indirect indices with ``TORCH_CHECK(cond, "index out of bounds:
...")`` inside their loops. Under OpenMP (``VDEV_DEVICE_THREADS`` >= 2) those loops run in a
parallel region, and an exception may not leave one: the failed check called std::terminate. CUDA
reports the same mistake as a device-side assert at the next synchronize. So, in a vdev kernel's
source, the body of the innermost ``for`` loop around each such check is wrapped in a try block
whose handler keeps the first error in a local of the kernel function; the failed iteration stops
at the check (its out-of-bounds access never happens), the others run on, and the kernel throws the
error once every thread has left the region. The stream task then fails with it, as an eager
operator's does (cpp/backend/compile/kernel_launch.h). Loops under ``#pragma omp simd`` may not
hold a try block; the next enclosing loop is wrapped instead.

The source is scanned as C++ tokens only as far as needed: string and character literals and
comments are skipped, every ``{`` opens a block whose kind comes from the statement before it (a
``for`` head, an ``extern "C"`` function definition, anything else), and insertions are made at
the braces. Kernels without such checks are returned unchanged.
"""

from __future__ import annotations

import re

_CHECK = "TORCH_CHECK("
_OUT_OF_BOUNDS = '"index out of bounds:'
_FOR_HEAD = re.compile(r"(?:^|\n)\s*for\s*\([^\n]*$", re.S)
_SIMD = re.compile(r"#pragma\s+omp\s+(?:for\s+)?simd\b")

# Defined once per source, before its first kernel (after the includes: the precompiled header
# must come first).
_PRELUDE = """
// vdev: the first index-check failure of one kernel call, kept by its loops' try blocks and
// thrown when the kernel ends (python/torch_vdev/compile/index_checks.py).
#include <atomic>
#include <exception>
struct VdevKernelError {
    std::atomic<bool> set{false};
    std::exception_ptr first;
    void note(std::exception_ptr e) { if (!set.exchange(true)) first = e; }
    void rethrow() { if (set.load()) std::rethrow_exception(first); }
};
"""
_DECLARE = " VdevKernelError vdev_kernel_error;"
_RETHROW = " vdev_kernel_error.rethrow(); "
_TRY = " try {"
_CATCH = " } catch (...) { vdev_kernel_error.note(std::current_exception()); } "


class _Block:
    __slots__ = ("kind", "open", "close", "marked")

    def __init__(self, kind: str, open_at: int) -> None:
        self.kind = kind  # "function", "for", "simd for" or "other"
        self.open = open_at
        self.close = -1
        self.marked = False


def _kind(head: str) -> str:
    if 'extern "C"' in head:
        return "function"
    if _FOR_HEAD.search(head.rstrip()):
        return "simd for" if _SIMD.search(head) else "for"
    return "other"


def guard_index_checks(source: str) -> str:
    """``source`` with every index check's innermost loop body made to keep its error (above)."""
    if _OUT_OF_BOUNDS not in source:
        return source
    blocks: list[_Block] = []
    stack: list[_Block] = []
    head_start = 0  # where the statement before the next `{` begins
    depth = 0  # parentheses: a `for` head's `;` do not end a statement
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c in "\"'":  # a literal: skip to its end
            j = i + 1
            while j < n and source[j] != c:
                j += 2 if source[j] == "\\" else 1
            if c == '"' and source.startswith(_OUT_OF_BOUNDS, i):
                if source.rfind(_CHECK, head_start, i) >= 0:
                    _mark(stack)
            i = j + 1
            continue
        if source.startswith("//", i):
            i = source.find("\n", i)
            i = n if i < 0 else i
            continue
        if source.startswith("/*", i):
            i = source.find("*/", i + 2)
            i = n if i < 0 else i + 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "{":
            block = _Block(_kind(source[head_start:i]), i)
            blocks.append(block)
            stack.append(block)
            head_start = i + 1
        elif c == "}":
            if stack:
                stack.pop().close = i
            head_start = i + 1
        elif c == ";" and depth == 0:
            head_start = i + 1
        i += 1
    inserts: list[tuple[int, str]] = []
    first_function = min((b.open for b in blocks if b.kind == "function"), default=-1)
    for b in blocks:
        if not b.marked or b.close < 0:
            continue
        if b.kind == "function":
            inserts += [(b.open + 1, _DECLARE), (b.close, _RETHROW)]
        else:
            inserts += [(b.open + 1, _TRY), (b.close, _CATCH)]
    if not inserts or first_function < 0:
        return source
    # The prelude goes before the first kernel's `extern "C"` line.
    prelude_at = source.rfind("\n", 0, source.rfind('extern "C"', 0, first_function)) + 1
    inserts.append((prelude_at, _PRELUDE))
    out, last = [], 0
    for at, text in sorted(inserts, key=lambda p: p[0]):
        out += [source[last:at], text]
        last = at
    out.append(source[last:])
    return "".join(out)


def _mark(stack: list[_Block]) -> None:
    """Marks the innermost loop (not an omp simd one) around a check and the kernel function that
    holds it; nothing outside an ``extern "C"`` kernel (a helper function has no error holder)."""
    loop = next((b for b in reversed(stack) if b.kind == "for"), None)
    function = next((b for b in reversed(stack) if b.kind == "function"), None)
    if loop is not None and function is not None and function.open < loop.open:
        loop.marked = function.marked = True
