#include "backend/sanitizer/race_report.h"

#include <c10/core/ScalarType.h>

#include <cinttypes>
#include <cstdio>
#include <sstream>
#include <vector>

namespace vdev::backend {
namespace {

std::string hex(std::uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIxPTR, v);
  return buf;
}

std::string where(const TaskNote& t) {
  if (t.device < 0) return "the host (a synchronous access on the calling thread)";
  std::ostringstream o;
  o << "vdev:" << t.device << " stream " << t.stream;
  if (t.stream == 0) o << " (the default stream)";
  return o.str();
}

const char* verb(Access a) {
  switch (a) {
    case Access::kRead:
      return "reads";
    case Access::kWrite:
      return "writes";
    case Access::kReadWrite:
      return "updates in place";
  }
  return "accesses";
}

std::string describe(const TensorNote& n) {
  std::ostringstream o;
  o << "a tensor of shape [";
  for (std::size_t i = 0; i < n.view.sizes.size(); ++i) o << (i ? ", " : "") << n.view.sizes[i];
  o << "], dtype torch." << c10::getDtypeNames(n.dtype).first << ", on " << n.device;
  if (n.allocation != 0) {
    o << ", in allocation #" << n.allocation_id << " at " << hex(n.allocation) << " ("
      << n.allocation_bytes << " bytes)";
  } else {
    o << " (pinned host memory at " << hex(n.view.base) << ")";
  }
  return o.str();
}

std::string lines_of(const std::shared_ptr<RecordedStack>& stack) {
  return stack == nullptr ? std::string() : stack->text();
}

std::string or_none(const std::string& lines) {
  return lines.empty() ? "    (no Python frames: queued from a thread running no Python code, such "
                         "as autograd's backward threads)\n"
                       : lines;
}

}  // namespace

std::string format_race_report(const RaceReportInput& race) {
  const AccessRecord& earlier = race.conflict.earlier;
  const TaskNote& then = *earlier.task;
  const TaskNote& now = *race.now;
  const TensorNote& mine = now.tensors[race.conflict.tensor];
  const TensorNote& theirs = earlier.note();
  const std::string stacks[] = {lines_of(then.stack), lines_of(now.stack)};
  std::ostringstream o;
  o << "data race: " << now.op << " on " << where(now) << " " << verb(mine.access) << " "
    << describe(mine) << ", while " << then.op << ", queued earlier on " << where(then) << ", "
    << verb(theirs.access) << " the same bytes (" << describe(theirs)
    << "), and nothing orders the two: no event wait, wait_stream or synchronize between them.";
  if (theirs.allocation_id != 0 && mine.allocation_id != 0 &&
      theirs.allocation_id != mine.allocation_id) {
    o << " The memory was freed (allocation #" << theirs.allocation_id
      << ") while that use was pending and handed out again (allocation #" << mine.allocation_id
      << "): the freed tensor needed Tensor.record_stream(" << where(then)
      << ") (or its stream waited for that work before freeing it).";
  } else if (now.device < 0 && theirs.allocation == 0 && theirs.write) {
    // Device to host: the pinned destination is not written yet when the call returns.
    o << " The host " << (mine.write ? "writes" : "reads")
      << " pinned memory that a non_blocking copy from the device has not finished writing: "
         "synchronize (the stream, or an event recorded after the copy) before using it.";
  } else if (now.device < 0 && theirs.allocation == 0) {
    // Host to device: the copy reads its pinned source when the stream reaches it, not at the
    // call (CUDA's cudaMemcpyAsync: the source must stay unchanged until the copy completes).
    o << " The host writes pinned memory that a non_blocking copy to the device has not finished "
         "reading: the copy reads its source when its stream runs it, not at the call. "
         "Synchronize the stream, or record an event after the copy and wait on it "
         "(Event.synchronize), before writing the pinned source.";
  } else {
    o << " Make " << where(now) << " wait for the earlier work (Stream.wait_stream, or "
      << "Stream.wait_event on an event recorded after it) before this call.";
  }
  o << "\nThe earlier access was queued at (most recent call last):\n"
    << or_none(stacks[0]) << "This access (most recent call last):\n"
    << or_none(stacks[1]);
  return o.str();
}

std::string format_init_report(const InitFinding& finding, const TaskNote& task) {
  const TensorNote& n = task.tensors[finding.tensor];
  const std::string stacks[] = {lines_of(finding.allocation_stack), lines_of(task.stack)};
  std::ostringstream o;
  o << "uninitialized read: " << task.op << " on " << where(task) << " " << verb(n.access) << " "
    << describe(n) << ", whose byte at offset " << (finding.first_byte - n.allocation)
    << " no operation has written since the memory was allocated (torch.empty and friends "
       "leave memory uninitialized; a cached block handed out again holds stale bytes).";
  o << "\nThe memory was allocated at (most recent call last):\n"
    << or_none(stacks[0]) << "The read (most recent call last):\n"
    << or_none(stacks[1]);
  return o.str();
}

}  // namespace vdev::backend
