// vdev's kernels for the sparse COO, sparse compressed (CSR, CSC, BSR, BSC) and quantized layouts:
// the SparsePrivateUse1, SparseCsrPrivateUse1 and QuantizedPrivateUse1 dispatch keys, which the
// strided fallback (ops/fallback.cpp) does not cover.
//
// Each operator is registered the way CUDA registers it, read from PyTorch's
// native_functions.yaml at build time (tools/gen_layout_kernels.py):
//  * shared: CPU and CUDA register the same native function, device-generic code built on other
//    operators (abs_sparse, sparse_to_dense, empty_sparse). vdev runs that function too, by
//    redispatching to CPU's entry with the vdev tensors: its inner operators reach vdev's kernels
//    (dense ones queued on the stream like any operator);
//  * own: CUDA has a kernel of its own. vdev runs CPU's kernel on CPU views of the device memory:
//    queued when its results are dense tensors of sizes known on the host
//    (layouts/queued_products.h: sparse x dense products, dense + sparse), otherwise on the calling
//    thread after waiting for the stream, which is reported in the sync debug mode
//    (layouts/layout_host_run.h): the output of coalesce, sparse + sparse and the like has a size
//    that depends on values, and CUDA synchronizes for those too;
//  * cpu_only: CUDA has none: what CUDA runs instead (a composite) runs, else vdev raises
//    NotImplementedError at the call, naming the operator and saying why (missing_kernel);
//  * cuda_only: CPU has no kernel vdev could run: the same.
// Quantized operators are the exception to "shared": their shared native functions end in
// DispatchStubs for the tensor's device type (quantize, dequantize, copy), which only CPU's and
// CUDA's builds fill; all but the metadata-only ones run CPU's kernel on CPU views.
//
// Thread rules: kernels run on the dispatching thread.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/op_registration/adaption.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cstring>
#include <optional>
#include <string>

#include "backend/checks/device_rules.h"
#include "backend/common/sync_debug.h"
#include "backend/common/vdev_device.h"
#include "backend/layouts/layout_host_run.h"
#include "backend/layouts/queued_products.h"
#include "backend/layouts/queued_quantized.h"

