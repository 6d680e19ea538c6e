// The uninitialised-read tool (VDEV_SANITIZER=init): which bytes of each device allocation some
// operation has written since the allocation was handed out. A read (or in-place update) of a
// byte never written raises UninitializedReadError at the call that queued it, with the stack
// that allocated the memory: torch.empty(...).sum(), a buffer only partly written, a cached block
// handed out again (a new allocation starts unwritten, whatever the block held before).
//
// Writes through out=, copies, fills, collectives, compiled kernels' outputs and fresh operator
// outputs count. A write to a strided view with many runs marks its whole extent (a missed finding
// rather than a false one), and such a read is not checked. Allocations made before the tool was
// switched on, and memory the allocator did not hand out (IPC, pinned host memory), are not
// tracked: reads of them are never reported.
//
// Thread rules: none of its own; the stream sanitizer's mutex guards it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backend/sanitizer/access_record.h"

namespace vdev::backend {

struct InitFinding {
  std::uint32_t tensor;       // the reading tensor of the task
  std::uintptr_t first_byte;  // the first unwritten byte it reads
  std::size_t allocation_bytes;
  std::uint64_t allocation_id;
  std::shared_ptr<RecordedStack> allocation_stack;
};

class InitTracking {
 public:
  void allocated(std::uintptr_t at, std::size_t bytes, std::uint64_t id,
                 std::shared_ptr<RecordedStack> stack);
  void freed(std::uintptr_t at);
  // Checks the reads of a task, then marks its writes (not when a read is reported and the tool
  // raises: the task is then not queued). Reads of allocations numbered `unchecked_from` or later
  // are not checked (0: all are; composite_scopes.h).
  std::optional<InitFinding> check_and_mark(const TaskNote& task, const std::vector<Access>& access,
                                            const std::vector<std::vector<ByteRange>>& ranges,
                                            const std::vector<bool>& approximate, bool raises,
                                            std::uint64_t unchecked_from = 0);
  // Bytes written on the host outside any operator (a storage resize keeping its old bytes).
  void mark_written(std::uintptr_t at, std::size_t bytes);
  void clear() { allocations_.clear(); }

 private:
  struct Allocation {
    std::size_t bytes;
    std::uint64_t id;
    std::shared_ptr<RecordedStack> stack;
    std::map<std::uintptr_t, std::uintptr_t> written;  // disjoint [begin, end), merged
  };
  Allocation* find(std::uintptr_t first_byte);
  static std::optional<std::uintptr_t> first_unwritten(const Allocation& a, const ByteRange& r);
  static void mark(Allocation& a, ByteRange r);
  std::unordered_map<std::uintptr_t, Allocation> allocations_;  // by first byte
};

}  // namespace vdev::backend
