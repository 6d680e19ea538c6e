#include "backend/sanitizer/byte_runs.h"

#include <algorithm>
#include <utility>

namespace vdev::backend {
namespace {

struct Dim {
  std::int64_t size;
  std::int64_t stride;
};

// Dimensions that add bytes (size > 1, stride > 0), innermost (smallest stride) first.
std::vector<Dim> moving_dims(const ViewGeometry& g) {
  std::vector<Dim> dims;
  for (std::size_t i = 0; i < g.sizes.size(); ++i) {
    if (g.sizes[i] > 1 && g.strides[i] != 0) dims.push_back({g.sizes[i], g.strides[i]});
  }
  std::sort(dims.begin(), dims.end(),
            [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  return dims;
}

bool empty_view(const ViewGeometry& g) {
  return std::any_of(g.sizes.begin(), g.sizes.end(), [](std::int64_t s) { return s == 0; });
}

}  // namespace

ByteRange ViewGeometry::extent() const {
  if (empty_view(*this)) return {base, base};
  std::int64_t last = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (strides[i] > 0) last += (sizes[i] - 1) * strides[i];
  }
  return {base, base + static_cast<std::uintptr_t>(last) * itemsize + itemsize};
}

bool ViewGeometry::runs(std::size_t max_runs, std::vector<ByteRange>& out) const {
  if (empty_view(*this)) return true;
  std::vector<Dim> dims = moving_dims(*this);
  // The innermost dimensions that continue one another form one run.
  std::size_t run = itemsize;
  std::size_t first_outer = 0;
  while (first_outer < dims.size() &&
         static_cast<std::size_t>(dims[first_outer].stride) * itemsize == run) {
    run *= static_cast<std::size_t>(dims[first_outer].size);
    ++first_outer;
  }
  std::size_t count = 1;
  for (std::size_t i = first_outer; i < dims.size(); ++i) {
    count *= static_cast<std::size_t>(dims[i].size);
    if (count > max_runs) return false;
  }
  const std::size_t start = out.size();
  std::vector<std::int64_t> index(dims.size(), 0);
  for (std::size_t n = 0; n < count; ++n) {
    std::int64_t offset = 0;
    for (std::size_t i = first_outer; i < dims.size(); ++i) offset += index[i] * dims[i].stride;
    const std::uintptr_t b = base + static_cast<std::uintptr_t>(offset) * itemsize;
    out.push_back({b, b + run});
    for (std::size_t i = first_outer; i < dims.size(); ++i) {  // odometer
      if (++index[i] < dims[i].size) break;
      index[i] = 0;
    }
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  return true;
}

bool views_overlap(const ViewGeometry& a, const ViewGeometry& b, std::size_t max_runs) {
  const ByteRange ea = a.extent();
  const ByteRange eb = b.extent();
  if (ea.begin >= eb.end || eb.begin >= ea.end) return false;
  std::vector<ByteRange> ra;
  std::vector<ByteRange> rb;
  if (!a.runs(max_runs, ra) || !b.runs(max_runs, rb)) return false;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < ra.size() && j < rb.size()) {
    if (ra[i].begin < rb[j].end && rb[j].begin < ra[i].end) return true;
    if (ra[i].end <= rb[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return false;
}

}  // namespace vdev::backend
