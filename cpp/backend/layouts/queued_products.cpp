#include "backend/layouts/queued_products.h"

#include <ATen/ExpandUtils.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_sparse_compressed_tensor_unsafe.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/result_type.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <optional>
#include <utility>
#include <vector>

#include "backend/common/cpu_alias.h"
#include "backend/common/schema_arguments.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/common/tensor_args.h"
#include "backend/layouts/layout_views.h"

namespace vdev::backend {
namespace {

// A vdev tensor of any layout captured on the host without allocating, made into its CPU view on
// the worker (the same idea as AliasSpec, common/cpu_alias.h, for sparse tensors' members).
struct LayoutSpec {
  c10::Layout layout = c10::kStrided;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::SmallVector<int64_t, 5> sizes;
  int64_t sparse_dim = 0, dense_dim = 0;
  bool coalesced = false;
  std::array<AliasSpec, 3> members;  // strided: [0]; COO: indices, values; compressed: all three

  static LayoutSpec of(const at::Tensor& t) {
    LayoutSpec s;
    s.layout = t.layout();
    s.dtype = t.scalar_type();
    s.sizes.assign(t.sizes().begin(), t.sizes().end());
    const std::vector<at::Tensor> members = dense_members(t);
    for (std::size_t i = 0; i < members.size(); ++i) s.members[i] = AliasSpec::of(members[i]);
    if (s.layout == c10::kSparse) {
      const auto* impl = at::sparse::get_sparse_impl(t);
      s.sparse_dim = impl->sparse_dim();
      s.dense_dim = impl->dense_dim();
      s.coalesced = impl->coalesced();
    }
    return s;
  }

  at::Tensor make() const {
    const c10::Device cpu(c10::kCPU);
    if (layout == c10::kStrided) return members[0].make();
    if (layout == c10::kSparse) {
      return at::_sparse_coo_tensor_with_dims_and_tensors(
          sparse_dim, dense_dim, sizes, members[0].make(), members[1].make(),
          at::TensorOptions().dtype(dtype).layout(c10::kSparse).device(cpu), coalesced);
    }
    return at::_sparse_compressed_tensor_unsafe(members[0].make(), members[1].make(),
                                                members[2].make(), sizes, dtype, layout, cpu,
                                                std::nullopt);
  }
};

// The dtypes whose products are queued: every CPU kernel below supports them, so the task cannot
// fail on the dtype (other dtypes run on the host, where CPU's error, if any, comes at the call).
bool queued_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kComplexFloat || t == at::kComplexDouble;
}

bool dense(const at::Tensor& t) { return t.layout() == c10::kStrided && !t.is_quantized(); }

// A 2-D sparse matrix CPU multiplies with a dense one on every path: COO with two sparse
// dimensions, or CSR, without dense dimensions.
bool sparse_matrix(const at::Tensor& t) {
  if (t.dim() != 2) return false;
  if (t.layout() == c10::kSparse) return t.sparse_dim() == 2 && t.dense_dim() == 0;
  return t.layout() == c10::kSparseCsr && t.dense_dim() == 0;
}

// The call as it is queued: an operator (the out= form of a functional one) and its arguments.
struct Rewrite {
  c10::OperatorHandle op;
  std::vector<c10::IValue> args;
  std::optional<at::Tensor> fresh;  // the functional form's result, allocated here
  std::size_t written = 0;          // the argument the kernel writes (its result)
};

// Whether `out` can take a result of `sizes` without the kernel resizing it on the worker: it has
// them, or it has no elements and is resized here (silently, as CPU's resize_output does; called
// only once the call is known to be queued).
bool takes_result(const at::Tensor& out, c10::IntArrayRef sizes) {
  if (!dense(out)) return false;
  if (out.sizes() == sizes) return true;
  if (out.numel() != 0) return false;
  out.resize_(sizes);
  return true;
}

c10::OperatorHandle out_form(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "out");
}

// addmm(self, mat1, mat2, beta, alpha) with a sparse mat1: the (m, p) sizes of the result.
std::optional<std::array<int64_t, 2>> addmm_sizes(const at::Tensor& self, const at::Tensor& mat1,
                                                  const at::Tensor& mat2) {
  if (!dense(self) || !sparse_matrix(mat1) || !dense(mat2) || mat2.dim() != 2) return {};
  if (mat1.size(1) != mat2.size(0)) return {};
  const std::array<int64_t, 2> out{mat1.size(0), mat2.size(1)};
  if (self.dim() > 2 || !at::is_expandable_to(self.sizes(), out)) return {};
  return out;
}

