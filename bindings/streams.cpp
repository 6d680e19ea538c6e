#include <nanobind/stl/tuple.h>

#include <cstdint>

#include "backend/common/sync_debug.h"
#include "backend/device/events.h"
#include "bindings/bindings.h"
#include "runtime/stream.h"

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
}

}  // namespace vdev::bindings
