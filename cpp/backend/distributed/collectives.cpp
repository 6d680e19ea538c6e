// vccl's collectives (backend/distributed/comm_backend.h): each method checks its arguments at
// the call (comm_checks.h; tensors are checked one by one in submit()), then submits Gloo's method
// to run on CPU aliases of the device bytes on the communication stream.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>

#include <vector>

#include "backend/distributed/comm_backend.h"
#include "backend/distributed/comm_checks.h"

namespace vdev::backend {
namespace {

// Integer AVG: the sum Gloo left in `tensors`, divided by the group's size as NCCL does.
void divide_by(std::vector<at::Tensor>& tensors, int size) {
  for (at::Tensor& t : tensors) t.div_(size, "trunc");
}

// A call's reduce op and root go into the fingerprint: ranks that pass different ones raise.
template <typename S>
S reducing(S s, const c10d::ReduceOp& op) {
  s.reduce_op = static_cast<int64_t>(op.op_);
  return s;
}
template <typename S>
S rooted(S s, int64_t root) {
  s.root = root;
  return s;
}

}  // namespace

// ---- the collectives: checks, then Gloo's method on the aliases ------------------------------
// Each method checks its arguments at the call (see "checks made at the call" above); tensors are
// checked one by one in submit().

c10::intrusive_ptr<c10d::Work> CommBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  check_one_tensor(tensors, "broadcast");
  check_root_rank(opts.rootRank, size_, "broadcast");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "vccl broadcast: invalid root tensor: ", opts.rootTensor);
  return submit(
      rooted(Submission{c10d::OpType::BROADCAST, "c10d::broadcast", {tensors}, tensors, tensors},
             opts.rootRank),
      [opts](c10d::Backend& g, TensorLists& a) { return g.broadcast(a[0], opts); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  check_one_tensor(tensors, "allreduce");
  const Reduction r = check_reduction(opts.reduceOp, tensors[0].scalar_type(), "allreduce");
  Submission s =
      reducing(Submission{c10d::OpType::ALLREDUCE, "c10d::allreduce", {tensors}, tensors, tensors},
               opts.reduceOp);
  if (r.divide) s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    return g.allreduce(a[0], gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "vccl allreduce_coalesced: requires non-empty tensor list");
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_TYPE(t.scalar_type() == tensors[0].scalar_type(),
                     "vccl allreduce_coalesced: tensors must all have the same type, got ",
                     tensors[0].scalar_type(), " and ", t.scalar_type());
  }
  const Reduction r =
      check_reduction(opts.reduceOp, tensors[0].scalar_type(), "allreduce_coalesced");
  Submission s = reducing(Submission{c10d::OpType::ALLREDUCE_COALESCED,
                                     "c10d::allreduce_coalesced",
                                     {tensors},
                                     tensors,
                                     tensors},
                          opts.reduceOp);
  if (r.divide) s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    return g.allreduce_coalesced(a[0], gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  check_one_tensor(tensors, "reduce");
  check_root_rank(opts.rootRank, size_, "reduce");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "vccl reduce: invalid root tensor: ", opts.rootTensor);
  const Reduction r = check_reduction(opts.reduceOp, tensors[0].scalar_type(), "reduce");
  Submission s =
      rooted(reducing(Submission{c10d::OpType::REDUCE, "c10d::reduce", {tensors}, tensors, tensors},
                      opts.reduceOp),
             opts.rootRank);
  if (r.divide && getRank() == opts.rootRank) {
    s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  }
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    return g.reduce(a[0], gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1,
                    "vccl allgather: expects one input tensor and one output list per process");
  check_list_size(outputs[0].size(), size_, "the output list", "allgather");
  // Gloo gathers tensors of the input's size only (NCCL also gathers uneven ones).
  check_like(outputs[0], inputs[0], "allgather");
  TensorLists args{inputs};
  args.insert(args.end(), outputs.begin(), outputs.end());
  return submit({c10d::OpType::ALLGATHER, "c10d::allgather", std::move(args), outputs[0], inputs},
                [opts](c10d::Backend& g, TensorLists& a) {
                  TensorLists out(a.begin() + 1, a.end());
                  return g.allgather(out, a[0], opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  check_world_multiple(output, input, size_, "output", "input", "all_gather_into_tensor");
  return submit({c10d::OpType::_ALLGATHER_BASE,
                 "c10d::_allgather_base",
                 {{input, output}},
                 {output},
                 {input}},
                [opts](c10d::Backend& g, TensorLists& a) {
                  // NCCL needs only the element counts; Gloo also checks shapes: flat views.
                  at::Tensor out = a[0][1].view({-1}), in = a[0][0].view({-1});
                  return g._allgather_base(out, in, opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  // Gloo's checks of allgather_coalesced.
  TORCH_CHECK_VALUE(!inputs.empty(), "vccl allgather_coalesced: requires non-empty input list");
  check_list_size(outputs.size(), size_, "the output lists", "allgather_coalesced");
  for (const auto& list : outputs) {
    TORCH_CHECK_VALUE(list.size() == inputs.size(),
                      "vccl allgather_coalesced: invalid output size: (expected length ",
                      inputs.size(), ", got ", list.size(), ")");
    for (std::size_t i = 0; i < list.size(); ++i)
      check_like({list[i]}, inputs[i], "allgather_coalesced");
  }
  TensorLists args{inputs};
  args.insert(args.end(), outputs.begin(), outputs.end());
  std::vector<at::Tensor> flat;
  for (const auto& list : outputs) flat.insert(flat.end(), list.begin(), list.end());
  return submit({c10d::OpType::ALLGATHER_COALESCED, "c10d::allgather_coalesced", std::move(args),
                 std::move(flat), inputs},
                [opts](c10d::Backend& g, TensorLists& a) {
                  TensorLists out(a.begin() + 1, a.end());
                  return g.allgather_coalesced(out, a[0], opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "vccl allgather_into_tensor_coalesced: ",
                    "requires input/output tensor lists to have the same length, got ",
                    inputs.size(), " and ", outputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_world_multiple(outputs[i], inputs[i], size_, "output", "input",
                         "allgather_into_tensor_coalesced");
  }
  return submit({c10d::OpType::COALESCED,
                 "c10d::allgather_into_tensor_coalesced",
                 {inputs, outputs},
                 outputs,
                 inputs},
                [opts](c10d::Backend& g, TensorLists& a) {
                  // As _allgather_base: NCCL needs only element counts, so flat views.
                  std::vector<at::Tensor> in, out;
                  for (const at::Tensor& t : a[0]) in.push_back(t.view({-1}));
                  for (const at::Tensor& t : a[1]) out.push_back(t.view({-1}));
                  return g.allgather_into_tensor_coalesced(out, in, opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  check_root_rank_value(opts.rootRank, size_, "gather");
  check_one_tensor(inputs, "gather");
  if (getRank() == opts.rootRank) {
    TORCH_CHECK_VALUE(outputs.size() == 1,
                      "vccl gather: the destination rank needs one output list");
    check_list_size(outputs[0].size(), size_, "the gather list", "gather");
    check_like(outputs[0], inputs[0], "gather");
  } else {
    TORCH_CHECK_VALUE(outputs.empty(), "vccl gather: requires empty output on non-root");
  }
  TensorLists args{inputs};
  args.insert(args.end(), outputs.begin(), outputs.end());
  std::vector<at::Tensor> result = outputs.empty() ? std::vector<at::Tensor>{} : outputs[0];
  return submit(rooted(Submission{c10d::OpType::GATHER, "c10d::gather", std::move(args),
                                  std::move(result), inputs},
                       opts.rootRank),
                [opts](c10d::Backend& g, TensorLists& a) {
                  TensorLists out(a.begin() + 1, a.end());
                  return g.gather(out, a[0], opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  check_root_rank_value(opts.rootRank, size_, "scatter");
  check_one_tensor(outputs, "scatter");
  if (getRank() == opts.rootRank) {
    TORCH_CHECK_VALUE(inputs.size() == 1, "vccl scatter: the source rank needs one input list");
    check_list_size(inputs[0].size(), size_, "the scatter list", "scatter");
    check_like(inputs[0], outputs[0], "scatter");
  } else {
    TORCH_CHECK_VALUE(inputs.empty(), "vccl scatter: requires empty input on non-root");
  }
  TensorLists args{outputs};
  args.insert(args.end(), inputs.begin(), inputs.end());
  return submit(
      rooted(Submission{c10d::OpType::SCATTER, "c10d::scatter", std::move(args), outputs, outputs},
             opts.rootRank),
      [opts](c10d::Backend& g, TensorLists& a) {
        TensorLists in(a.begin() + 1, a.end());
        return g.scatter(a[0], in, opts);
      });
}

c10::intrusive_ptr<c10d::Work> CommBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(
      outputs.size() == 1 && inputs.size() == 1,
      "vccl reduce_scatter: expects one output tensor and one input list per process");
  check_list_size(inputs[0].size(), size_, "the input list", "reduce_scatter");
  // Gloo reduces inputs of the output's size only (NCCL also reduces uneven ones).
  check_like(inputs[0], outputs[0], "reduce_scatter");
  const Reduction r = check_reduction(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter");
  TensorLists args{outputs};
  args.insert(args.end(), inputs.begin(), inputs.end());
  Submission s = reducing(Submission{c10d::OpType::REDUCE_SCATTER, "c10d::reduce_scatter",
                                     std::move(args), outputs, outputs},
                          opts.reduceOp);
  if (r.divide) s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    TensorLists in(a.begin() + 1, a.end());
    return g.reduce_scatter(a[0], in, gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_world_multiple(input, output, size_, "input", "output", "reduce_scatter_tensor");
  const Reduction r = check_reduction(opts.reduceOp, output.scalar_type(), "reduce_scatter_tensor");
  Submission s = reducing(Submission{c10d::OpType::_REDUCE_SCATTER_BASE,
                                     "c10d::_reduce_scatter_base",
                                     {{output, input}},
                                     {output},
                                     {output}},
                          opts.reduceOp);
  if (r.divide) {
    s.finish = [size = size_](TensorLists& a) {
      std::vector<at::Tensor> out{a[0][0]};
      divide_by(out, size);
    };
  }
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    at::Tensor out = a[0][0].view({-1}), in = a[0][1].view({-1});
    return g._reduce_scatter_base(out, in, gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !outputs.empty(),
                    "vccl reduce_scatter_tensor_coalesced: requires input/output tensor lists ",
                    "of the same, non-zero length, got ", inputs.size(), " and ", outputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_world_multiple(inputs[i], outputs[i], size_, "input", "output",
                         "reduce_scatter_tensor_coalesced");
    TORCH_CHECK_TYPE(outputs[i].scalar_type() == outputs[0].scalar_type(),
                     "vccl reduce_scatter_tensor_coalesced: tensors must all have the same type");
  }
  const Reduction r =
      check_reduction(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter_tensor_coalesced");
  Submission s = reducing(Submission{c10d::OpType::COALESCED,
                                     "c10d::reduce_scatter_tensor_coalesced",
                                     {outputs, inputs},
                                     outputs,
                                     outputs},
                          opts.reduceOp);
  if (r.divide) s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    // As _reduce_scatter_base: NCCL needs only element counts, so flat views.
    std::vector<at::Tensor> out, in;
    for (const at::Tensor& t : a[0]) out.push_back(t.view({-1}));
    for (const at::Tensor& t : a[1]) in.push_back(t.view({-1}));
    return g.reduce_scatter_tensor_coalesced(out, in, gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& output_splits,
                                                          std::vector<int64_t>& input_splits,
                                                          const c10d::AllToAllOptions& opts) {
  // ProcessGroupNCCL::alltoall_base's checks (c10d's checkSplitSizes: RuntimeError).
  TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(),
                   "vccl all_to_all_single: the output tensor must have the same type as the ",
                   "input tensor, got ", output.scalar_type(), " and ", input.scalar_type());
  TORCH_CHECK_VALUE(output.dim() > 0 && input.dim() > 0,
                    "vccl all_to_all_single: tensors need at least one dimension");
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK_VALUE(output.numel() == input.numel(), "vccl all_to_all_single: ",
                      "Tensors are not equal in size or data type: ", output.numel(), " and ",
                      input.numel(), " elements");
    c10d::checkSplitSizes(input_splits, input, size_);
  } else {
    c10d::checkSplitSizes(input_splits, input, size_);
    c10d::checkSplitSizes(output_splits, output, size_);
  }
  return submit(
      {c10d::OpType::ALLTOALL_BASE, "c10d::alltoall_base", {{output, input}}, {output}, {}},
      [opts, output_splits, input_splits](c10d::Backend& g, TensorLists& a) {
        auto out_splits = output_splits;
        auto in_splits = input_splits;
        return g.alltoall_base(a[0][0], a[0][1], out_splits, in_splits, opts);
      });
}

c10::intrusive_ptr<c10d::Work> CommBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  check_list_size(outputs.size(), size_, "the output list", "alltoall");
  check_list_size(inputs.size(), size_, "the input list", "alltoall");
  // Gloo: "input and output tensors must have the same size" (NCCL also exchanges uneven ones).
  check_like(inputs, inputs[0], "alltoall");
  check_like(outputs, inputs[0], "alltoall");
  return submit({c10d::OpType::ALLTOALL, "c10d::alltoall", {outputs, inputs}, outputs, {}},
                [opts](c10d::Backend& g, TensorLists& a) { return g.alltoall(a[0], a[1], opts); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                 int tag) {
  check_one_tensor(tensors, "send");
  check_peer(dst_rank, tag, rank_, size_, "send");
  return submit(
      {c10d::OpType::SEND, "c10d::send", {tensors}, tensors, {}},
      [dst_rank, tag](c10d::Backend& g, TensorLists& a) { return g.send(a[0], dst_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                 int tag) {
  check_one_tensor(tensors, "recv");
  check_peer(src_rank, tag, rank_, size_, "recv");
  return submit(
      {c10d::OpType::RECV, "c10d::recv", {tensors}, tensors, {}},
      [src_rank, tag](c10d::Backend& g, TensorLists& a) { return g.recv(a[0], src_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::barrier(const c10d::BarrierOptions& opts) {
  return submit({c10d::OpType::BARRIER, "c10d::barrier", {}, {}, {}, /*host_waits=*/true},
                [opts](c10d::Backend& g, TensorLists&) { return g.barrier(opts); });
}

}  // namespace vdev::backend