// The queueable form of the call, or nullopt: the result's sizes must be known and CPU's kernel
// must accept the arguments (the conditions below are its checks).
std::optional<Rewrite> queueable(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                 std::size_t first) {
  const c10::OperatorName& name = op.schema().operator_name();
  const std::size_t n = stack.size() - first;
  auto tensor = [&](std::size_t i) -> const at::Tensor& { return stack[first + i].toTensor(); };
  std::vector<c10::IValue> args(stack.begin() + first, stack.end());
  const bool out_overload = name.overload_name == "out";
  if (name.name == "aten::add" && out_overload && n == 4) {  // dense + sparse into dense
    const at::Tensor &self = tensor(0), &other = tensor(1), &out = tensor(3);
    if (dense(self) && (other.layout() == c10::kSparse || other.layout() == c10::kSparseCsr) &&
        self.sizes() == other.sizes() && !out.is_same(other) && takes_result(out, self.sizes())) {
      return Rewrite{op, std::move(args), std::nullopt, 3};
    }
    return {};
  }
  if (name.name == "aten::addmm" || name.name == "aten::addmm_") {
    const auto sizes = addmm_sizes(tensor(0), tensor(1), tensor(2));
    if (!sizes) return {};
    if (name.name == "aten::addmm_") {
      if (tensor(0).sizes() != c10::IntArrayRef(*sizes)) return {};
      return Rewrite{out_form("aten::addmm"),
                     {args[0], args[1], args[2], args[3], args[4], args[0]},
                     std::nullopt,
                     5};
    }
    if (out_overload) {
      if (!takes_result(tensor(5), *sizes)) return {};
      return Rewrite{op, std::move(args), std::nullopt, 5};
    }
    at::Tensor fresh = at::empty(*sizes, tensor(0).options());
    args.emplace_back(fresh);
    return Rewrite{out_form("aten::addmm"), std::move(args), fresh, 5};
  }
  if (name.name == "aten::bmm") {  // sparse COO batch x dense batch
    const at::Tensor &self = tensor(0), &mat2 = tensor(1);
    if (self.layout() != c10::kSparse || self.dim() != 3 || self.sparse_dim() != 3 ||
        self.dense_dim() != 0 || !dense(mat2) || mat2.dim() != 3 || mat2.size(0) != self.size(0) ||
        mat2.size(1) != self.size(2)) {
      return {};
    }
    const std::array<int64_t, 3> sizes{self.size(0), self.size(1), mat2.size(2)};
    if (out_overload) {
      if (!takes_result(tensor(2), sizes)) return {};
      return Rewrite{op, std::move(args), std::nullopt, 2};
    }
    at::Tensor fresh = at::empty(sizes, mat2.options());
    args.emplace_back(fresh);
    return Rewrite{out_form("aten::bmm"), std::move(args), fresh, 2};
  }
  if (name.name == "aten::addmv" && out_overload) {  // sparse compressed matrix x dense vector
    const at::Tensor &self = tensor(0), &mat = tensor(1), &vec = tensor(2), &out = tensor(5);
    if (dense(self) && mat.layout() == c10::kSparseCsr && sparse_matrix(mat) && dense(vec) &&
        vec.dim() == 1 && vec.size(0) == mat.size(1) &&
        at::is_expandable_to(self.sizes(), {mat.size(0)}) && takes_result(out, {mat.size(0)})) {
      return Rewrite{op, std::move(args), std::nullopt, 5};
    }
  }
  return {};
}

// Whether the kernel reads its first argument: addmm and addmv ignore self when beta is zero
// (mm and mv are addmm/addmv of an uninitialised self with beta 0).
bool reads_self(const Rewrite& call) {
  const std::string& name = call.op.schema().name();
  if (name != "aten::addmm" && name != "aten::addmv") return true;
  const c10::IValue& beta = call.args[3];
  return !beta.isScalar() || beta.toScalar().toComplexDouble() != 0.0;
}

// sparse COO x 0-dim dense into a sparse COO out (sparse * 2, the optimizers' scalings): the
// result has the input's indices, so it is computed as CPU's and CUDA's kernels compute it
// (mul_out_sparse_zerodim in SparseTensorMath.cpp) with operators on the members, queued.
bool multiply_values_by_zero_dim(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                                 c10::Device device) {
  const c10::OperatorName& name = op.schema().operator_name();
  if (name.name != "aten::mul" || name.overload_name != "out") return false;
  const std::size_t first = stack->size() - 3;
  const at::Tensor& t = (*stack)[first].toTensor();
  const at::Tensor& value = (*stack)[first + 1].toTensor();
  const at::Tensor& r = (*stack)[first + 2].toTensor();
  if (t.layout() != c10::kSparse || r.layout() != c10::kSparse || !dense(value) ||
      value.dim() != 0 || t.device() != device || r.device() != device ||
      r.scalar_type() != at::result_type(t, value) || t.scalar_type() != r.scalar_type()) {
    return false;
  }
  if (r.is_same(t)) {
    r._values().mul_(value);
  } else {
    auto* impl = at::sparse::get_sparse_impl(r);
    impl->raw_resize_(t.sparse_dim(), t.dense_dim(), t.sizes());
    at::Tensor values = at::mul(t._values(), value);  // a CPU 0-dim value is a scalar here
    impl->set_indices_and_values_unsafe(t._indices().clone(), values);
    impl->set_coalesced(t.is_coalesced());
  }
  const c10::IValue out = (*stack)[first + 2];
  torch::jit::drop(*stack, 3);
  stack->push_back(out);
  return true;
}

}  // namespace

