// torch_vdev._C: the extension module. Importing it initialises the backend (hooks and the pinned
// host allocator) once.
#include <nanobind/nanobind.h>

#include "backend/device/init.h"
#include "bindings/bindings.h"
#include "bindings/errors.h"

NB_MODULE(_C, m) {
  m.doc() = "torch_vdev native module: runtime device functions and backend initialisation";
  vdev::backend::init_backend();
  vdev::bindings::register_c10_errors();
  vdev::bindings::bind_device(m);
  vdev::bindings::bind_streams(m);
  vdev::bindings::bind_memory(m);
  vdev::bindings::bind_random(m);
  vdev::bindings::bind_distributed(m);
  vdev::bindings::bind_compile(m);
  vdev::bindings::bind_graphs(m);
  vdev::bindings::bind_sanitizer(m);
  vdev::bindings::bind_autograd_exit(m);
}
