#include "backend/common/device_asserts.h"

#include <string_view>

#include "runtime/device_assert.h"

namespace vdev::backend {
namespace {

struct DeviceAssert {
  std::string_view task;   // the operator's task name
  std::string_view words;  // in CPU's error for the condition CUDA's kernel asserts
};

// CUDA's kernels with CUDA_KERNEL_ASSERT on the condition (aten/src/ATen/native/cuda/, read at
// v2.6.0; an _assert_async on a device tensor is one too). An operator may have several entries.
constexpr DeviceAssert kDeviceAsserts[] = {
    // Indexing.cu:1369/1422 (indexSelectLargeIndex / SmallIndex); embedding is index_select.
    {"aten::index_select", "index out of range in self"},
    {"aten::embedding", "index out of range in self"},
    // Indexing.cu:875/934 (indexFuncLargeIndex / SmallIndex).
    {"aten::index_add", "index out of range in self"},
    {"aten::index_add", "is out of bounds for dimension"},
    {"aten::index_add_", "index out of range in self"},
    {"aten::index_add_", "is out of bounds for dimension"},
    // IndexKernel.cu:176 (index_copy), :137 (index_fill), :94 (index, index_put_; with
    // accumulate, Indexing.cu:396's _assert_async).
    {"aten::index_copy", "is out of bounds for dimension"},
    {"aten::index_copy_", "is out of bounds for dimension"},
    {"aten::index_fill", "is out of bounds for dimension"},
    {"aten::index_fill_", "is out of bounds for dimension"},
    {"aten::index", "is out of bounds for dimension"},
    {"aten::_index_put_impl_", "is out of bounds for dimension"},
    {"aten::index_put", "is out of bounds for dimension"},
    {"aten::index_put_", "is out of bounds for dimension"},
    // IndexKernel.cu:310 (take, put), :371 (masked_scatter's source too short).
    {"aten::take", "out of range: tried to access index"},
    {"aten::put", "out of range: tried to access index"},
    {"aten::put_", "out of range: tried to access index"},
    {"aten::masked_scatter", "Number of elements of source < number of ones in mask"},
    {"aten::masked_scatter_", "Number of elements of source < number of ones in mask"},
    // ScatterGatherKernel.cu:144/365; one_hot on CUDA (and vdev) is scatter_ unchecked.
    {"aten::gather", "is out of bounds for dimension"},
    {"aten::scatter", "is out of bounds for dimension"},
    {"aten::scatter_", "is out of bounds for dimension"},
    {"aten::scatter_add", "is out of bounds for dimension"},
    {"aten::scatter_add_", "is out of bounds for dimension"},
    {"aten::scatter_reduce", "is out of bounds for dimension"},
    {"aten::scatter_reduce_", "is out of bounds for dimension"},
    // Loss.cu:164-169 (nll_loss forward and backward), NLLLoss2d.cu:73/106/195, :94-95
    // (binary_cross_entropy), MultiMarginLoss.cu:33.
    {"aten::nll_loss_forward", "is out of bounds."},
    {"aten::nll_loss_backward", "is out of bounds."},
    {"aten::nll_loss2d_forward", "is out of bounds."},
    {"aten::nll_loss2d_backward", "is out of bounds."},
    {"aten::binary_cross_entropy", "all elements of input should be between 0 and 1"},
    {"aten::binary_cross_entropy", "all elements of target should be between 0 and 1"},
    {"aten::multi_margin_loss", "target out of range"},
    // MultinomialKernel.cu:60/66/112; a single sample: Distributions.cpp:589-597's _assert_async.
    {"aten::multinomial", "probability tensor contains either `inf`, `nan` or element < 0"},
    {"aten::multinomial", "invalid multinomial distribution"},
    // DistributionTemplates.h:592-607 (bernoulli with a tensor p), Distributions.cu:50.
    {"aten::bernoulli_", "p_in >= 0 && p_in <= 1"},
    {"aten::bernoulli", "p_in >= 0 && p_in <= 1"},
    {"aten::poisson", "invalid Poisson rate, expected rate to be non-negative"},
    // EmbeddingBag.cu:89/140 (an index past the table; a negative one reads out of bounds, an
    // illegal address, sticky too). Its offsets checks are CPU's only.
    {"aten::_embedding_bag", "idx >= 0 && idx < num_embeddings"},
    {"aten::_embedding_bag", "which is not in the valid range"},
    {"aten::_embedding_bag_forward_only", "idx >= 0 && idx < num_embeddings"},
    {"aten::_embedding_bag_forward_only", "which is not in the valid range"},
    // MaxUnpooling.cu:47/69.
    {"aten::max_unpool2d", "Found an invalid max index"},
    {"aten::max_unpool3d", "Found an invalid max index"},
    // TensorCompare.cu:110-117 (CUDA_KERNEL_ASSERT_MSG).
    {"aten::_assert_async", "Expected Tensor with single nonzero value"},
    // .msg with the caller's own message is missed: its numel checks are the host's on CUDA too
    // ("Boolean value of Tensor with no values is ambiguous"), and a message can say anything.
};

// Inductor's index check in a compiled kernel (a Triton device_assert on CUDA).
constexpr std::string_view kCompiledIndexCheck = "index out of bounds: ";

bool is_device_assert(const char* task, vdev::rt::ErrorKind kind, const char* what) {
  if (task == nullptr || what == nullptr) return false;
  if (kind == vdev::rt::ErrorKind::kOutOfMemory || kind == vdev::rt::ErrorKind::kComm) return false;
  const std::string_view name(task), message(what);
  for (const DeviceAssert& a : kDeviceAsserts) {
    if (a.task == name && message.find(a.words) != std::string_view::npos) return true;
  }
  return message.find(kCompiledIndexCheck) != std::string_view::npos &&
         name.substr(0, 6) != "aten::";
}

}  // namespace

void install_device_assert_classifier() {
  vdev::rt::set_device_assert_classifier(&is_device_assert);
}

}  // namespace vdev::backend
