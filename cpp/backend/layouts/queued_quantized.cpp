#include "backend/layouts/queued_quantized.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/_empty_affine_quantized.h>
#include <ATen/ops/_empty_per_channel_affine_quantized.h>
#include <ATen/ops/dequantize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/int_repr.h>
#include <ATen/ops/quantize_per_tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/util/SmallVector.h>

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/common/cpu_alias.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/common/tensor_args.h"
#include "backend/layouts/layout_views.h"
#include "runtime/memory.h"

namespace vdev::backend {
namespace {

// A vdev quantized tensor captured on the host without allocating; made into its CPU view (the
// same bytes, sizes, strides and quantization) on the worker.
struct QuantizedSpec {
  void* base = nullptr;  // the kernel address of the storage's first byte
  std::size_t nbytes = 0;
  c10::SmallVector<int64_t, 5> sizes, strides;
  int64_t offset = 0;
  caffe2::TypeMeta dtype;
  at::QScheme qscheme = at::kPerTensorAffine;
  double scale = 1;
  int64_t zero_point = 0, axis = 0;
  AliasSpec scales, zero_points;  // per channel

  static QuantizedSpec of(const at::Tensor& t) {
    QuantizedSpec s;
    const c10::Storage& storage = t.storage();
    s.base = storage.data() == nullptr ? nullptr : vdev::rt::kernel_address(storage.data());
    s.nbytes = storage.nbytes();
    s.sizes.assign(t.sizes().begin(), t.sizes().end());
    s.strides.assign(t.strides().begin(), t.strides().end());
    s.offset = t.storage_offset();
    s.dtype = t.dtype();
    s.qscheme = t.qscheme();
    if (s.qscheme == at::kPerTensorAffine) {
      s.scale = t.q_scale();
      s.zero_point = t.q_zero_point();
    } else {
      s.axis = t.q_per_channel_axis();
      s.scales = AliasSpec::of(t.q_per_channel_scales());
      s.zero_points = AliasSpec::of(t.q_per_channel_zero_points());
    }
    return s;
  }

  at::Tensor make() const {
    const at::ScalarType st = c10::typeMetaToScalarType(dtype);
    at::QuantizerPtr q;
    if (qscheme == at::kPerTensorAffine) {
      q = at::make_per_tensor_affine_quantizer(scale, zero_point, st);
    } else if (qscheme == at::kPerChannelAffine) {
      q = at::make_per_channel_affine_quantizer(scales.make(), zero_points.make(), axis, st);
    } else {
      q = c10::make_intrusive<at::PerChannelAffineFloatQParamsQuantizer>(st, scales.make(),
                                                                         zero_points.make(), axis);
    }
    c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes,
                         at::DataPtr(base, c10::Device(c10::kCPU)), nullptr, false);
    auto impl = c10::make_intrusive<at::QTensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::QuantizedCPU), dtype, q);
    impl->set_sizes_and_strides(sizes, strides, offset);
    return at::Tensor(std::move(impl));
  }
};

// What the worker computes, from the input's CPU view, into the result's view.
enum class Kind { kQuantizePerTensor, kDequantize, kIntRepr, kClone };

bool supported_scheme(const at::Tensor& t) {
  const at::QScheme s = t.qscheme();
  return s == at::kPerTensorAffine || s == at::kPerChannelAffine ||
         s == at::kPerChannelAffineFloatQParams;
}

// The bytes of a CPU result copied into the device result's view: both have the input's sizes
// and memory format (the host allocated the result as CPU's kernel allocates its own).
void copy_bytes(const at::Tensor& cpu_result, const at::Tensor& view) {
  TORCH_INTERNAL_ASSERT(
      cpu_result.strides() == view.strides() && cpu_result.nbytes() == view.nbytes(),
      "vdev: a queued quantized result's layout differs from CPU's");
  if (cpu_result.nbytes() > 0) {
    std::memcpy(view.data_ptr(), cpu_result.data_ptr(), cpu_result.nbytes());
  }
}

}  // namespace

