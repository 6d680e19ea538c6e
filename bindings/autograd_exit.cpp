// torch_vdev._C._drain_autograd_device_threads (backend/device/autograd_drain.h says why).
#include <nanobind/nanobind.h>

#include "backend/device/autograd_drain.h"
#include "bindings/bindings.h"

namespace nb = nanobind;

namespace vdev::bindings {

void bind_autograd_exit(nb::module_& m) {
  m.def("_drain_autograd_device_threads", &backend::drain_autograd_device_threads,
        nb::call_guard<nb::gil_scoped_release>(),
        "At exit: lets autograd's device threads finish with the last backward "
        "(backend/device/autograd_drain.h).");
}

}  // namespace vdev::bindings
