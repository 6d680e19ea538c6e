"""Operators that return an undefined tensor for some flags return it on vdev too (None in Python),
as on CPU and CUDA, where their meta kernel predicts an empty tensor: the attention weights of
the fast path of nn.MultiheadAttention without need_weights, used by every TransformerEncoder in
evaluation. Before: "[aten::_native_multi_head_attention] src is undefined" at the next
synchronize. (cpp/backend/checks/stand_in_check.h: undefined_returns)"""

import torch

DEV = "vdev"


def test_native_multi_head_attention_without_weights_returns_none_and_cpus_values():
    torch.manual_seed(0)
    e = 8
    q = torch.randn(2, 3, e)
    w, b = torch.randn(3 * e, e), torch.randn(3 * e)
    pw, pb = torch.randn(e, e), torch.randn(e)
    args = (e, 2, w, b, pw, pb, None, False)
    out_c, weights_c = torch._native_multi_head_attention(q, q, q, *args)
    dev = [t.to(DEV) if isinstance(t, torch.Tensor) else t for t in args]
    for _ in range(2):  # planned, then cached
        out_v, weights_v = torch._native_multi_head_attention(*[q.to(DEV)] * 3, *dev)
        assert weights_c is None and weights_v is None
        torch.testing.assert_close(out_v.cpu(), out_c)
    torch.vdev.synchronize()


def test_encoder_layers_in_evaluation_take_the_fast_path_and_match_cpu():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True).eval()
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        ref_layer = layer(x)
        ref_mha = mha(x, x, x, need_weights=False)[0]
        layer, mha = layer.to(DEV), mha.to(DEV)
        xv = x.to(DEV)
        got_layer = layer(xv)
        got_mha, weights = mha(xv, xv, xv, need_weights=False)
    assert weights is None
    torch.testing.assert_close(got_layer.cpu(), ref_layer, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_mha.cpu(), ref_mha, rtol=1e-5, atol=1e-5)
    torch.vdev.synchronize()
