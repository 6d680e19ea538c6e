// What the sanitizer remembers of one queued task (or synchronous host access) and its accesses:
// enough to name the operation, the stream, the tensors and the Python stack in a report made
// much later, when another access conflicts with it.
//
// Thread rules: a TaskNote is immutable once made and shared (shared_ptr<const>) by the shadow
// memory's records; it may be destroyed on any thread (its stack defers releasing Python frames,
// torch::CapturedTraceback).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/common/launch.h"  // Access
#include "backend/sanitizer/byte_runs.h"
#include "backend/sanitizer/recorded_stack.h"
#include "runtime/happens_before.h"

namespace vdev::backend {

struct TensorNote {
  ViewGeometry view;
  c10::ScalarType dtype;
  c10::Device device;
  bool write;  // kWrite or kReadWrite
  Access access;
  std::uintptr_t allocation;  // the allocation's first byte (0: not device memory)
  std::size_t allocation_bytes;
  std::uint64_t allocation_id;  // the sanitizer's number of that allocation (0: untracked)
};

struct TaskNote {
  const char* op;  // the operation (an interned name or a literal)
  int device;      // -1: the host
  std::int64_t stream;
  vdev::rt::hb::Epoch epoch;
  std::shared_ptr<RecordedStack> stack;  // where it was queued (null: no Python frames)
  std::vector<TensorNote> tensors;
};

// One access of a task to a byte range of the shadow memory.
struct AccessRecord {
  std::shared_ptr<const TaskNote> task;
  std::uint32_t tensor = 0;  // index into task->tensors
  bool write = false;
  bool approximate = false;  // the range is the view's extent, wider than the bytes it covers

  const TensorNote& note() const { return task->tensors[tensor]; }
  const vdev::rt::hb::Epoch& epoch() const { return task->epoch; }
};

}  // namespace vdev::backend
