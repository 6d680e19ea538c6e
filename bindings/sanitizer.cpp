#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <utility>
#include <vector>

#include "backend/sanitizer/findings.h"
#include "backend/sanitizer/recorded_stack.h"
#include "backend/sanitizer/settings.h"
#include "backend/sanitizer/stream_sanitizer.h"
#include "backend/sanitizer/switches.h"
#include "bindings/bindings.h"
#include "bindings/sanitizer_errors.h"
#include "runtime/config.h"

namespace nb = nanobind;

namespace vdev::bindings {
namespace {

void translate_finding(const std::exception_ptr& p, void*) {
  if (!set_python_error_for_finding(p)) std::rethrow_exception(p);
}

}  // namespace

void bind_sanitizer(nb::module_& m) {
  nb::register_exception_translator(&translate_finding);
  m.def("_sanitizer_set_error_types", [](nb::handle race, nb::handle uninitialized) {
    set_sanitizer_error_types(race.ptr(), uninitialized.ptr());
  });
  m.def("_sanitizer_parse",
        [](const std::string& text) { return vdev::rt::parse_sanitizer_flags(text, "tools"); });
  m.def("_sanitizer_set_flags", &backend::set_sanitizer_flags);
  m.def("_sanitizer_flags", [] { return backend::sanitizer_flags(); });
  m.def("_sanitizer_findings", [] {
    std::vector<std::pair<int, std::string>> out;
    for (backend::Finding& f : backend::kept_findings()) {
      out.emplace_back(static_cast<int>(f.kind), std::move(f.message));
    }
    return out;
  });
  m.def("_sanitizer_finding_count", &backend::finding_count);
  m.def("_sanitizer_clear_findings", &backend::clear_findings);
  m.def("_sanitizer_shadow_cells", &backend::sanitizer_shadow_cells);
  m.def("_sanitizer_symbolize_stacks", &backend::symbolize_pending_stacks);
  m.def("_sanitizer_release_stacks_soon", &backend::release_stacks_soon);
  m.def("_sanitizer_hide_outer_frames", &backend::hide_outer_frames);
}

}  // namespace vdev::bindings
