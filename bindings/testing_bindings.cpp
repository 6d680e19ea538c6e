// Test-only entry points into the runtime (parsers, memory accounting) and the registered hooks.
// Not part of the public torch.vdev API; the test suite uses them to check the runtime layer
// directly.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "backend/guard.h"
#include "backend/hooks.h"
#include "backend/host_allocator.h"
#include "backend/task.h"
#include "bindings/bindings.h"
#include "runtime/config.h"
#include "runtime/memory.h"
#include "runtime/stream.h"
#include "runtime/testing.h"

namespace nb = nanobind;

namespace vdev::bindings {

void bind_testing(nb::module_& m) {
  nb::module_ t = m.def_submodule("_testing", "Test-only runtime entry points");
  t.def("parse_device_count",
        [](const std::string& s) { return rt::parse_device_count(s, "VDEV_DEVICE_COUNT"); });
  t.def("parse_memory_size",
        [](const std::string& s) { return rt::parse_memory_size(s, "VDEV_DEVICE_MEMORY"); });
  t.def("runtime_allocated_bytes", [](int device) { return rt::memory_stats(device).allocated; });
  t.def("pointer_device",
        [](std::uintptr_t addr) { return rt::pointer_device(reinterpret_cast<void*>(addr)); });
  t.def("mem_get_info", &rt::mem_get_info);
  t.def("hooks_device_from_ptr", &backend::testing::hooks_device_from_ptr);
  t.def("hooks_has_primary_context", &backend::testing::hooks_has_primary_context);
  t.def("hooks_is_available", &backend::testing::hooks_is_available);
  t.def("hooks_device_count", &backend::testing::hooks_device_count);
  t.def("hooks_maybe_exchange_device", &backend::testing::hooks_maybe_exchange_device);
  t.def("guard_call", &backend::testing::guard_call);
  t.def("worker_intra_op_threads", &backend::testing::worker_intra_op_threads);
  t.def(
      "host_record_event",
      [](std::uintptr_t ptr, int device, std::int64_t stream_id) {
        return backend::testing::host_record_event(reinterpret_cast<void*>(ptr), device, stream_id);
      },
      "HostAllocator::record_event on the pinned block at `ptr` for (device, stream_id).");

  // Deterministic asynchrony (runtime/testing.h). Streams are named by (device, stream_id), the
  // fields of torch.Stream.
  nb::class_<rt::testing::Gate>(t, "Gate")
      .def(nb::new_([] { return std::make_shared<rt::testing::Gate>(); }))
      .def("open", &rt::testing::Gate::open)
      .def("is_open", &rt::testing::Gate::is_open)
      .def("waiting", &rt::testing::Gate::waiting, "Tasks currently blocked on this gate.");
  nb::class_<rt::testing::Log>(t, "Log")
      .def(nb::new_([] { return std::make_shared<rt::testing::Log>(); }))
      .def("values", &rt::testing::Log::values);
  t.def("enqueue_gate", [](int device, std::int64_t id, std::shared_ptr<rt::testing::Gate> g) {
    rt::testing::enqueue_gate(rt::stream_from_id(device, id), std::move(g));
  });
  t.def("enqueue_log",
        [](int device, std::int64_t id, std::shared_ptr<rt::testing::Log> log, std::int64_t v) {
          rt::testing::enqueue_log(rt::stream_from_id(device, id), std::move(log), v);
        });
  t.def("enqueue_failure", [](int device, std::int64_t id, const std::string& message) {
    rt::testing::enqueue_failure(rt::stream_from_id(device, id), message);
  });
  t.def("enqueue_noop",
        [](int device, std::int64_t id) { rt::stream_from_id(device, id).enqueue("noop", [] {}); });
  t.def(
      "enqueue_noops",
      [](int device, std::int64_t id, std::int64_t n) {
        rt::Stream& s = rt::stream_from_id(device, id);
        for (std::int64_t i = 0; i < n; ++i) s.enqueue("noop", [] {});
      },
      nb::call_guard<nb::gil_scoped_release>(), "Enqueues n empty tasks (throughput benchmark).");
  t.def(
      "stream_synchronize",
      [](int device, std::int64_t id) { rt::stream_from_id(device, id).synchronize(); },
      nb::call_guard<nb::gil_scoped_release>());
  t.def("stream_query",
        [](int device, std::int64_t id) { return rt::stream_from_id(device, id).query(); });
}

}  // namespace vdev::bindings