bool try_queue_layout_product(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                              c10::Device device) {
  if (multiply_values_by_zero_dim(op, stack, device)) return true;
  const std::size_t first = stack->size() - op.schema().arguments().size();
  // Every tensor on `device`, of one queued dtype, without lazy conjugation or negation (the
  // sparse kernels resolve those through operators the views would run on the worker).
  std::optional<c10::ScalarType> dtype;
  bool eligible = true;
  for (std::size_t i = first; i < stack->size() && eligible; ++i) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensorList() || v.isOptionalTensorList()) return false;
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.device() != device || t.is_conj() || t.is_neg() ||
        !queued_dtype(t.scalar_type()) || (dtype && *dtype != t.scalar_type())) {
      eligible = false;
    }
    dtype = t.scalar_type();
  }
  if (!eligible) return false;
  std::optional<Rewrite> call = queueable(op, *stack, first);
  if (!call) return false;

  // Captured on the host: CPU views are made on the worker from these.
  struct Arg {
    c10::IValue value;  // a non-tensor argument
    std::optional<LayoutSpec> tensor;
  };
  std::vector<Arg> args;
  args.reserve(call->args.size());
  vdev::rt::Stream& stream = current_runtime_stream(device.index());
  const char* name = intern_task_name(op.schema().name());
  // What the kernel reads and writes, for the launch observers only. Arguments it reads: every
  // tensor but the written one, and self only where beta is not zero (addmv(empty, A, v, beta=0)
  // is mv). The written one is read too when it is also a read argument (add_, addmm_).
  auto uses = [&](UseVisitor visit) {
    auto read = [&](std::size_t i) {
      return call->args[i].isTensor() && i != call->written && (i != 0 || reads_self(*call));
    };
    HeldUses found;
    for (std::size_t i = 0; i < call->args.size(); ++i) {
      if (!call->args[i].isTensor()) continue;
      const at::Tensor& t = call->args[i].toTensor();
      Access access = Access::kRead;
      if (i == call->written) {
        access = Access::kWrite;
        for (std::size_t j = 0; j < call->args.size(); ++j) {
          if (read(j) && call->args[j].toTensor().is_same(t)) access = Access::kReadWrite;
        }
      } else if (!read(i)) {
        continue;
      }
      for (at::Tensor& m : dense_members(t)) found.add(std::move(m), access);
    }
    found.visit(visit);
  };
  for (const c10::IValue& v : call->args) {
    if (v.isTensor()) {
      args.push_back({c10::IValue(), LayoutSpec::of(v.toTensor())});
    } else {
      args.push_back({v, std::nullopt});
    }
  }
  queue_launch(
      {.stream = stream, .name = name, .uses = LaunchUses::derived(uses)},
      [kernel = call->op, args = std::move(args)] {
        torch::jit::Stack cpu;
        cpu.reserve(args.size());
        for (std::size_t i = 0; i < args.size(); ++i) {
          const Arg& a = args[i];
          if (!a.tensor) {
            cpu.push_back(a.value);
            continue;
          }
          // The same strided view passed twice (addmm_'s self and out) is one CPU tensor, as on
          // CPU.
          std::optional<std::size_t> same;
          for (std::size_t j = 0; j < i && !same; ++j) {
            if (args[j].tensor && a.tensor->layout == c10::kStrided &&
                args[j].tensor->layout == c10::kStrided &&
                args[j].tensor->members[0].same_view(a.tensor->members[0])) {
              same = j;
            }
          }
          cpu.push_back(same ? cpu[*same] : c10::IValue(a.tensor->make()));
        }
        const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
        kernel.callBoxed(&cpu);
      });

  const c10::IValue result = call->fresh ? c10::IValue(*call->fresh) : call->args[call->written];
  torch::jit::drop(*stack, op.schema().arguments().size());
  stack->push_back(result);
  return true;
}

}  // namespace vdev::backend
