#include <nanobind/stl/string.h>

#include <string>
#include <utility>

#include "backend/memory/allocator.h"
#include "backend/memory/host_allocator.h"
#include "bindings/bindings.h"

namespace nb = nanobind;

namespace vdev::bindings {

void bind_memory(nb::module_& m) {
  m.def("_set_memory_fraction", &backend::set_memory_fraction, nb::arg("fraction"),
        nb::arg("device"), "Limits what this process may reserve on the device (0..1).");
  m.def("_get_memory_fraction", &backend::memory_fraction, nb::arg("device"));
  m.def(
      "_empty_cache", [] { backend::device_allocator()->emptyCache({0, 0}); },
      nb::call_guard<nb::gil_scoped_release>(),
      "Returns unused cached device memory of every device (waits for queued work first).");
  m.def(
      "_host_memory_stats",
      [] {
        const at::HostStats s = backend::pinned_host_allocator()->get_stats();
        nb::dict d;
        const std::pair<const char*, const c10::CachingAllocator::Stat*> stats[] = {
            {"allocations", &s.allocations},
            {"allocated_bytes", &s.allocated_bytes},
            {"active_requests", &s.active_requests},
            {"active_bytes", &s.active_bytes}};
        for (const auto& [name, st] : stats) {
          const std::string n(name);
          d[(n + ".current").c_str()] = st->current;
          d[(n + ".peak").c_str()] = st->peak;
          d[(n + ".allocated").c_str()] = st->allocated;
          d[(n + ".freed").c_str()] = st->freed;
        }
        d["num_host_alloc"] = s.num_host_alloc;
        d["num_host_free"] = s.num_host_free;
        return d;
      },
      "Statistics of the pinned host allocator, keyed as torch.cuda.host_memory_stats.");
  m.def("_reset_peak_host_memory_stats",
        [] { backend::pinned_host_allocator()->reset_peak_stats(); });
  m.def("_reset_accumulated_host_memory_stats",
        [] { backend::pinned_host_allocator()->reset_accumulated_stats(); });
}

}  // namespace vdev::bindings
