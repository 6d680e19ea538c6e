// The task the express lane (executor/express.h) queues: what one call signature has in common,
// made once (ExpressSignature), and what each call adds (ExpressTask: its device addresses, the
// values of its Python numbers and coefficients).
//
// Why not an OperatorTask: that task captures every tensor's sizes and strides per call (an
// AliasSpec each, moved once more into the queued block), which was half of the lane's host time
// for a small operator (callgrind: ~1,900 of ~5,800 instructions per `x + y`). Everything but the
// addresses is in the lane's key, so it is the same for every call that finds the signature.
//
// Thread rules: an ExpressSignature is immutable once made and shared (std::shared_ptr) by the
// lane's table on the thread that made it and by the tasks queued from it; ExpressTask is built
// on the dispatching thread and runs on a stream worker (operator() does not change it: a captured
// graph replays it).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "backend/common/cpu_alias.h"
#include "backend/executor/launch_plan.h"
#include "backend/executor/unboxed_args.h"

namespace vdev::backend {

struct ExpressSignature {
  static constexpr std::size_t kMaxArgs = 5;
  enum class Kind : std::uint8_t {
    kDeviceTensor,  // a vdev tensor: `spec` (no address); the call gives the address
    kNumber,        // a Python number (a wrapped 0-dim CPU tensor): the call gives its value
    kCoefficient,   // alpha, value, weight: the call gives its value
    kValue,         // any other value, part of the key: `value`
  };
  struct Arg {
    Kind kind;
    AliasSpec spec;
    c10::IValue value;
  };

  // The signature of a call on `args` under `plan`, which returns a fresh output (the plan's one
  // return) or, `in_place`, its first argument; null when a Python number is not of one of
  // Python's kinds (double, int64, complex double, bool) or there are more than kMaxArgs
  // arguments (the lane then declines). `coefficient_args`: bit i set when argument i is one.
  static std::shared_ptr<const ExpressSignature> make(const c10::OperatorHandle& op,
                                                      std::shared_ptr<const LaunchPlan> plan,
                                                      c10::ArrayRef<UnboxedArg> args,
                                                      std::uint32_t coefficient_args,
                                                      bool in_place);
  ExpressSignature(const c10::OperatorHandle& op, std::shared_ptr<const LaunchPlan> plan)
      : op(op), plan(std::move(plan)) {}

  c10::OperatorHandle op;
  std::shared_ptr<const LaunchPlan> plan;
  c10::SmallVector<Arg, kMaxArgs> args;
  std::optional<AliasSpec> output;  // a fresh output's view (no address); none: in place
};

class ExpressTask {
 public:
  // A call of `sig`'s key on `args`, returning `fresh_output` (null: in place).
  ExpressTask(std::shared_ptr<const ExpressSignature> sig, c10::ArrayRef<UnboxedArg> args,
              const at::Tensor* fresh_output);

  // Runs the call (executor/operator_task.h's run_fresh / run_mutating).
  void operator()() const;

 private:
  std::shared_ptr<const ExpressSignature> sig_;
  std::array<void*, ExpressSignature::kMaxArgs> addresses_{};   // of kDeviceTensor arguments
  std::array<c10::IValue, ExpressSignature::kMaxArgs> values_;  // of kNumber / kCoefficient ones
  void* output_address_ = nullptr;
};

}  // namespace vdev::backend
