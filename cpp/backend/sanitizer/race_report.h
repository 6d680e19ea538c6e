// The text of the sanitizer's findings: what was accessed (shape, dtype, device, allocation), by
// which two operations on which two streams, and both Python stacks (the earlier one as it was
// when that operation was queued).
//
// Thread rules: stateless; call without the sanitizer's mutex held (symbolizing Python frames
// takes the GIL).
#pragma once

#include <memory>
#include <string>

#include "backend/sanitizer/init_tracking.h"
#include "backend/sanitizer/shadow_memory.h"

namespace vdev::backend {

struct RaceReportInput {
  Conflict conflict;
  std::shared_ptr<const TaskNote> now;
};

std::string format_race_report(const RaceReportInput& race);
std::string format_init_report(const InitFinding& finding, const TaskNote& task);

}  // namespace vdev::backend
