// torch_vdev._C: the extension module. Importing it initialises the backend (hooks) once.
#include <nanobind/nanobind.h>

#include "backend/init.h"
#include "bindings/bindings.h"

namespace nb = nanobind;

NB_MODULE(_C, m) {
  m.doc() = "torch_vdev native module: runtime device functions and backend initialisation";
  vdev::backend::init_backend();
  vdev::bindings::bind_device(m);
  vdev::bindings::bind_testing(m);
}
