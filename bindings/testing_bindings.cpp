// Test-only entry points into the runtime (parsers, memory accounting) and the registered hooks.
// Not part of the public torch.vdev API; the test suite uses them to check the runtime layer
// directly.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "backend/guard.h"
#include "backend/hooks.h"
#include "bindings/bindings.h"
#include "runtime/config.h"
#include "runtime/memory.h"

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
}

}  // namespace vdev::bindings
