#include "backend/checks/nondeterministic_alerts.h"

#include <ATen/Context.h>
#include <ATen/core/Reduction.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <string_view>
#include <unordered_map>

namespace vdev::backend {
namespace {

// An operator's arguments by name, as the dispatcher passed them.
class Args {
 public:
  Args(const c10::FunctionSchema& schema, const torch::jit::Stack& stack)
      : schema_(schema), first_(stack.size() - schema.arguments().size()), stack_(stack) {}

  const c10::IValue& operator[](std::string_view name) const {
    const std::optional<int> i = schema_.argumentIndexWithName(name);
    TORCH_INTERNAL_ASSERT(i.has_value(), "no argument ", name, " in ", schema_);
    return stack_[first_ + static_cast<std::size_t>(*i)];
  }

  bool has(std::string_view name) const { return schema_.argumentIndexWithName(name).has_value(); }

  const c10::OperatorName& name() const { return schema_.operator_name(); }

 private:
  const c10::FunctionSchema& schema_;
  std::size_t first_;
  const torch::jit::Stack& stack_;
};

// The caller string CUDA's kernel passes to alertNotDeterministic, or nullptr where it does not
// alert for these arguments.
using Rule = const char* (*)(const Args&);

bool index_is_empty(const Args& a) { return a["index"].toTensor().numel() == 0; }

// Rules shared by an operator's functional and in-place names.
const char* median_with_indices(const Args& a) {
  return a.has("dim") ? "median CUDA with indices output" : nullptr;
}

const char* scatter_with_reduce(const Args& a) {  // reduce is "add" or "multiply"
  if (!a.has("reduce") || !a.has("src") || index_is_empty(a)) return nullptr;
  const bool integral =
      at::isIntegralType(a["self"].toTensor().scalar_type(), /*includeBool=*/true);
  return a["reduce"].toStringRef() == "multiply" || integral ? "scatter_reduce_cuda_kernel"
                                                             : nullptr;
}

const char* scatter_reduce_prod(const Args& a) {
  return a["reduce"].toStringRef() == "prod" && !index_is_empty(a) ? "scatter_reduce_cuda_prod_"
                                                                   : nullptr;
}

// Decided by ATen's CUDA sources (aten/src/ATen/native/cuda/ unless said otherwise); each entry
// names the kernel file. Operators are matched by name; the overloads listed in the comments all
// reach the same kernel.
const std::unordered_map<std::string, Rule>& rules() {
  static const auto* table = new std::unordered_map<std::string, Rule>{
      // AdaptiveAveragePooling.cu, AdaptiveAveragePooling3d.cu, AdaptiveMaxPooling2d.cu
      {"aten::_adaptive_avg_pool2d_backward",
       [](const Args&) -> const char* { return "adaptive_avg_pool2d_backward_cuda"; }},
      {"aten::_adaptive_avg_pool3d_backward",
       [](const Args&) -> const char* { return "adaptive_avg_pool3d_backward_cuda"; }},
      {"aten::adaptive_avg_pool3d_backward",  // .grad_input
       [](const Args&) -> const char* { return "adaptive_avg_pool3d_backward_out_cuda"; }},
      {"aten::adaptive_max_pool2d_backward",  // and .grad_input
       [](const Args&) -> const char* { return "adaptive_max_pool2d_backward_cuda"; }},
      // AveragePool3d.cu, FractionalMaxPool2d.cu, FractionalMaxPool3d.cu
      {"aten::avg_pool3d_backward",
       [](const Args&) -> const char* { return "avg_pool3d_backward_cuda"; }},
      {"aten::fractional_max_pool2d_backward",
       [](const Args&) -> const char* { return "fractional_max_pool2d_backward_cuda"; }},
      {"aten::fractional_max_pool3d_backward",
       [](const Args& a) -> const char* {
         return a.name().overload_name.empty() ? "fractional_max_pool3d_backward_cuda"
                                               : "fractional_max_pool3d_backward_out_cuda";
       }},
      // MaxUnpooling.cu (CPU's kernel alerts with the same string)
      {"aten::max_unpool2d",
       [](const Args&) -> const char* { return "max_unpooling2d_forward_out"; }},
      {"aten::max_unpool3d",
       [](const Args&) -> const char* { return "max_unpooling3d_forward_out"; }},
      // ReflectionPad.cu: 1d and 3d only (2d has a deterministic backward kernel). Replication
      // padding is not listed: F.pad decomposes it for CUDA tensors in deterministic mode.
      {"aten::reflection_pad1d_backward",
       [](const Args&) -> const char* { return "reflection_pad1d_backward_out_cuda"; }},
      {"aten::reflection_pad3d_backward",
       [](const Args&) -> const char* { return "reflection_pad3d_backward_out_cuda"; }},
      // UpSampleLinear1d.cu, UpSampleBilinear2d.cu, UpSampleBicubic2d.cu, UpSampleTrilinear3d.cu
      // (F.interpolate decomposes bilinear and trilinear for every non-CPU tensor, vdev's too)
      {"aten::upsample_linear1d_backward",
       [](const Args&) -> const char* { return "upsample_linear1d_backward_out_cuda"; }},
      {"aten::upsample_bilinear2d_backward",
       [](const Args&) -> const char* { return "upsample_bilinear2d_backward_out_cuda"; }},
      {"aten::_upsample_bilinear2d_aa_backward",
       [](const Args&) -> const char* { return "upsample_bilinear2d_aa_backward_out_cuda"; }},
      {"aten::_upsample_bicubic2d_aa_backward",
       [](const Args&) -> const char* { return "upsample_bicubic2d_aa_backward_out_cuda"; }},
      {"aten::upsample_bicubic2d_backward",
       [](const Args&) -> const char* { return "upsample_bicubic2d_backward_out_cuda"; }},
      {"aten::upsample_trilinear3d_backward",
       [](const Args&) -> const char* { return "upsample_trilinear3d_backward_out_cuda"; }},
      // NLLLoss2d.cu: the forward, with a reduction
      {"aten::nll_loss2d_forward",
       [](const Args& a) -> const char* {
         return a["reduction"].toInt() != at::Reduction::None
                    ? "nll_loss2d_forward_out_cuda_template"
                    : nullptr;
       }},
      // LossCTC.cu (and .Tensor)
      {"aten::_ctc_loss_backward",
       [](const Args&) -> const char* { return "ctc_loss_backward_gpu"; }},
      // EmbeddingBag.cu: mode max only. vdev queues _embedding_bag_backward whole (its kernel,
      // _embedding_bag_backward_symint, is CUDA's too and calls _embedding_bag_dense_backward).
      {"aten::_embedding_bag_dense_backward",
       [](const Args& a) -> const char* {
         return a["mode"].toInt() == 2 ? "embedding_bag_backward_cuda_max" : nullptr;
       }},
      {"aten::_embedding_bag_backward",
       [](const Args& a) -> const char* {
         return a["mode"].toInt() == 2 ? "embedding_bag_backward_cuda_max" : nullptr;
       }},
      // SummaryOps.cu
      {"aten::histc",
       [](const Args& a) -> const char* {
         return at::isFloatingType(a["self"].toTensor().scalar_type())
                    ? "_histc_cuda with floating point input"
                    : nullptr;
       }},
      {"aten::bincount",
       [](const Args& a) -> const char* {
         const c10::IValue& w = a["weights"];
         return !w.isNone() && w.toTensor().defined() ? "_bincount_cuda" : nullptr;
       }},
      // Sorting.cpp: the forms that return indices (.dim is CompositeExplicitAutograd over
      // .dim_values, which reaches vdev; the full reductions have no "dim" argument)
      {"aten::median", &median_with_indices},
      {"aten::nanmedian", &median_with_indices},
      // GridSampler.cu
      {"aten::grid_sampler_2d_backward",
       [](const Args&) -> const char* { return "grid_sampler_2d_backward_cuda"; }},
      {"aten::grid_sampler_3d_backward",
       [](const Args&) -> const char* { return "grid_sampler_3d_backward_cuda"; }},
      // TensorAdvancedIndexing.cpp: put_ alerts for a CUDA tensor whatever `accumulate` is (put,
      // CompositeExplicitAutograd, and take's backward reach it through put_)
      {"aten::put_", [](const Args&) -> const char* { return "put_"; }},
      // Indexing.cu: every reduction
      {"aten::index_reduce", [](const Args&) -> const char* { return "index_reduce_cuda"; }},
      {"aten::index_reduce_", [](const Args&) -> const char* { return "index_reduce_cuda"; }},
      // ScatterGatherKernel.cu, reached from scatter_impl (TensorAdvancedIndexing.cpp), which
      // takes a deterministic index_put path instead for sum and mean of non-integral tensors.
      {"aten::scatter", &scatter_with_reduce},  // .reduce, .reduce_out (a src tensor)
      {"aten::scatter_", &scatter_with_reduce},
      {"aten::scatter_reduce", &scatter_reduce_prod},  // .two, .two_out
      {"aten::scatter_reduce_", &scatter_reduce_prod},
  };
  return *table;
}

}  // namespace

void alert_where_cuda_is_nondeterministic(const c10::OperatorHandle& op,
                                          const torch::jit::Stack& stack) {
  if (C10_LIKELY(!at::globalContext().deterministicAlgorithms())) return;
  const auto& table = rules();
  auto rule = table.find(op.schema().name());
  if (rule == table.end()) return;
  if (const char* caller = rule->second(Args(op.schema(), stack))) {
    at::globalContext().alertNotDeterministic(caller);
  }
}

}  // namespace vdev::backend
