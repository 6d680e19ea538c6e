// Findings of processes that python -m torch_vdev.sanitize did not run itself: the CLI names a
// directory in VDEV_SANITIZER_FINDINGS_DIR, every process that inherits it (the script's children:
// torch.multiprocessing.spawn, DDP's ranks under torchrun, subprocesses) appends each finding to
// a file of its own there as it is reported, and the CLI counts them in its summary and exit
// status. Written at the report, not at exit: a rank that ends with os._exit or is killed
// still has its findings counted.
//
// Format: one JSON object per line, {"kind": 0|1, "message": "..."}, in
// "<dir>/findings-<pid>.jsonl"; the message is left out beyond the first kMaxKeptFindings of a
// process (the count still holds).
//
// Thread rules: safe from any thread (appends are serialized by a mutex); does nothing when the
// variable is unset or empty; failures to write are ignored (a report must never fail on them).
#pragma once

#include <string>

#include "backend/sanitizer/findings.h"

namespace vdev::backend {

void append_finding_to_file(FindingKind kind, const std::string& message);

}  // namespace vdev::backend
