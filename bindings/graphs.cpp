#include <nanobind/stl/pair.h>

#include "backend/graphs/graph.h"
#include "bindings/bindings.h"

namespace nb = nanobind;

namespace vdev::bindings {

void bind_graphs(nb::module_& m) {
  m.def("_graph_pool_handle", &vdev::backend::graph_pool_handle,
        "A fresh memory pool id that several graphs can share (torch.vdev.graph_pool_handle).");
}

}  // namespace vdev::bindings
