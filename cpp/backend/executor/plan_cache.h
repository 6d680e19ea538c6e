// The cache of launch plans (backend/executor/launch_plan.h), keyed by operator call signature.
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

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <memory>
#include <string>

#include "backend/executor/launch_plan.h"

namespace vdev::backend {

// Writes into `key` the key for `op` applied to stack[first, first + n); false if the arguments
// cannot be keyed exactly. `key` is reused by the caller (a thread-local buffer: no allocation).
bool plan_cache_key(std::string& key, const c10::FunctionSchema& op, const torch::jit::Stack& stack,
                    std::size_t first, std::size_t n);
std::shared_ptr<const LaunchPlan> plan_cache_find(const std::string& key);
void plan_cache_store(const std::string& key, std::shared_ptr<const LaunchPlan> plan);

// The plan for `op` applied to stack[first, first + n): cached by its key, else made now (and
// cached, unless the arguments cannot be keyed).
std::shared_ptr<const LaunchPlan> find_or_make_plan(const c10::OperatorHandle& op,
                                                    const torch::jit::Stack& stack,
                                                    std::size_t first, std::size_t n);

// The key's encoding of one argument, appended to `key` (for keys of other caches: the express
// lane's, executor/express.h); append_value_key returns false for a kind it cannot describe.
void append_tensor_key(std::string& key, const at::Tensor& t);
// The global modes a plan depends on: deterministic algorithms, the default dtype.
void append_modes_key(std::string& key);
bool append_value_key(std::string& key, const c10::IValue& v);

}  // namespace vdev::backend
