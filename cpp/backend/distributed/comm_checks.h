// vccl's checks made at the call (backend/distributed/comm_backend.h): whatever depends only on
// the arguments (not on other ranks, not on data) is checked on the host, before anything is
// queued: it raises with the type and message NCCL gives (or Gloo's, where vccl is stricter than
// NCCL because Gloo computes), and the group stays usable. Gloo's own checks would otherwise run
// inside the comm stream's task, fail it and break the group.
//
// Thread rules: stateless; the calling thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vdev::backend {

// Whether NCCL has the dtype (vccl moves float8 as bytes; complex as pairs of reals).
bool nccl_has(c10::ScalarType t);
// NCCL's check_gpu_single_tensor and getNcclDataType, for vdev.
void check_tensor(const at::Tensor& t, const char* name);
// ReduceOp's name ("SUM"), "(mixed)" for a batch of several.
const char* reduce_op_name(int64_t op);

// How Gloo runs a reduction NCCL defines: the op handed to Gloo, and whether the result is then
// divided by the group's size (integer AVG).
struct Reduction {
  c10d::ReduceOp op;
  bool divide = false;
};

// The reduce op against the dtype, at the call: NCCL's rules where NCCL has the op, Gloo's for the
// bitwise ops.
Reduction check_reduction(const c10d::ReduceOp& op, c10::ScalarType dtype, const char* name);

void check_list_size(std::size_t got, int expected, const char* what, const char* name);
void check_one_tensor(const std::vector<at::Tensor>& tensors, const char* name);
// Every tensor of `list` like `like` (dtype, size), as NCCL's collectives require.
void check_like(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* name);
// `big` holds `size` times the elements of `small`.
void check_world_multiple(const at::Tensor& big, const at::Tensor& small, int size,
                          const char* big_name, const char* small_name, const char* name);
void check_root_rank(int64_t root, int size, const char* name);
void check_root_rank_value(int64_t root, int size, const char* name);
// A send's or receive's peer and tag.
void check_peer(int peer, int tag, int rank, int size, const char* name);

}  // namespace vdev::backend
