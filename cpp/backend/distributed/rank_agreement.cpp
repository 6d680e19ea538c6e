#include "backend/distributed/rank_agreement.h"

#include <ATen/ops/empty.h>
#include <c10/util/StringUtil.h>
#include <torch/csrc/distributed/c10d/Utils.hpp>

#include <algorithm>

#include "backend/distributed/comm_checks.h"

namespace vdev::backend {

Fingerprint fingerprint(c10d::OpType type, const std::vector<at::Tensor>& agreeing,
                        int64_t reduce_op, int64_t root) {
  Fingerprint f{
      static_cast<int64_t>(type), -1, static_cast<int64_t>(agreeing.size()), 0, reduce_op, root};
  for (const at::Tensor& t : agreeing) {
    f[kDtype] = static_cast<int64_t>(t.scalar_type());
    f[kElements] += t.numel();
  }
  return f;
}

std::string describe(const Fingerprint& f) {
  std::string s = c10d::opTypeToString(static_cast<c10d::OpType>(f[kType]));
  if (f[kDtype] >= 0) {
    s += c10::str(" of ", f[kTensors], " tensor(s) of ",
                  c10::toString(static_cast<c10::ScalarType>(f[kDtype])), " with ", f[kElements],
                  " element(s)");
  }
  if (f[kReduceOp] != -1) s += c10::str(" with ReduceOp.", reduce_op_name(f[kReduceOp]));
  if (f[kRoot] >= 0) s += c10::str(" rooted at rank ", f[kRoot]);
  return s;
}

// Every rank all-gathers its fingerprint (kPrintFields int64, so Gloo never sees a size mismatch
// here) and raises if any rank called something else.
void check_ranks_agree(c10d::Backend& gloo, const Fingerprint& mine, const char* name) {
  const int size = gloo.getSize();
  constexpr auto n = static_cast<int64_t>(kPrintFields);
  at::Tensor in = at::empty({n}, at::kLong);
  std::copy(mine.begin(), mine.end(), in.data_ptr<int64_t>());
  at::Tensor all = at::empty({size * n}, at::kLong);
  gloo._allgather_base(all, in)->wait();
  const int64_t* p = all.const_data_ptr<int64_t>();
  for (int r = 0; r < size; ++r) {
    Fingerprint theirs;
    std::copy(p + n * r, p + n * (r + 1), theirs.begin());
    TORCH_CHECK(theirs == mine, "vccl ", name, ": the ranks called different collectives: rank ",
                gloo.getRank(), " called ", describe(mine), ", rank ", r, " called ",
                describe(theirs), " (a collective mismatch in the program; no data was moved)");
  }
}

}  // namespace vdev::backend