namespace vdev::backend {
namespace {

enum class Layout { kSparse, kSparseCompressed, kQuantized };
enum class How { kShared, kOwn, kCpuOnly, kCudaOnly };
struct LayoutKernel {
  Layout layout;
  const char* name;
  How how;
};
constexpr LayoutKernel kLayoutKernels[] = {
#include "layout_kernels.inc"
};

// Shared sparse native functions that end in a DispatchStub for the tensor's device type, which
// only CPU's and CUDA's builds fill (SparseTensor.cpp: sparse_mask_intersection_out_stub,
// sparse_mask_projection_out_stub): they run CPU's function on CPU views instead.
constexpr const char* kSharedSparseWithStubs[] = {"sparse_mask", "_sparse_mask_projection"};

// Quantized operators whose shared native function only reads or makes metadata (and allocates):
// safe to run as CUDA does. Every other quantized operator computes through DispatchStubs.
constexpr const char* kQuantizedMetadataOperators[] = {
    "_empty_affine_quantized",
    "_empty_per_channel_affine_quantized",
    "_reshape_alias",
    "as_strided",
    "empty.memory_format",
    "empty_like",
    "empty_quantized",
    "empty_strided",
    "q_per_channel_axis",
    "q_per_channel_scales",
    "q_per_channel_zero_points",
    "q_scale",
    "q_zero_point",
    "qscheme",
    "set_.source_Storage_storage_offset",
    "squeeze",
    "squeeze.dim",
    "squeeze.dims",
    "unfold",
    "unsqueeze",
    "view",
};

c10::DispatchKey cpu_key_of(Layout layout) {
  switch (layout) {
    case Layout::kSparse:
      return c10::DispatchKey::SparseCPU;
    case Layout::kSparseCompressed:
      return c10::DispatchKey::SparseCsrCPU;
    default:
      return c10::DispatchKey::QuantizedCPU;
  }
}

const char* layout_name(c10::DispatchKey cpu_key) {
  switch (cpu_key) {
    case c10::DispatchKey::SparseCPU:
      return "sparse COO";
    case c10::DispatchKey::SparseCsrCPU:
      return "sparse compressed";
    default:
      return "quantized";
  }
}

std::string operator_name(const c10::OperatorHandle& op) {
  const c10::OperatorName& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// CUDA's device rule for the call (checks/device_rules.h); the device it runs on. Copies take
// their source from any device: they run on the vdev one, the destination's if both are.
std::optional<c10::Device> checked_device(const c10::OperatorHandle& op,
                                          const torch::jit::Stack& stack) {
  const std::string& name = op.schema().name();
  if (name == "aten::copy_" || name == "aten::copy_sparse_to_sparse_") {
    const at::Tensor& self = stack[stack.size() - 3].toTensor();
    const at::Tensor& src = stack[stack.size() - 2].toTensor();
    return self.device().type() == kVdev ? self.device() : src.device();
  }
  // A factory's device= names where its result lives; torchgen's device check covers only the
  // tensor arguments (empty_quantized(sizes, qtensor on vdev:0, device=vdev:1) is valid on CUDA).
  // Its tensor arguments are checked among themselves, as torchgen's wrapper does
  // (_sparse_coo_tensor_with_dims_and_tensors of indices on vdev:0 and values on vdev:1).
  const c10::FunctionSchema& schema = op.schema();
  const std::size_t first = stack.size() - schema.arguments().size();
  std::optional<c10::Device> factory_device;
  for (std::size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::IValue& v = stack[first + i];
    if (v.isDevice() && v.toDevice().type() == kVdev) factory_device = v.toDevice();
  }
  if (!factory_device) return check_operator_devices(op, stack);
  std::optional<c10::Device> common;
  const std::string method = "wrapper_" + schema.name();
  for (std::size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::IValue& v = stack[first + i];
    if (v.isTensor() && v.toTensor().defined()) {
      c10::impl::check_and_update_common_device(common, v.toTensor(), method.c_str(),
                                                schema.arguments()[i].name().c_str());
    }
  }
  return factory_device;
}

// The shared native function: CPU's entry with the vdev tensors, under a guard for their device.
// A shared function that reaches a DispatchStub vdev does not fill (one not yet known to
// kSharedSparseWithStubs) would end in ATen's internal assert: it becomes NotImplementedError
// naming the operator.
template <c10::DispatchKey CpuKey>
void shared_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::OptionalDeviceGuard guard(checked_device(op, *stack));
  try {
    op.redispatchBoxed(c10::DispatchKeySet(CpuKey), stack);
  } catch (const c10::Error& e) {
    if (std::string(e.what()).find("DispatchStub: missing kernel") == std::string::npos) throw;
    TORCH_CHECK_NOT_IMPLEMENTED(false, "Could not run '", op.schema().name(), "' (",
                                operator_name(op), ") on ", kVdev,
                                ": its native function calls a DispatchStub that has no vdev "
                                "kernel (a gap in torch_vdev's ops/layout_kernels.cpp)");
  }
}

// CPU's kernel on CPU views: queued when its results allow, else on the host.
void own_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::optional<c10::Device> device = checked_device(op, *stack);
  TORCH_CHECK(device.has_value(), operator_name(op), ": expected a vdev tensor argument");
  const c10::DeviceGuard guard(*device);
  if (try_queue_layout_product(op, stack, *device) || try_queue_quantized(op, stack, *device)) {
    return;
  }
  note_synchronizing_operation(op.schema().name().c_str(), device->index());
  run_layout_op_on_host(op, stack, *device);
}

// Operators no kernel and no composite covers for the layout on vdev; the message says why.
template <c10::DispatchKey CpuKey>
void missing_kernel(const c10::OperatorHandle& op, torch::jit::Stack*) {
  const std::string name = operator_name(op);
  const std::string unqualified = name.substr(
      name.find("::") == std::string::npos ? 0 : name.find("::") + 2);  // the table's names
  const bool aten = name.rfind("aten::", 0) == 0;
  // Outside aten (quantized::add, ...) vdev registers nothing; CUDA may (cuDNN's quantized ops).
  const char* why = aten ? "neither CPU nor CUDA has a kernel for this layout"
                         : "vdev runs only aten operators on this layout";
  for (const LayoutKernel& k : kLayoutKernels) {
    if (!aten || unqualified != k.name || CpuKey != cpu_key_of(k.layout)) continue;
    if (k.how == How::kCpuOnly) why = "CUDA has no kernel for it either (only CPU has one)";
    if (k.how == How::kCudaOnly) why = "only CUDA has a kernel for it, and vdev runs CPU's kernels";
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, "Could not run '", op.schema().name(), "' (", name, ") with ",
                              layout_name(CpuKey), " tensors on ", kVdev, ": ", why);
}

template <std::size_t N>
bool listed(const char* const (&names)[N], const char* name) {
  for (const char* m : names) {
    if (std::strcmp(m, name) == 0) return true;
  }
  return false;
}

template <c10::DispatchKey CpuKey>
void register_layout(torch::Library& m, Layout layout) {
  for (const LayoutKernel& k : kLayoutKernels) {
    if (k.layout != layout) continue;
    How how = k.how;
    if (how == How::kShared &&
        (layout == Layout::kQuantized ? !listed(kQuantizedMetadataOperators, k.name)
                                      : listed(kSharedSparseWithStubs, k.name))) {
      how = How::kOwn;
    }
    switch (how) {
      case How::kShared:
        m.impl(k.name, torch::CppFunction::makeFromBoxedFunction<&shared_kernel<CpuKey>>());
        break;
      case How::kOwn:
        m.impl(k.name, torch::CppFunction::makeFromBoxedFunction<&own_kernel>());
        break;
      case How::kCpuOnly:   // CUDA's composite (if any) runs, else missing_kernel says why
      case How::kCudaOnly:  // CPU has nothing to run: the same
        break;
    }
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  register_layout<c10::DispatchKey::SparseCPU>(m, Layout::kSparse);
}
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  register_layout<c10::DispatchKey::SparseCsrCPU>(m, Layout::kSparseCompressed);
}
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  register_layout<c10::DispatchKey::QuantizedCPU>(m, Layout::kQuantized);
  // copy_ has no quantized entry (CompositeExplicitAutograd's copy_ ends in copy_stub for the
  // device type): CPU's copy_ on the views quantizes, requantizes or copies as on CUDA.
  m.impl("copy_", torch::CppFunction::makeFromBoxedFunction<&own_kernel>());
}

