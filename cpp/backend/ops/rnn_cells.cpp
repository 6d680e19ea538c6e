// The fused LSTM and GRU cells on vdev, which nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell use.
//
// ATen chooses the fused cells for every non-CPU device (aten/src/ATen/native/RNN.cpp,
// use_thnn_fused_cell accepts CUDA, XPU and PrivateUse1), but only CUDA has kernels for them
// (native_functions.yaml). These kernels give vdev the same operators, each as one queued task
// computing on CPU aliases of the device bytes, with the outputs and workspaces CUDA's kernels
// define (aten/src/ATen/native/cuda/RNN.cu), so that autograd's formulas (derivatives.yaml:
// _thnn_fused_*_cell_backward, or the differentiable backward under create_graph) work unchanged:
//   LSTM: gates = igates + hgates (+ biases), chunked (i, f, g, o);
//         cy = sigmoid(f) * cx + sigmoid(i) * tanh(g); hy = sigmoid(o) * tanh(cy);
//         workspace [B, 4H] = the activated gates (i, f, g, o).
//   GRU:  r = sigmoid(ir + hr); z = sigmoid(ii + hi); n = tanh(in + r * hn); hy = n + z * (hx - n);
//         workspace [B, 5H] = (r, z, n, hx, hn).
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "backend/checks/device_rules.h"
#include "backend/common/cpu_alias.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"

