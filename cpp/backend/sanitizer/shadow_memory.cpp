#include "backend/sanitizer/shadow_memory.h"

#include <iterator>

namespace vdev::backend {
namespace {

// Exact-byte confirmation of approximate records: bounded work.
constexpr std::size_t kMaxConfirmRuns = 1 << 16;

bool conflicts(const AccessRecord& earlier, const TaskNote& task, std::uint32_t tensor, bool write,
               bool approximate, const vdev::rt::hb::Clock& clock) {
  if (!earlier.write && !write) return false;
  const vdev::rt::hb::Epoch& e = earlier.epoch();
  if (e.slot == task.epoch.slot) return false;  // one stream (or the host): ordered
  if (vdev::rt::hb::ordered_before(e, clock)) return false;
  if (earlier.approximate || approximate) {
    return views_overlap(earlier.note().view, task.tensors[tensor].view, kMaxConfirmRuns);
  }
  return true;
}

}  // namespace

ShadowMemory::Cells::const_iterator ShadowMemory::first_overlapping(std::uintptr_t begin) const {
  auto it = cells_.upper_bound(begin);
  if (it != cells_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > begin) return prev;
  }
  return it;
}

void ShadowMemory::find_conflicts(const TaskNote& task,
                                  const std::vector<std::vector<ByteRange>>& ranges,
                                  const std::vector<bool>& approximate,
                                  const vdev::rt::hb::Clock& clock,
                                  std::vector<Conflict>& out) const {
  for (std::uint32_t t = 0; t < ranges.size(); ++t) {
    const bool write = task.tensors[t].write;
    bool found = false;
    for (const ByteRange& r : ranges[t]) {
      for (auto it = first_overlapping(r.begin); it != cells_.end() && it->first < r.end; ++it) {
        const Cell& c = it->second;
        if (c.has_write && conflicts(c.write, task, t, write, approximate[t], clock)) {
          out.push_back({c.write, t, write});
          found = true;
        }
        if (!found && write) {
          for (const AccessRecord& read : c.reads) {
            if (conflicts(read, task, t, write, approximate[t], clock)) {
              out.push_back({read, t, write});
              found = true;
              break;
            }
          }
        }
        if (found) break;
      }
      if (found) break;
    }
  }
}

ShadowMemory::Cells::iterator ShadowMemory::split_at(std::uintptr_t at) {
  auto it = cells_.upper_bound(at);
  if (it == cells_.begin()) return it;
  auto prev = std::prev(it);
  if (prev->first == at) return prev;
  if (prev->second.end <= at) return it;
  Cell upper = prev->second;  // [at, end) keeps the same records
  prev->second.end = at;
  return cells_.emplace_hint(it, at, std::move(upper));
}

void ShadowMemory::record(const ByteRange& r, const AccessRecord& a) {
  if (r.begin >= r.end) return;
  split_at(r.begin);
  split_at(r.end);
  if (a.write) {
    auto last = cells_.lower_bound(r.end);
    cells_.erase(cells_.lower_bound(r.begin), last);
    Cell c;
    c.end = r.end;
    c.has_write = true;
    c.write = a;
    cells_.emplace_hint(last, r.begin, std::move(c));
    return;
  }
  std::uintptr_t pos = r.begin;
  auto it = cells_.lower_bound(r.begin);
  while (pos < r.end) {
    if (it == cells_.end() || it->first >= r.end || it->first > pos) {
      // A gap [pos, next cell or end): a new cell holding only this read.
      const std::uintptr_t gap_end = (it == cells_.end() || it->first >= r.end) ? r.end : it->first;
      Cell c;
      c.end = gap_end;
      c.reads.push_back(a);
      cells_.emplace_hint(it, pos, std::move(c));
      pos = gap_end;
      continue;
    }
    Cell& c = it->second;
    bool replaced = false;
    for (AccessRecord& read : c.reads) {
      if (read.epoch().slot == a.epoch().slot) {
        read = a;
        replaced = true;
        break;
      }
    }
    if (!replaced) c.reads.push_back(a);
    pos = c.end;
    ++it;
  }
}

void ShadowMemory::forget(const ByteRange& r,
                          const std::function<bool(const AccessRecord&)>& drop) {
  if (r.begin >= r.end) return;
  split_at(r.begin);
  split_at(r.end);
  for (auto it = cells_.lower_bound(r.begin); it != cells_.end() && it->first < r.end;) {
    Cell& c = it->second;
    if (c.has_write && drop(c.write)) c.has_write = false;
    for (std::size_t i = 0; i < c.reads.size();) {
      if (drop(c.reads[i])) {
        c.reads.erase(c.reads.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    if (!c.has_write && c.reads.empty()) {
      it = cells_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace vdev::backend
