// vdev's kernels for the DispatchStubs that the sparse native functions CPU and CUDA share call for
// the tensor's device type (ops/layout_kernels.cpp runs those functions as CUDA does).
//
// flatten_indices_stub: the linear index of every COO index column, which sparse_compressed's
// conversions between CSR and CSC (and BSR and BSC), transposed products and their backward use
// (at::sparse::flatten_indices). vdev computes it with operators on the device (queued like any
// other), the sum over the sparse dimensions of index x row-major stride, as CPU's and CUDA's
// kernels do element by element (ATen/native/sparse/FlattenIndicesCommon.h); other PrivateUse1
// backends fill this stub the same way.
//
// The stub's type is declared here as ATen declares it (ATen/native/sparse/SparseStubs.h, which
// the wheel does not ship): same name, same signature.
//
// Thread rules: runs on the dispatching thread; what it computes is queued on the current stream.
#include <ATen/core/Tensor.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/ops/zeros.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace at::native {
using flatten_indices_fn = Tensor (*)(const Tensor& indices, IntArrayRef size);
DECLARE_DISPATCH(flatten_indices_fn, flatten_indices_stub)
}  // namespace at::native

namespace vdev::backend {
namespace {

at::Tensor flatten_indices_on_device(const at::Tensor& indices, c10::IntArrayRef size) {
  TORCH_CHECK(indices.dim() > 1 && indices.size(0) == static_cast<int64_t>(size.size()),
              "flatten_indices_vdev(): the dimensionality of sparse `indices` and the length of "
              "`size` must match. Got `indices.size(0) == ",
              indices.size(0), "` != `size.size() == ", size.size(), "`.");
  TORCH_CHECK(indices.scalar_type() == at::kInt || indices.scalar_type() == at::kLong,
              "flatten_indices_vdev(): expected int32 or int64 indices, got ",
              indices.scalar_type());
  at::Tensor hash = at::zeros({indices.size(1)}, indices.options().dtype(at::kLong));
  int64_t stride = 1;
  for (int64_t d = indices.size(0) - 1; d >= 0; --d) {
    hash.add_(indices.select(0, d), stride);
    stride *= size[d];
  }
  return hash;
}

}  // namespace
}  // namespace vdev::backend

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(flatten_indices_stub, &vdev::backend::flatten_indices_on_device)
}  // namespace at::native