namespace vdev::backend {
namespace {

using OptionalTensor = std::optional<at::Tensor>;

std::optional<AliasSpec> alias_of(const OptionalTensor& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return AliasSpec::of(*t);
}

at::Tensor make(const std::optional<AliasSpec>& s) { return s ? s->make() : at::Tensor(); }

at::Tensor defined_or_empty(const OptionalTensor& t) { return t.value_or(at::Tensor()); }

at::Tensor new_matrix(const at::Tensor& like, int64_t rows, int64_t cols) {
  return at::empty({rows, cols}, like.options().memory_format(at::MemoryFormat::Contiguous));
}

// The shape checks of CUDA's checkSizes (cuda/RNN.cu): 2-d gates of equal sizes, whose width is
// `chunks` times the hidden size; the previous state [batch, hidden]; biases [gates width].
void check_cell_sizes(const char* op, const at::Tensor& igates, const at::Tensor& hgates,
                      const at::Tensor& prev, const at::Tensor& bih, const at::Tensor& bhh,
                      int64_t chunks) {
  TORCH_CHECK(igates.dim() == 2, op, ": expected input_gates to be 2-D, but got ", igates.dim(),
              "-D");
  TORCH_CHECK(hgates.sizes() == igates.sizes(), op, ": expected hidden_gates of size ",
              igates.sizes(), " (the size of input_gates), but got ", hgates.sizes());
  TORCH_CHECK(igates.size(1) % chunks == 0, op, ": expected the gates' width ", igates.size(1),
              " to be a multiple of ", chunks);
  const std::vector<int64_t> state{igates.size(0), igates.size(1) / chunks};
  TORCH_CHECK(prev.sizes() == at::IntArrayRef(state), op, ": expected the previous state of size ",
              at::IntArrayRef(state), ", but got ", prev.sizes());
  TORCH_CHECK(bih.defined() == bhh.defined(), op,
              ": expected input_bias and hidden_bias both given or both None");
  for (const at::Tensor* b : {&bih, &bhh}) {
    TORCH_CHECK(!b->defined() || (b->dim() == 1 && b->size(0) == igates.size(1)), op,
                ": expected biases of size [", igates.size(1), "], but got ", b->sizes());
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> vdev_fused_lstm_cell(
    const at::Tensor& igates, const at::Tensor& hgates, const at::Tensor& cx,
    const OptionalTensor& input_bias, const OptionalTensor& hidden_bias) {
  const at::Tensor bih = defined_or_empty(input_bias), bhh = defined_or_empty(hidden_bias);
  check_same_device("wrapper_PrivateUse1___thnn_fused_lstm_cell", {{"input_gates", &igates},
                                                                   {"hidden_gates", &hgates},
                                                                   {"cx", &cx},
                                                                   {"input_bias", &bih},
                                                                   {"hidden_bias", &bhh}});
  check_cell_sizes("_thnn_fused_lstm_cell", igates, hgates, cx, bih, bhh, 4);
  const c10::DeviceGuard guard(igates.device());
  const int64_t batch = cx.size(0), hidden = cx.size(1);
  at::Tensor hy = new_matrix(cx, batch, hidden), cy = new_matrix(cx, batch, hidden);
  at::Tensor workspace = new_matrix(igates, batch, 4 * hidden);
  queue_launch({.stream = current_runtime_stream(igates.device().index()),
                .name = "aten::_thnn_fused_lstm_cell",
                .uses = {{igates, Access::kRead},
                         {hgates, Access::kRead},
                         {cx, Access::kRead},
                         {bih, Access::kRead},
                         {bhh, Access::kRead},
                         {hy, Access::kWrite},
                         {cy, Access::kWrite},
                         {workspace, Access::kWrite}},
                .elements = most_elements({&workspace})},
               [ig = AliasSpec::of(igates), hg = AliasSpec::of(hgates), c = AliasSpec::of(cx),
                bi = alias_of(input_bias), bh = alias_of(hidden_bias), h_out = AliasSpec::of(hy),
                c_out = AliasSpec::of(cy), ws = AliasSpec::of(workspace)] {
                 at::Tensor gates = ig.make() + hg.make();
                 if (bi) gates += bi->make() + bh->make();
                 const std::vector<at::Tensor> g = gates.chunk(4, 1);
                 const at::Tensor i = g[0].sigmoid(), f = g[1].sigmoid(), cell = g[2].tanh(),
                                  o = g[3].sigmoid();
                 at::Tensor cy_cpu = c_out.make();
                 cy_cpu.copy_(f * c.make() + i * cell);
                 h_out.make().copy_(o * cy_cpu.tanh());
                 at::Tensor ws_cpu = ws.make();
                 at::cat_out(ws_cpu, {i, f, cell, o}, 1);
               });
  return {hy, cy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> vdev_fused_lstm_cell_backward_impl(
    const OptionalTensor& grad_hy, const OptionalTensor& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const at::Tensor ghy = defined_or_empty(grad_hy), gcy = defined_or_empty(grad_cy);
  check_same_device(
      "wrapper_PrivateUse1___thnn_fused_lstm_cell_backward_impl",
      {{"grad_hy", &ghy}, {"grad_cy", &gcy}, {"cx", &cx}, {"cy", &cy}, {"workspace", &workspace}});
  if (!ghy.defined() && !gcy.defined()) return {};  // no gradient flows, as CUDA's kernel returns
  const c10::DeviceGuard guard(cx.device());
  const int64_t batch = cx.size(0), hidden = cx.size(1);
  at::Tensor grad_gates = new_matrix(workspace, batch, 4 * hidden);
  at::Tensor grad_cx = new_matrix(cx, batch, hidden);
  at::Tensor grad_bias = has_bias ? at::empty({4 * hidden}, workspace.options()) : at::Tensor();
  queue_launch({.stream = current_runtime_stream(cx.device().index()),
                .name = "aten::_thnn_fused_lstm_cell_backward_impl",
                .uses = {{ghy, Access::kRead},
                         {gcy, Access::kRead},
                         {cx, Access::kRead},
                         {cy, Access::kRead},
                         {workspace, Access::kRead},
                         {grad_gates, Access::kWrite},
                         {grad_cx, Access::kWrite},
                         {grad_bias, Access::kWrite}},
                .elements = most_elements({&workspace})},
               [gh = alias_of(grad_hy), gc = alias_of(grad_cy), c = AliasSpec::of(cx),
                c_next = AliasSpec::of(cy), ws = AliasSpec::of(workspace),
                gg_out = AliasSpec::of(grad_gates), gcx_out = AliasSpec::of(grad_cx),
                gb_out = alias_of(grad_bias)] {
                 const std::vector<at::Tensor> g = ws.make().chunk(4, 1);
                 const at::Tensor &i = g[0], &f = g[1], &cell = g[2], &o = g[3];
                 const at::Tensor tanh_cy = c_next.make().tanh();
                 const at::Tensor ghy_cpu = gh ? gh->make() : at::zeros_like(tanh_cy);
                 at::Tensor gcy_total = ghy_cpu * o * (1 - tanh_cy * tanh_cy);
                 if (gc) gcy_total = gcy_total + gc->make();
                 const at::Tensor gi = gcy_total * cell * i * (1 - i);
                 const at::Tensor gf = gcy_total * c.make() * f * (1 - f);
                 const at::Tensor gcell = gcy_total * i * (1 - cell * cell);
                 const at::Tensor go = ghy_cpu * tanh_cy * o * (1 - o);
                 at::Tensor gg_cpu = gg_out.make();
                 at::cat_out(gg_cpu, {gi, gf, gcell, go}, 1);
                 gcx_out.make().copy_(gcy_total * f);
                 if (gb_out) {
                   at::Tensor gb_cpu = gb_out->make();
                   at::sum_out(gb_cpu, gg_cpu, {0});
                 }
               });
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> vdev_fused_gru_cell(const at::Tensor& igates,
                                                       const at::Tensor& hgates,
                                                       const at::Tensor& hx,
                                                       const OptionalTensor& input_bias,
                                                       const OptionalTensor& hidden_bias) {
  const at::Tensor bih = defined_or_empty(input_bias), bhh = defined_or_empty(hidden_bias);
  check_same_device("wrapper_PrivateUse1___thnn_fused_gru_cell", {{"input_gates", &igates},
                                                                  {"hidden_gates", &hgates},
                                                                  {"hx", &hx},
                                                                  {"input_bias", &bih},
                                                                  {"hidden_bias", &bhh}});
  check_cell_sizes("_thnn_fused_gru_cell", igates, hgates, hx, bih, bhh, 3);
  const c10::DeviceGuard guard(igates.device());
  const int64_t batch = hx.size(0), hidden = hx.size(1);
  at::Tensor hy = new_matrix(hx, batch, hidden);
  at::Tensor workspace = new_matrix(igates, batch, 5 * hidden);
  queue_launch({.stream = current_runtime_stream(igates.device().index()),
                .name = "aten::_thnn_fused_gru_cell",
                .uses = {{igates, Access::kRead},
                         {hgates, Access::kRead},
                         {hx, Access::kRead},
                         {bih, Access::kRead},
                         {bhh, Access::kRead},
                         {hy, Access::kWrite},
                         {workspace, Access::kWrite}},
                .elements = most_elements({&workspace})},
               [ig = AliasSpec::of(igates), hg = AliasSpec::of(hgates), h = AliasSpec::of(hx),
                bi = alias_of(input_bias), bh = alias_of(hidden_bias), h_out = AliasSpec::of(hy),
                ws = AliasSpec::of(workspace)] {
                 at::Tensor in_gates = ig.make(), hid_gates = hg.make();
                 if (bi) {
                   in_gates = in_gates + bi->make();
                   hid_gates = hid_gates + bh->make();
                 }
                 const std::vector<at::Tensor> a = in_gates.chunk(3, 1), b = hid_gates.chunk(3, 1);
                 const at::Tensor r = (a[0] + b[0]).sigmoid(), z = (a[1] + b[1]).sigmoid();
                 const at::Tensor n = (a[2] + r * b[2]).tanh();
                 const at::Tensor hx_cpu = h.make();
                 h_out.make().copy_(n + z * (hx_cpu - n));
                 at::Tensor ws_cpu = ws.make();
                 at::cat_out(ws_cpu, {r, z, n, hx_cpu, b[2]}, 1);
               });
  return {hy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> vdev_fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  check_same_device("wrapper_PrivateUse1___thnn_fused_gru_cell_backward",
                    {{"grad_hy", &grad_hy}, {"workspace", &workspace}});
  TORCH_CHECK(workspace.dim() == 2 && workspace.size(1) == 5 * grad_hy.size(-1),
              "_thnn_fused_gru_cell_backward: expected a workspace of size [batch, 5 * hidden], "
              "but got ",
              workspace.sizes());
  const c10::DeviceGuard guard(grad_hy.device());
  const int64_t batch = grad_hy.size(0), hidden = grad_hy.size(1);
  at::Tensor grad_igates = new_matrix(workspace, batch, 3 * hidden);
  at::Tensor grad_hgates = new_matrix(workspace, batch, 3 * hidden);
  at::Tensor grad_hx = new_matrix(grad_hy, batch, hidden);
  at::Tensor grad_ibias, grad_hbias;
  if (has_bias) {
    grad_ibias = at::empty({3 * hidden}, workspace.options());
    grad_hbias = at::empty({3 * hidden}, workspace.options());
  }
  queue_launch({.stream = current_runtime_stream(grad_hy.device().index()),
                .name = "aten::_thnn_fused_gru_cell_backward",
                .uses = {{grad_hy, Access::kRead},
                         {workspace, Access::kRead},
                         {grad_igates, Access::kWrite},
                         {grad_hgates, Access::kWrite},
                         {grad_hx, Access::kWrite},
                         {grad_ibias, Access::kWrite},
                         {grad_hbias, Access::kWrite}},
                .elements = most_elements({&workspace})},
               [gh = AliasSpec::of(grad_hy), ws = AliasSpec::of(workspace),
                gi_out = AliasSpec::of(grad_igates), gh_out = AliasSpec::of(grad_hgates),
                ghx_out = AliasSpec::of(grad_hx), gbi_out = alias_of(grad_ibias),
                gbh_out = alias_of(grad_hbias)] {
                 const std::vector<at::Tensor> w = ws.make().chunk(5, 1);
                 const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
                 const at::Tensor g = gh.make();
                 const at::Tensor gn = g * (1 - z) * (1 - n * n);
                 const at::Tensor gz = g * (hx - n) * z * (1 - z);
                 const at::Tensor gr = gn * hn * r * (1 - r);
                 at::Tensor gi_cpu = gi_out.make(), gh_cpu = gh_out.make();
                 at::cat_out(gi_cpu, {gr, gz, gn}, 1);
                 at::cat_out(gh_cpu, {gr, gz, gn * r}, 1);
                 ghx_out.make().copy_(g * z);
                 if (gbi_out) {
                   at::Tensor bi = gbi_out->make(), bh = gbh_out->make();
                   at::sum_out(bi, gi_cpu, {0});
                   at::sum_out(bh, gh_cpu, {0});
                 }
               });
  return {grad_igates, grad_hgates, grad_hx, grad_ibias, grad_hbias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", &vdev_fused_lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", &vdev_fused_lstm_cell_backward_impl);
  m.impl("_thnn_fused_gru_cell", &vdev_fused_gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", &vdev_fused_gru_cell_backward);
}

}  // namespace vdev::backend
