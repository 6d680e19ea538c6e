// What every rank of a vccl group must agree on for a collective (its fingerprint), and the check
// that they do, made on the comm stream before any data moves (backend/distributed/comm_backend.h).
//
// Thread rules: stateless; check_ranks_agree runs on the comm stream's worker.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vdev::backend {

// Op type, dtype, number of tensors and of elements of the tensors that must agree, reduce op and
// root rank (-1 where they do not apply).
constexpr std::size_t kPrintFields = 6;
using Fingerprint = std::array<int64_t, kPrintFields>;
enum PrintField : std::size_t { kType, kDtype, kTensors, kElements, kReduceOp, kRoot };

Fingerprint fingerprint(c10d::OpType type, const std::vector<at::Tensor>& agreeing,
                        int64_t reduce_op, int64_t root);
std::string describe(const Fingerprint& f);
// Every rank all-gathers its fingerprint and raises if any rank called something else.
void check_ranks_agree(c10d::Backend& gloo, const Fingerprint& mine, const char* name);

}  // namespace vdev::backend
