// A cache of meta-kernel results for the operator executor (backend/async_op.cpp).
//
// Running an operator on meta tensors costs from a few to over a hundred microseconds (some meta
// kernels are Python registrations), far more than queueing it. Output metadata depends only on
// the operator and its arguments' metadata, so it is cached by a key made of the operator name,
// every tensor argument's location (vdev/cpu), dtype, sizes, strides and conj/neg bits, and the
// exact value of every other argument (doubles bit for bit). Arguments of a kind the key cannot
// describe exactly make the call uncacheable. A failed meta call is cached too (the operator is
// then declined at once). The cache is bounded: it is cleared when it grows past kMaxEntries.
//
// Thread rules: safe from any thread (one mutex).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vdev::backend {

// Metadata of one returned tensor (undefined: `defined` false).
struct MetaTensor {
  bool defined = false;
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

// One return: a tensor, a list of tensors, or None.
struct MetaReturn {
  enum Kind { Tensor, TensorList, None } kind = None;
  std::vector<MetaTensor> tensors;
};

// Everything the executor decides from an operator and its arguments' metadata, computed once per
// key: the meta kernel's outputs and what the schema says about them.
struct MetaResult {
  bool ok = false;  // false: run synchronously (not eligible, meta call failed, mixed returns)
  std::vector<MetaReturn> returns;
  std::vector<int> aliased;                   // per return: the argument it writes, or -1 (fresh)
  bool all_fresh = false;                     // every return is a fresh output
  std::vector<std::size_t> out_args;          // kwarg-only written tensor arguments (out= ops)
  std::optional<c10::OperatorHandle> out_op;  // out= overload for all-fresh single-tensor returns
  // Set (by a stream worker) once the out= kernel refused its outputs: the functional form plus a
  // copy is used from then on. Read on every launch without a lock.
  mutable std::atomic<bool> out_refused{false};
};

// Writes into `key` the key for `op` applied to stack[first, first + n); false if the arguments
// cannot be keyed exactly. `key` is reused by the caller (a thread-local buffer: no allocation).
bool meta_cache_key(std::string& key, const c10::FunctionSchema& op, const torch::jit::Stack& stack,
                    std::size_t first, std::size_t n);
std::shared_ptr<const MetaResult> meta_cache_find(const std::string& key);
void meta_cache_store(const std::string& key, std::shared_ptr<const MetaResult> result);

}  // namespace vdev::backend
