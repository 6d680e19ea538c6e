#include <nanobind/nanobind.h>

#include "backend/distributed/dist_fault.h"
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
  m.def("_arm_dist_fault", &backend::arm_dist_fault, nb::arg("global_rank"), nb::arg("world_size"),
        "Arms VDEV_DIST_FAULT on this process if it is the rank named (first call only).");
}

}  // namespace vdev::bindings
