// The bytes a strided tensor covers, as maximal contiguous runs, for the sanitizer's shadow
// memory. A tensor that is dense in memory is one run; a slice of rows is one run per row.
//
// Thread rules: stateless.
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vdev::backend {

struct ByteRange {
  std::uintptr_t begin;
  std::uintptr_t end;
};

// Where a strided view lies: its first byte, sizes and strides (elements) and element size.
struct ViewGeometry {
  std::uintptr_t base = 0;  // address of element 0
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
  std::size_t itemsize = 0;

  // [first byte, last byte + 1): every byte the view covers lies inside. Empty when numel is 0.
  ByteRange extent() const;
  // Appends the view's runs to `out`, in address order, unless there are more than `max_runs`
  // (then appends nothing and returns false).
  bool runs(std::size_t max_runs, std::vector<ByteRange>& out) const;
};

// Whether two views share a byte, exactly; `max_runs` bounds the work (beyond it: false, a
// missed finding rather than a false one).
bool views_overlap(const ViewGeometry& a, const ViewGeometry& b, std::size_t max_runs);

}  // namespace vdev::backend
