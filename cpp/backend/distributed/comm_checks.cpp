#include "backend/distributed/comm_checks.h"

#include <torch/csrc/distributed/c10d/Utils.hpp>

#include "backend/common/vdev_device.h"

namespace vdev::backend {

// NCCL's data types (ncclDataType in torch 2.13's c10d/NCCLUtils.hpp), plus complex, which torch
// and NCCL view as pairs of reals. Gloo has the same types but float8: vccl moves float8 bytes as
// uint8 (alias_specs), as NCCL without float8 support does.
bool nccl_has(c10::ScalarType t) {
  switch (t) {
    case at::kChar:
    case at::kByte:
    case at::kFloat:
    case at::kDouble:
    case at::kInt:
    case at::kLong:
    case at::kHalf:
    case at::kBool:
    case at::kBFloat16:
    case at::kFloat8_e5m2:
    case at::kFloat8_e4m3fn:
    case at::kFloat8_e4m3fnuz:
    case at::kFloat8_e5m2fnuz:
    case at::kComplexHalf:
    case at::kComplexFloat:
    case at::kComplexDouble:
      return true;
    default:
      return false;
  }
}

// NCCL's check_gpu_single_tensor and getNcclDataType, for vdev.
void check_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.defined(), "vccl ", name, ": undefined tensor");
  TORCH_CHECK_VALUE(t.device().type() == kVdev && t.layout() == c10::kStrided, "vccl ", name,
                    ": tensors must be vdev and dense, got a ", t.device().type(), " ", t.layout(),
                    " tensor (use the gloo backend for CPU tensors)");
  TORCH_CHECK_VALUE(t.is_contiguous(t.suggest_memory_format()), "vccl ", name,
                    ": tensors must be contiguous, got one of sizes ", t.sizes(), " and strides ",
                    t.strides());
  TORCH_CHECK_TYPE(nccl_has(t.scalar_type()), "vccl ", name,
                   ": Input tensor data type is not supported for vccl process group: ",
                   t.scalar_type(), " (vccl has NCCL's data types)");
}

const char* reduce_op_name(int64_t op) {
  static constexpr const char* kNames[] = {"SUM",  "AVG", "PRODUCT", "MIN",        "MAX",
                                           "BAND", "BOR", "BXOR",    "PREMUL_SUM", "UNUSED"};
  return op >= 0 && op < 10 ? kNames[op] : "(mixed)";
}

// The reduce op against the dtype, at the call. NCCL's rules where NCCL has the op; Gloo's for the
// bitwise ops (Gloo only). Gloo would check these on its worker, inside the comm task.
Reduction check_reduction(const c10d::ReduceOp& op, c10::ScalarType dtype, const char* name) {
  const auto kind = op.op_;
  TORCH_CHECK_VALUE(kind != c10d::ReduceOp::PREMUL_SUM && kind != c10d::ReduceOp::UNUSED, "vccl ",
                    name, ": ReduceOp.", reduce_op_name(kind),
                    " is not supported; vccl (built on Gloo) has SUM, AVG, PRODUCT, MIN, MAX, "
                    "BAND, BOR and BXOR");
  // NCCL: "Unsupported Float8 type for NCCL reduction" (for the float8 types it cannot reduce);
  // Gloo has no float8 arithmetic at all.
  TORCH_CHECK(!c10::isFloat8Type(dtype), "vccl ", name,
              ": Unsupported Float8 type for vccl reduction: ", dtype,
              " (vccl reduces with Gloo, which has no float8 arithmetic; float8 tensors can be "
              "broadcast, gathered, scattered, exchanged and sent)");
  if (c10::isComplexType(dtype)) {
    TORCH_CHECK_VALUE(c10d::isComplexViewAsRealAllowed(op), "vccl ", name, ": ReduceOp.",
                      reduce_op_name(kind), " is not supported on complex tensors");
  }
  const bool bitwise =
      kind == c10d::ReduceOp::BAND || kind == c10d::ReduceOp::BOR || kind == c10d::ReduceOp::BXOR;
  TORCH_CHECK(!bitwise || c10::isIntegralType(dtype, /*includeBool=*/true), "vccl ", name,
              ": Cannot use ReduceOp.", reduce_op_name(kind), " with non-integral dtype ", dtype);
  if (dtype == at::kBool) {
    TORCH_CHECK_TYPE(kind != c10d::ReduceOp::AVG, "vccl ", name,
                     ": Cannot use ReduceOp.AVG with boolean inputs");
    // NCCL's mapping: a bool SUM is a MAX (a logical or); Gloo would add the bytes.
    if (kind == c10d::ReduceOp::SUM) return {c10d::ReduceOp(c10d::ReduceOp::MAX)};
  }
  if (kind == c10d::ReduceOp::AVG && c10::isIntegralType(dtype, /*includeBool=*/false)) {
    // NCCL's integer AVG is a sum divided by the group's size, rounded toward zero
    // (ncclDevSumPostDiv); Gloo's AVG divides in place, which fails for integers after the data
    // moved.
    return {c10d::ReduceOp(c10d::ReduceOp::SUM), true};
  }
  return {op};
}

