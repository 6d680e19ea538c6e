// torch_vdev._C: glue between Python and the runtime/backend, one file per concern (device,
// streams and events, memory, random). Argument conversion and exception mapping only, no logic:
// device arguments are parsed by device_index.h, errors are mapped by nanobind and errors.h. Every
// binding that can block releases the GIL.
#pragma once

#include <nanobind/nanobind.h>

namespace vdev::bindings {

void bind_device(nanobind::module_& m);
void bind_streams(nanobind::module_& m);
void bind_memory(nanobind::module_& m);
void bind_random(nanobind::module_& m);
void bind_distributed(nanobind::module_& m);
void bind_compile(nanobind::module_& m);
void bind_graphs(nanobind::module_& m);
void bind_sanitizer(nanobind::module_& m);
void bind_autograd_exit(nanobind::module_& m);

}  // namespace vdev::bindings
