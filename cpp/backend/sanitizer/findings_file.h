// Findings of processes that python -m torch_vdev.sanitize did not run itself: the CLI names a
// directory in VDEV_SANITIZER_FINDINGS_DIR, every process that inherits it (the script's children:
// torch.multiprocessing.spawn, DDP's ranks under torchrun, subprocesses) appends each finding to
// a file of its own there as it is reported, and the CLI counts them in its summary and exit
// status. Written at the report, not at exit: a rank that ends with os._exit or is killed
// still has its findings counted.
//
// Format: one JSON object per line, {"kind": 0|1, "message": "..."}, in
// "<dir>/findings-<pid>.jsonl" (kind: findings.h's FindingKind as a number); the message is left
// out beyond the first `max_messages` of a process (the count still holds). findings.cpp calls it
// (this module knows nothing of findings.h's types, so that the two make no cycle).
//
// Thread rules: safe from any thread (appends are serialized by a mutex); does nothing when the
// variable is unset or empty; failures to write are ignored (a report must never fail on them).
#pragma once

#include <cstddef>
#include <string>

namespace vdev::backend {

void append_finding_to_file(int kind, const std::string& message, std::size_t max_messages);

}  // namespace vdev::backend
