// The decoder's teacher-forced recurrence with a hand-written backward (see recurrence.h).
#include "model/recurrence.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>

#include "model/mixed_precision.h"
#include "model/step_kernels.h"

namespace nmt {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One GRU update from gate pre-activations gi, gh [B, G] and hidden h [B, D]:
// writes h' into h_out [B, D], the activations (r, z, n) into act [B, G] and
// gh's new-gate share W_hn h + b_hn into ghn [B, D], which the backward needs.
void gru_forward(const Tensor& gi, const Tensor& gh, const Tensor& h, Tensor act, Tensor ghn, Tensor h_out) {
  const int64_t D = h.size(1);
  auto rz = act.narrow(1, 0, 2 * D);
  torch::add_out(rz, gi.narrow(1, 0, 2 * D), gh.narrow(1, 0, 2 * D)).sigmoid_();
  ghn.copy_(gh.narrow(1, 2 * D, D));
  auto n = act.narrow(1, 2 * D, D);
  torch::mul_out(n, rz.narrow(1, 0, D), ghn).add_(gi.narrow(1, 2 * D, D)).tanh_();
  torch::sub_out(h_out, h, n).mul_(rz.narrow(1, D, D)).add_(n);  // n + z (h - n)
}

// The backward of gru_forward: from dout = dL/dh' [B, D] writes dL/dgi into
// dgi [B, G] and dL/dgh into dgh [B, G], and returns the gradient that
// reaches h directly (not through gh): dout * z.
Tensor gru_backward(const Tensor& dout, const Tensor& act, const Tensor& ghn, const Tensor& h, Tensor dgi, Tensor dgh) {
  const int64_t D = h.size(1);
  const auto r = act.narrow(1, 0, D), z = act.narrow(1, D, D), n = act.narrow(1, 2 * D, D);
  auto dr = dgi.narrow(1, 0, D), dz = dgi.narrow(1, D, D), dn = dgi.narrow(1, 2 * D, D);
  torch::mul_out(dn, dout, 1 - z).mul_(1 - n * n);                // through tanh
  torch::mul_out(dz, dout, h - n).mul_(z * (1 - z));             // through sigmoid
  torch::mul_out(dr, dn, ghn).mul_(r * (1 - r));
  dgh.narrow(1, 0, 2 * D).copy_(dgi.narrow(1, 0, 2 * D));
  auto dgh_n = dgh.narrow(1, 2 * D, D);
  torch::mul_out(dgh_n, dn, r);
  return dout * z;
}

// b + x wt for x [B, K], wt [K, N] and b [N] or [B, N] (float): addmm in
// float, or the product in bfloat16 when wt is (then x is rounded to it and
// the result comes back in float before b is added).
Tensor affine(const Tensor& b, const Tensor& x, const Tensor& wt) {
  if (wt.scalar_type() != torch::kBFloat16) return torch::addmm(b, x, wt);
  return torch::mm(x.to(torch::kBFloat16), wt).to(b.scalar_type()).add_(b);
}

// a b in float; with `bf16` both rounded to bfloat16 first (products as
// --bf16 trains them, float accumulation inside oneDNN).
Tensor product(const Tensor& a, const Tensor& b, bool bf16) {
  if (!bf16) return a.mm(b);
  return a.to(torch::kBFloat16).mm(b.to(torch::kBFloat16)).to(a.scalar_type());
}

// x with its units dropped by `mask` [B, D] (RecurrenceMasks), or x itself
// where the mask is empty (no dropout).
Tensor dropped(const Tensor& x, const Tensor& mask) { return mask.numel() > 0 ? x * mask : x; }

// dst += (d w) masked: the gradient that reaches a state through the product
// (state masked) w^T, with the product in bfloat16 when w_r is rounded to it.
void add_masked_product(Tensor& dst, const Tensor& d, const Tensor& w, const Tensor& w_r, const Tensor& mask) {
  const bool bf16 = w_r.scalar_type() == torch::kBFloat16;
  if (mask.numel() == 0) {
    if (bf16) dst.add_(torch::mm(d.to(torch::kBFloat16), w_r));
    else dst.addmm_(d, w);
    return;
  }
  const auto through = bf16 ? torch::mm(d.to(torch::kBFloat16), w_r).to(dst.scalar_type()) : torch::mm(d, w);
  dst.add_(through.mul_(mask));
}

// The backward of the attention energies e = tanh(k + W q) [B, S, A] under
// scores = e v: with d_sc = dL/dscores [B, S], d_pre = d_sc v (1 - e^2) is
// added into d_keys [B, S, A] and summed over S into d_q [B, A] (rows may be
// strided). On the CPU in float one pass over e (additive_energy_backward());
// elsewhere LibTorch's operations.
void energy_backward(const Tensor& d_sc, const Tensor& e, const Tensor& v, Tensor& d_keys, Tensor& d_q) {
  if (additive_energy_backward_applies(e, d_keys, d_q)) return additive_energy_backward(d_sc, e, v, d_keys, d_q);
  const int64_t A = e.size(2);
  const auto d_pre = (d_sc.unsqueeze(2) * v.view({1, 1, A})).mul_(1 - e * e);
  d_keys.add_(d_pre);
  torch::sum_out(d_q, d_pre, 1);
}

// Inputs (in apply's order): input_gates, init_state, keys, values, mask_bias,
// hidden1_weight, hidden1_bias, query_weight, query_bias, score_weight,
// context_weight, context_bias, query_mask, prev_mask, cgru. Outputs: states, contexts, alphas.
struct AttentiveRecurrence : torch::autograd::Function<AttentiveRecurrence> {
  static variable_list forward(AutogradContext* ctx, const Tensor& input_gates, const Tensor& s0, const Tensor& keys,
                               const Tensor& values, const Tensor& mask_bias, const Tensor& w_h1, const Tensor& b_h1,
                               const Tensor& w_q, const Tensor& b_q, const Tensor& v, const Tensor& w_c,
                               const Tensor& b_c, const Tensor& m_q, const Tensor& m_p, bool cgru) {
    const int64_t B = input_gates.size(0), T = input_gates.size(1), G = input_gates.size(2), D = G / 3;
    const int64_t S = keys.size(1), A = keys.size(2), C = values.size(2);
    TORCH_CHECK(s0.sizes() == torch::IntArrayRef({B, D}), "attentive_recurrence: init_state must be [B, D]");
    TORCH_CHECK(values.size(0) == B && keys.size(0) == B && values.size(1) == S, "attentive_recurrence: keys/values");
    TORCH_CHECK(w_q.size(0) == A + G && w_q.size(1) == D && w_c.size(0) == G && w_c.size(1) == C,
                "attentive_recurrence: weight shapes");
    const auto opt = s0.options();
    const auto gi1 = input_gates.transpose(0, 1).contiguous();  // [T, B, G]
    // Time-major buffers: step t's slice is contiguous.
    auto states = torch::empty({T, B, D}, opt), contexts = torch::empty({T, B, C}, opt);
    auto alphas = torch::empty({T, B, S}, opt);
    auto energies = torch::empty({T, B, S, A}, opt);                         // tanh(k_j + W q)
    auto act2 = torch::empty({T, B, G}, opt), ghn2 = torch::empty({T, B, D}, opt);  // reading GRU
    Tensor query_states, act1, ghn1;                                         // cgru: s'_t and GRU1
    if (cgru) {
      query_states = torch::empty({T, B, D}, opt);
      act1 = torch::empty({T, B, G}, opt);
      ghn1 = torch::empty({T, B, D}, opt);
    }
    const auto v_col = v.reshape({A, 1});
    // The weights transposed once, so that the steps' products read them as
    // OpenBLAS packs fastest (see StepWeights in model.h); under bfloat16
    // autocast (--bf16) rounded once, and the products run in bfloat16.
    const bool bf16 = bf16_autocast_active();
    const NoAutocast own_rounding;  // the products below choose their precision themselves
    const auto prepared = [&](const Tensor& w) { return bf16 ? w.t().to(torch::kBFloat16).contiguous() : w.t().contiguous(); };
    const auto w_h1t = cgru ? prepared(w_h1) : Tensor(), w_qt = prepared(w_q), w_ct = prepared(w_c);
    Tensor s = s0;
    for (int64_t t = 0; t < T; ++t) {
      Tensor h = s;  // the query state
      if (cgru) {
        h = query_states[t];
        gru_forward(gi1[t], affine(b_h1, dropped(s, m_p), w_h1t), s, act1[t], ghn1[t], h);
      }
      const auto qg = affine(b_q, dropped(h, m_q), w_qt);  // [B, A + G]
      const auto qa = qg.narrow(1, 0, A);          // [B, A] W q
      auto e = energies[t];                        // [B, S, A]
      auto alpha = alphas[t];                      // [B, S]
      auto c = contexts[t];                        // [B, C]
      if (additive_attention_step_applies(qa, keys, v, mask_bias, values)) {  // float32 on the CPU: one fused pass
        additive_attention_step_out(qa, keys, v, mask_bias, values, alpha, c, &e);
      } else {
        torch::add_out(e, keys, qa.unsqueeze(1)).tanh_();
        const auto scores = e.view({B * S, A}).mm(v_col).view({B, S}).add_(mask_bias);  // [B, S]
        alpha.copy_(torch::softmax(scores, 1));
        auto c_row = c.unsqueeze(1);
        torch::bmm_out(c_row, alpha.unsqueeze(1), values);  // [B, 1, S] x [B, S, C]
      }
      const auto gi2 = affine(cgru ? b_c : gi1[t], c, w_ct);  // [B, G]
      gru_forward(gi2, qg.narrow(1, A, G), h, act2[t], ghn2[t], states[t]);
      s = states[t];
    }
    ctx->set_materialize_grads(false);  // an unused output's gradient stays undefined, not zeros
    ctx->save_for_backward({s0, keys, values, w_h1, w_q, v, w_c, states, contexts, alphas, energies, act2, ghn2,
                            query_states, act1, ghn1, m_q, m_p});
    ctx->saved_data["cgru"] = cgru;
    ctx->saved_data["bf16"] = bf16;
    return {states.transpose(0, 1), contexts.transpose(0, 1), alphas.transpose(0, 1)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(), "attentive_recurrence: double backward is not supported");
    const auto saved = ctx->get_saved_variables();
    const auto &s0 = saved[0], &keys = saved[1], &values = saved[2], &w_h1 = saved[3], &w_q = saved[4],
               &v = saved[5], &w_c = saved[6], &states = saved[7], &contexts = saved[8], &alphas = saved[9],
               &energies = saved[10], &act2 = saved[11], &ghn2 = saved[12], &query_states = saved[13],
               &act1 = saved[14], &ghn1 = saved[15], &m_q = saved[16], &m_p = saved[17];
    const bool cgru = ctx->saved_data["cgru"].toBool(), bf16 = ctx->saved_data["bf16"].toBool();
    // Under --bf16 the backward's products run in bfloat16 too, the weights rounded once.
    const auto rounded = [&](const Tensor& w) { return bf16 && w.numel() > 0 ? w.to(torch::kBFloat16) : w; };
    const auto w_c_r = rounded(w_c), w_q_r = rounded(w_q), w_h1_r = rounded(w_h1);
    const int64_t T = states.size(0), B = states.size(1), D = states.size(2);
    const int64_t S = keys.size(1), A = keys.size(2), C = values.size(2), G = 3 * D;
    const auto opt = s0.options();
    // Upstream gradients, time-major views; undefined when an output was unused.
    const auto g_states = grads[0].defined() ? grads[0].transpose(0, 1) : Tensor();     // [T, B, D]
    const auto g_contexts = grads[1].defined() ? grads[1].transpose(0, 1) : Tensor();   // [T, B, C]
    const auto g_alphas = grads[2].defined() ? grads[2].transpose(0, 1) : Tensor();     // [T, B, S]

    // Per-step gradients kept for the weight gradients at the end.
    auto d_gi1 = torch::empty({T, B, G}, opt);        // input gates of GRU1 (bahdanau: of the GRU)
    auto d_gh1 = cgru ? torch::empty({T, B, G}, opt) : Tensor();  // GRU1's hidden gates
    auto d_qg = torch::empty({T, B, A + G}, opt);     // query products: [d W q; d gh of the reading GRU]
    auto d_gi2 = cgru ? torch::empty({T, B, G}, opt) : d_gi1;     // the reading GRU's input gates
    auto d_ctx = torch::empty({T, B, C}, opt);        // c_t
    auto d_scores = torch::empty({T, B, S}, opt);     // attention scores (for v)
    auto d_keys = torch::zeros({B, S, A}, opt);

    auto ds = torch::zeros({B, D}, opt);  // dL/ds_t from the steps after t
    for (int64_t t = T - 1; t >= 0; --t) {
      if (g_states.defined()) ds = ds + g_states[t];
      const auto s_prev = t > 0 ? states[t - 1] : s0;
      const auto h = cgru ? query_states[t] : s_prev;  // the query state
      // The reading GRU: s_t = GRU(gi2, gh2, h).
      auto d_gh2 = d_qg[t].narrow(1, A, G);
      auto dh = gru_backward(ds, act2[t], ghn2[t], h, d_gi2[t], d_gh2);
      // c_t feeds gi2 = W_c c_t (+ ...).
      auto dc = d_ctx[t];
      if (bf16) dc.copy_(torch::mm(d_gi2[t].to(torch::kBFloat16), w_c_r));
      else torch::mm_out(dc, d_gi2[t], w_c);
      if (g_contexts.defined()) dc.add_(g_contexts[t]);
      // c_t = sum_j alpha_j h_j; alpha = softmax(scores).
      const auto alpha = alphas[t];
      auto d_alpha = torch::bmm(values, dc.unsqueeze(2)).squeeze(2);                  // [B, S]
      if (g_alphas.defined()) d_alpha.add_(g_alphas[t]);
      auto d_sc = d_scores[t];
      torch::mul_out(d_sc, alpha, d_alpha - (alpha * d_alpha).sum(1, true));
      // scores_j = v^T e_j, e_j = tanh(k_j + W q).
      auto d_q = d_qg[t].narrow(1, 0, A);
      energy_backward(d_sc, energies[t], v, d_keys, d_q);
      // through W q and the reading GRU's W_hh h
      add_masked_product(dh, d_qg[t], w_q, w_q_r, m_q);
      if (cgru) {
        // s'_t = GRU1(gi1, W_hh1 s_{t-1} + b, s_{t-1}).
        auto d_prev = gru_backward(dh, act1[t], ghn1[t], s_prev, d_gi1[t], d_gh1[t]);
        add_masked_product(d_prev, d_gh1[t], w_h1, w_h1_r, m_p);
        ds = d_prev;
      } else {
        ds = dh;
      }
    }
    // Each weight's gradient as one product over all T x B rows.
    auto flat = [](const Tensor& x) { return x.reshape({-1, x.size(-1)}); };
    const auto prev_states = torch::cat({s0.unsqueeze(0), states.narrow(0, 0, T - 1)}, 0);  // [T, B, D] s_{t-1}
    const auto query_rows = flat(dropped(cgru ? query_states : prev_states, m_q));
    Tensor g_w_h1, g_b_h1, g_b_c;
    if (cgru) {
      g_w_h1 = product(flat(d_gh1).t(), flat(dropped(prev_states, m_p)), bf16);  // [G, D]
      g_b_h1 = flat(d_gh1).sum(0);
      g_b_c = flat(d_gi2).sum(0);
    }
    const auto g_w_q = product(flat(d_qg).t(), query_rows, bf16);  // [A + G, D]
    const auto g_b_q = flat(d_qg).sum(0);
    const auto g_w_c = product(flat(d_gi2).t(), flat(contexts), bf16);  // [G, C]
    const auto g_v = d_scores.reshape({1, T * B * S}).mm(energies.view({T * B * S, A})).view({A});
    const auto g_values = torch::bmm(alphas.permute({1, 2, 0}), d_ctx.transpose(0, 1));  // [B, S, T] x [B, T, C]
    return {d_gi1.transpose(0, 1), ds, d_keys, g_values, Tensor(), g_w_h1, g_b_h1,
            g_w_q, g_b_q, g_v, g_w_c, g_b_c, Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

RecurrenceOutput attentive_recurrence(const Tensor& input_gates, const Tensor& init_state, const Tensor& keys,
                                      const Tensor& values, const Tensor& mask_bias, const RecurrenceWeights& w,
                                      const RecurrenceMasks& masks) {
  // Weights a decoder type does not have travel as empty tensors.
  const auto none = torch::empty({0}, init_state.options());
  auto or_none = [&](const Tensor& x) { return x.defined() ? x : none; };
  // In the weights' precision whatever autocast made of them (--bf16 computes keys and input gates in bfloat16).
  const auto f = [&](const Tensor& x) { return x.to(w.query_weight.scalar_type()); };
  auto out = AttentiveRecurrence::apply(f(input_gates), f(init_state), f(keys), f(values), mask_bias, or_none(w.hidden1_weight),
                                        or_none(w.hidden1_bias), w.query_weight, w.query_bias,
                                        w.score_weight.reshape({-1}), w.context_weight, or_none(w.context_bias),
                                        f(or_none(masks.query)), f(or_none(masks.prev)), w.cgru);
  return {out[0], out[1], out[2]};
}

}  // namespace nmt