// Dense-key operators with sparse results: CPU and CUDA share these native functions
// (dense_to_sparse, ..., built on nonzero and indexing, which synchronizes where CUDA's does;
// _embedding_bag_backward, whose result is sparse for EmbeddingBag(sparse=True)). The executor
// would plan them with a dense output.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"_to_sparse", "_to_sparse.sparse_dim", "_to_sparse_csr", "_to_sparse_csc", "_to_sparse_bsr",
        "_to_sparse_bsc", "_embedding_bag_backward"}) {
    m.impl(name,
           torch::CppFunction::makeFromBoxedFunction<&shared_kernel<c10::DispatchKey::CPU>>());
  }
}

// The operators that make quantized tensors from dense ones: CPU, CUDA share them, and they end
// in DispatchStubs (AffineQuantizer.cpp); CPU's kernel runs on views.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"quantize_per_tensor", "quantize_per_tensor.tensor_qparams", "quantize_per_tensor_dynamic",
        "quantize_per_channel", "_make_per_tensor_quantized_tensor",
        "_make_per_channel_quantized_tensor"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&own_kernel>());
  }
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(
      torch::CppFunction::makeFromBoxedFunction<&missing_kernel<c10::DispatchKey::SparseCPU>>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(
      torch::CppFunction::makeFromBoxedFunction<&missing_kernel<c10::DispatchKey::SparseCsrCPU>>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(
      torch::CppFunction::makeFromBoxedFunction<&missing_kernel<c10::DispatchKey::QuantizedCPU>>());
}

}  // namespace vdev::backend
