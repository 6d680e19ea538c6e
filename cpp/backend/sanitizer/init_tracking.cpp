#include "backend/sanitizer/init_tracking.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace vdev::backend {

void InitTracking::allocated(std::uintptr_t at, std::size_t bytes, std::uint64_t id,
                             std::shared_ptr<RecordedStack> stack) {
  allocations_[at] = Allocation{bytes, id, std::move(stack), {}};
}

void InitTracking::freed(std::uintptr_t at) { allocations_.erase(at); }

InitTracking::Allocation* InitTracking::find(std::uintptr_t first_byte) {
  auto it = allocations_.find(first_byte);
  return it == allocations_.end() ? nullptr : &it->second;
}

std::optional<std::uintptr_t> InitTracking::first_unwritten(const Allocation& a,
                                                            const ByteRange& r) {
  std::uintptr_t pos = r.begin;
  auto it = a.written.upper_bound(pos);
  if (it != a.written.begin()) --it;
  for (; it != a.written.end() && pos < r.end; ++it) {
    if (it->first > pos) return pos;  // a gap before the next written interval
    pos = std::max(pos, it->second);
  }
  if (pos < r.end) return pos;
  return std::nullopt;
}

void InitTracking::mark(Allocation& a, ByteRange r) {
  if (r.begin >= r.end) return;
  auto it = a.written.upper_bound(r.begin);
  if (it != a.written.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= r.begin) it = prev;  // touches or overlaps: merge
  }
  while (it != a.written.end() && it->first <= r.end) {
    r.begin = std::min(r.begin, it->first);
    r.end = std::max(r.end, it->second);
    it = a.written.erase(it);
  }
  a.written.emplace_hint(it, r.begin, r.end);
}

std::optional<InitFinding> InitTracking::check_and_mark(
    const TaskNote& task, const std::vector<Access>& access,
    const std::vector<std::vector<ByteRange>>& ranges, const std::vector<bool>& approximate,
    bool raises, std::uint64_t unchecked_from) {
  std::optional<InitFinding> finding;
  for (std::uint32_t t = 0; t < ranges.size() && !finding; ++t) {
    if (access[t] == Access::kWrite || approximate[t]) continue;
    const TensorNote& n = task.tensors[t];
    Allocation* a = n.allocation == 0 ? nullptr : find(n.allocation);
    if (a == nullptr || (unchecked_from != 0 && a->id >= unchecked_from)) continue;
    for (const ByteRange& r : ranges[t]) {
      if (auto at = first_unwritten(*a, r)) {
        finding = InitFinding{t, *at, a->bytes, a->id, a->stack};
        break;
      }
    }
  }
  if (finding && raises) return finding;
  for (std::uint32_t t = 0; t < ranges.size(); ++t) {
    if (access[t] == Access::kRead) continue;
    const TensorNote& n = task.tensors[t];
    Allocation* a = n.allocation == 0 ? nullptr : find(n.allocation);
    if (a == nullptr) continue;
    for (const ByteRange& r : ranges[t]) mark(*a, r);
  }
  return finding;
}

void InitTracking::mark_written(std::uintptr_t at, std::size_t bytes) {
  // `at` may lie inside an allocation: find the one that holds it.
  for (auto& [first, a] : allocations_) {
    if (at >= first && at < first + a.bytes) {
      mark(a, {at, at + bytes});
      return;
    }
  }
}

}  // namespace vdev::backend
