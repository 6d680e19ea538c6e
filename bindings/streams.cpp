#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "backend/common/sync_debug.h"
#include "backend/common/worker_warnings.h"
#include "backend/device/events.h"
#include "bindings/bindings.h"
#include "runtime/stream_registry.h"

namespace nb = nanobind;

namespace vdev::bindings {

void bind_streams(nb::module_& m) {
  m.def(
      "_stream_priority",
      [](int device, std::int64_t id) { return rt::stream_from_id(device, id).priority(); },
      nb::arg("device"), nb::arg("stream_id"), "Priority of a vdev stream.");
  m.def(
      "_stream_priority_range",
      [] { return std::make_tuple(rt::kLowestStreamPriority, rt::kHighestStreamPriority); },
      "(least, greatest) stream priority, as torch.cuda.Stream.priority_range().");
  m.def("_event_elapsed_time", &backend::elapsed_time_by_ids, nb::arg("start_id"),
        nb::arg("end_id"), "Milliseconds between two recorded, completed, timing vdev events.");
  m.def(
      "_set_sync_debug_mode", &backend::set_sync_debug_mode, nb::arg("debug_mode"),
      "0: silent, 1: warn, 2: raise on synchronizing operations (torch.vdev.set_sync_debug_mode).");
  m.def("_get_sync_debug_mode", &backend::sync_debug_mode);
  m.def(
      "_take_worker_warnings",
      [] {
        std::vector<std::tuple<std::string, bool, std::string, std::uint32_t, bool>> out;
        for (const c10::Warning& w : backend::take_worker_warnings()) {
          out.emplace_back(w.msg(), std::holds_alternative<c10::DeprecationWarning>(w.type()),
                           w.source_location().file, w.source_location().line, w.verbatim());
        }
        return out;
      },
      "(message, is_deprecation, file, line, verbatim) of each warning queued kernels raised "
      "since the last call.");
}

}  // namespace vdev::bindings