bool try_queue_quantized(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                         c10::Device device) {
  const c10::FunctionSchema& schema = op.schema();
  const std::string& name = schema.name();
  const std::string& overload = schema.overload_name();
  const std::size_t first = stack->size() - schema.arguments().size();
  const c10::IValue& arg0 = (*stack)[first];
  if (!arg0.isTensor()) return false;
  const at::Tensor& x = arg0.toTensor();
  if (!is_vdev_tensor(x) || x.device() != device || x.layout() != c10::kStrided || x.is_conj() ||
      x.is_neg()) {
    return false;
  }
  Kind kind;
  double scale = 0;
  int64_t zero_point = 0;
  at::ScalarType qdtype = at::kQInt8;
  at::Tensor result;
  const at::MemoryFormat format = x.suggest_memory_format();
  if (name == "aten::quantize_per_tensor" && overload.empty() && !x.is_quantized()) {
    kind = Kind::kQuantizePerTensor;
    scale = (*stack)[first + 1].toDouble();
    zero_point = (*stack)[first + 2].toInt();
    qdtype = (*stack)[first + 3].toScalarType();
    // CPU's checks of the dtypes, scale and zero point, at the call, on a one-element stand-in.
    at::quantize_per_tensor(at::zeros({1}, x.options().device(c10::kCPU)), scale, zero_point,
                            qdtype);
    result = at::_empty_affine_quantized(x.sizes(), x.options().dtype(qdtype), scale, zero_point,
                                         format);
  } else if (x.is_quantized() && supported_scheme(x)) {
    if (name == "aten::dequantize" && overload == "self") {
      kind = Kind::kDequantize;
      result = at::empty(x.sizes(), x.options().dtype(at::kFloat), format);
    } else if (name == "aten::int_repr" && overload.empty()) {
      kind = Kind::kIntRepr;
      result = at::empty(x.sizes(), x.options().dtype(c10::toUnderlying(x.scalar_type())), format);
    } else if (name == "aten::clone" && overload.empty() && (*stack)[first + 1].isNone() &&
               x.is_non_overlapping_and_dense()) {
      kind = Kind::kClone;
      // (Not empty_quantized: given a memory format, it passes it twice and raises.)
      result = x.qscheme() == at::kPerTensorAffine
                   ? at::_empty_affine_quantized(x.sizes(), x.options(), x.q_scale(),
                                                 x.q_zero_point(), format)
                   : at::_empty_per_channel_affine_quantized(
                         x.sizes(), x.q_per_channel_scales(), x.q_per_channel_zero_points(),
                         x.q_per_channel_axis(), x.options(), format);
    } else {
      return false;
    }
  } else {
    return false;
  }
  // CPU's clone keeps the strides of a dense tensor; the byte copy needs the device result to
  // have them too (a permuted tensor that is no memory format's runs on the host).
  if (kind == Kind::kClone && result.strides() != x.strides()) return false;

  vdev::rt::Stream& stream = current_runtime_stream(device.index());
  const char* task_name = intern_task_name(name);
  auto uses = [&](UseVisitor visit) {  // for the launch observers only
    HeldUses found;
    for (at::Tensor& m : dense_members(x)) found.add(std::move(m), Access::kRead);
    if (x.is_quantized() && x.qscheme() != at::kPerTensorAffine) {
      found.add(x.q_per_channel_scales(), Access::kRead);
      found.add(x.q_per_channel_zero_points(), Access::kRead);
    }
    for (at::Tensor& m : dense_members(result)) found.add(std::move(m), Access::kWrite);
    found.visit(visit);
  };
  std::optional<QuantizedSpec> in_q, out_q;
  std::optional<AliasSpec> in_dense, out_dense;
  if (x.is_quantized()) {
    in_q = QuantizedSpec::of(x);
  } else {
    in_dense = AliasSpec::of(x);
  }
  if (result.is_quantized()) {
    out_q = QuantizedSpec::of(result);
  } else {
    out_dense = AliasSpec::of(result);
  }
  queue_launch({.stream = stream,
                .name = task_name,
                .uses = LaunchUses::derived(uses),
                .elements = most_elements({&x, &result})},
               [kind, scale, zero_point, qdtype, in_q, out_q, in_dense, out_dense] {
                 const at::Tensor in = in_q ? in_q->make() : in_dense->make();
                 const at::Tensor out = out_q ? out_q->make() : out_dense->make();
                 switch (kind) {
                   case Kind::kQuantizePerTensor:
                     copy_bytes(at::quantize_per_tensor(in, scale, zero_point, qdtype), out);
                     break;
                   case Kind::kDequantize:
                     out.copy_(in.dequantize());
                     break;
                   case Kind::kIntRepr:
                     out.copy_(in.int_repr());
                     break;
                   case Kind::kClone:
                     copy_bytes(in.clone(), out);
                     break;
                 }
               });
  torch::jit::drop(*stack, schema.arguments().size());
  stack->emplace_back(std::move(result));
  return true;
}

}  // namespace vdev::backend
