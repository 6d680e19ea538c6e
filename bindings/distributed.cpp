#include <nanobind/nanobind.h>

#include "bindings/bindings.h"
#include "bindings/c10d_objects.h"

namespace nb = nanobind;

namespace vdev::bindings {

void bind_distributed(nb::module_& m) {
  m.def(
      "_new_comm_backend",
      [](nb::handle gloo, int rank, int size) {
        return nb::steal(new_comm_backend(gloo.ptr(), rank, size));
      },
      nb::arg("gloo"), nb::arg("rank"), nb::arg("size"),
      "A vccl c10d Backend running the collectives of `gloo` (a ProcessGroupGloo of the same "
      "rank and size) on vdev tensors.");
}

}  // namespace vdev::bindings