void check_list_size(std::size_t got, int expected, const char* what, const char* name) {
  TORCH_CHECK_VALUE(got == static_cast<std::size_t>(expected), "vccl ", name, ": ", what,
                    " must hold world_size (", expected, ") tensors, got ", got);
}

void check_one_tensor(const std::vector<at::Tensor>& tensors, const char* name) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "vccl ", name, ": expects one tensor per process, got ",
                    tensors.size());
}

// NCCL's gather/scatter (ValueError) and Gloo's assertTypeAndSizesMatch: each tensor of `list`
// has `like`'s dtype and sizes.
void check_like(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* name) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    TORCH_CHECK_TYPE(list[i].scalar_type() == like.scalar_type(), "vccl ", name,
                     ": invalid tensor type at index ", i, " (expected ", like.scalar_type(),
                     ", got ", list[i].scalar_type(), ")");
    TORCH_CHECK_VALUE(list[i].sizes() == like.sizes(), "vccl ", name,
                      ": invalid tensor size at index ", i, " (expected ", like.sizes(), ", got ",
                      list[i].sizes(), ")");
  }
}

// An output and input that only need the same dtype and a number of elements (NCCL's
// all_gather_into_tensor and reduce_scatter_tensor): `big` has world_size times `small`'s.
void check_world_multiple(const at::Tensor& big, const at::Tensor& small, int size,
                          const char* big_name, const char* small_name, const char* name) {
  TORCH_CHECK_TYPE(big.scalar_type() == small.scalar_type(), "vccl ", name, ": the ", big_name,
                   " tensor must have the same type as the ", small_name, " tensor, got ",
                   big.scalar_type(), " and ", small.scalar_type());
  TORCH_CHECK_VALUE(big.numel() == small.numel() * size, "vccl ", name, ": the ", big_name,
                    " must have world_size (", size, ") times the ", small_name, "'s ",
                    small.numel(), " elements, got ", big.numel());
}

// Broadcast and reduce: NCCL's ncclInvalidArgument ("invalid root"), which torch raises as
// DistBackendError at the call; Gloo raises "invalid root rank" at the call.
void check_root_rank(int64_t root, int size, const char* name) {
  TORCH_CHECK_WITH(DistBackendError, root >= 0 && root < size, "vccl ", name,
                   ": invalid root rank: ", root, " (root should be in the 0..", size - 1,
                   " range)");
}

// Gather and scatter: ProcessGroupNCCL checks the root as Gloo does, with ValueError.
void check_root_rank_value(int64_t root, int size, const char* name) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "vccl ", name, ": invalid root rank: ", root,
                    " (root should be in the 0..", size - 1, " range)");
}

void check_peer(int peer, int tag, int rank, int size, const char* name) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size, "vccl ", name, ": invalid peer rank: ", peer,
                    " (the peer should be in the 0..", size - 1, " range)");
  // isend/irecv to this rank itself: NCCL runs them, Gloo has no pair to itself (its transport
  // fails the transfer), so vccl refuses them at the call.
  TORCH_CHECK_NOT_IMPLEMENTED(peer != rank, "vccl ", name, ": a ", name,
                              " with this rank itself (rank ", rank,
                              ") as the peer is not "
                              "supported: Gloo, which vccl runs on, has no pair to itself "
                              "(NCCL runs it)");
  // Gloo's checkTag: sends and receives are matched by tag.
  TORCH_CHECK(tag >= 0, "vccl ", name, ": Tag must be nonnegative, got ", tag);
}

}  // namespace vdev::backend
