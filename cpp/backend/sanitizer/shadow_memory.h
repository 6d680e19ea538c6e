// The stream sanitizer's shadow memory: for every byte range tasks have accessed, the last write
// and the reads since (at most one per stream: a later read of a stream stands for its earlier
// ones), as an interval map of non-overlapping cells keyed by first byte.
//
// A new access conflicts with a recorded one when they come from different streams (the host is
// one more "stream"), at least one writes, their bytes overlap, and the recorded one does not
// happen before the new one (runtime/happens_before.h). A write replaces what its range held
// (every later access conflicting with a record it replaces conflicts with it too); reads add up.
// Ranges of strided views with many runs are recorded as their extent, marked approximate; a
// conflict involving one is confirmed on the exact bytes (byte_runs.h) before it is reported.
//
// Thread rules: none of its own; the stream sanitizer guards it with its mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "backend/sanitizer/access_record.h"

namespace vdev::backend {

struct Conflict {
  AccessRecord earlier;
  std::uint32_t tensor;  // the new task's tensor
  bool write;            // whether the new access writes
};

class ShadowMemory {
 public:
  // Appends to `out` the first conflict of each tensor access of `task` (`ranges[i]`: the byte
  // ranges of access i, `approximate[i]`: whether they are its extent) with the recorded ones,
  // given the task's clock.
  void find_conflicts(const TaskNote& task, const std::vector<std::vector<ByteRange>>& ranges,
                      const std::vector<bool>& approximate, const vdev::rt::hb::Clock& clock,
                      std::vector<Conflict>& out) const;
  void record(const ByteRange& r, const AccessRecord& a);
  // Drops the records in [begin, end) for which `drop` is true (a freed block's recorded streams).
  void forget(const ByteRange& r, const std::function<bool(const AccessRecord&)>& drop);
  void clear() { cells_.clear(); }
  std::size_t cell_count() const { return cells_.size(); }

 private:
  struct Cell {
    std::uintptr_t end;
    bool has_write = false;
    AccessRecord write;
    std::vector<AccessRecord> reads;
  };
  using Cells = std::map<std::uintptr_t, Cell>;
  Cells::iterator split_at(std::uintptr_t at);
  Cells::const_iterator first_overlapping(std::uintptr_t begin) const;
  Cells cells_;
};

}  // namespace vdev::backend
