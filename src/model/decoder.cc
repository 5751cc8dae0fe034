// The decoder: teacher forcing on three paths, one step for search, and the
// weights of its optimized steps (decoder.h).
#include "model/decoder.h"

#include <cmath>
#include <limits>
#include <tuple>

#include "base/error.h"
#include "model/packed_linear.h"
#include "model/recurrence.h"
#include "model/step_kernels.h"
#include "text/tokenizer.h"

namespace nmt {
namespace F = torch::nn::functional;
namespace {

// x with its units dropped by a DecoderMemory mask, or x where it is undefined.
torch::Tensor dropped(const torch::Tensor& x, const torch::Tensor& mask) { return mask.defined() ? x * mask : x; }

// cell's GRU update of h from x with h masked where it enters W_hh and the
// products normalized by norm_ih and norm_hh where they are not empty
// (gru_update() on the two products; the module itself where there is
// neither mask nor norm).
torch::Tensor gru_cell(torch::nn::GRUCellImpl& cell, const torch::Tensor& x, const torch::Tensor& h,
                       const torch::Tensor& mask, const GateNorm& norm_ih, const GateNorm& norm_hh) {
  if (!mask.defined() && norm_ih.is_empty()) return cell.forward(x, h);
  return gru_update(gate_normed(norm_ih, F::linear(x, cell.weight_ih, cell.bias_ih)),
                    gate_normed(norm_hh, F::linear(dropped(h, mask), cell.weight_hh, cell.bias_hh)), h);
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> query_projection(const AttentionImpl& attention,
                                                         const torch::nn::GRUCellImpl& reader) {
  const auto wa = attention.query_weight();  // [A, D] or undefined
  if (!wa.defined()) return {reader.weight_hh, reader.bias_hh};
  return {torch::cat({wa, reader.weight_hh}, 0),
          torch::cat({torch::zeros({wa.size(0)}, reader.bias_hh.options()), reader.bias_hh})};
}

DecoderImpl::DecoderImpl(const ModelOptions& opt) : opt_(opt) {
  const int64_t C = 2 * opt.enc_hidden;
  embed = register_module("embed", torch::nn::Embedding(
      torch::nn::EmbeddingOptions(opt.tgt_vocab, opt.emb_dim).padding_idx(kPadId)));
  attention = register_module("attention", Attention(opt));
  if (opt.decoder == DecoderType::kCgru) {
    cell = register_module("cell", torch::nn::GRUCell(opt.emb_dim, opt.dec_hidden));
    cell2 = register_module("cell2", torch::nn::GRUCell(C, opt.dec_hidden));
  } else {
    cell = register_module("cell", torch::nn::GRUCell(opt.emb_dim + C, opt.dec_hidden));
  }
  if (opt.layer_norm) {
    norm_ih = register_module("cell_norm_ih", GateNorm(opt.dec_hidden));
    norm_hh = register_module("cell_norm_hh", GateNorm(opt.dec_hidden));
    if (cell2) {
      norm2_ih = register_module("cell2_norm_ih", GateNorm(opt.dec_hidden));
      norm2_hh = register_module("cell2_norm_hh", GateNorm(opt.dec_hidden));
    }
  }
  deep = register_module("deep", torch::nn::Linear(opt.dec_hidden + C + opt.emb_dim, opt.emb_dim));
  if (opt.tie_embeddings) {
    // The embedding doubles as the output projection: N(0, 1/E) keeps the
    // initial logits O(1) (with N(0, 1) rows of norm sqrt(E) they start huge).
    torch::NoGradGuard no_grad;
    torch::nn::init::normal_(embed->weight, 0.0, 1.0 / std::sqrt(static_cast<double>(opt.emb_dim)));
    embed->weight[kPadId].zero_();
    out_weight = embed->weight;
  } else {
    out_weight = register_parameter("out_weight", torch::empty({opt.tgt_vocab, opt.emb_dim}));
    torch::nn::init::normal_(out_weight, 0.0, 1.0 / std::sqrt(static_cast<double>(opt.emb_dim)));
  }
  out_bias = register_parameter("out_bias", torch::zeros({opt.tgt_vocab}));
  drop = register_module("drop", Dropout(opt.dropout));
  word_drop = register_module("word_drop", Dropout(opt.word_dropout, /*whole_vectors=*/true));
  hidden_drop = register_module("hidden_drop", Dropout(opt.dec_hidden_dropout));
  if (opt.alignment_head > 0) align_head = register_module("align_head", AlignmentHead(opt));
}

torch::Tensor DecoderImpl::output(const torch::Tensor& s, const torch::Tensor& c, const torch::Tensor& ey,
                                  const DecoderMemory* mem) {
  const StepWeights* w = mem ? mem->weights.get() : nullptr;
  const bool q = w && w->reduced_for(s);
  auto x = torch::cat({s, c, ey}, -1);  // [.., D + C + E]
  auto t = drop(torch::tanh(q ? (*w->deep_r)(x) : w ? step_linear(x, w->deep_p, w->deep_t, w->deep_b) : deep(x)));  // [.., E]
  if (mem && mem->out_t.defined()) {
    if (q && mem->out_reduced) return (*mem->out_reduced)(t);     // [.., V']
    return step_linear(t, mem->out_packed, mem->out_t, mem->out_b);  // [.., V']
  }
  if (q) return (*w->out_r)(t);
  return w ? step_linear(t, w->out_p, w->out_t, w->out_b) : F::linear(t, out_weight, out_bias);  // [.., V]
}

void DecoderImpl::restrict_output(DecoderMemory& mem, const torch::Tensor& ids) const {
  mem.out_t = out_weight.t().index_select(1, ids);  // [E, V']
  mem.out_b = out_bias.index_select(0, ids);        // [V']
  const StepWeights* w = mem.weights.get();
  // Packing an int8 copy per batch cost greedy search (64 rows, never int8) a fifth of its speed: only
  // for memories with rows enough to use it.
  const bool rows = w && w->precision != Precision::kFloat32 && mem.keys.defined() &&
                    mem.keys.size(0) >= StepWeights::min_rows(w->precision);
  mem.out_reduced = rows ? ReducedLinear::make(w->precision, mem.out_t.t(), mem.out_b) : nullptr;
  const bool packs = w && w->out_p && !mem.out_reduced;
  mem.out_packed = packs ? std::make_shared<const PackedLinear>(mem.out_t, mem.out_b) : nullptr;
}

bool DecoderImpl::optimized() const {
  return path_ == Path::kOptimized ||
         ((path_ == Path::kAuto || path_ == Path::kRecurrence) && !torch::GradMode::is_enabled());
}

bool DecoderImpl::runs_recurrence() const {
  const bool chosen = path_ == Path::kRecurrence || (path_ == Path::kAuto && torch::GradMode::is_enabled());
  return chosen && attention->query_weight().defined() && attention->score_weight().defined() && !opt_.layer_norm;
}

DecoderMemory DecoderImpl::memory(const EncoderOutput& enc) {
  if (!optimized()) return memory(enc, nullptr);
  StepWeightsFor what;
  what.search = !is_training() && !torch::GradMode::is_enabled();  // packed copies need autograd off
  return memory(enc, make_step_weights(what));
}

DecoderMemory DecoderImpl::memory(const EncoderOutput& enc, std::shared_ptr<const StepWeights> weights) {
  const int64_t C = enc.annotations.size(2);
  DecoderMemory m;
  m.context_size = C;
  m.keys = attention->keys(enc.annotations);  // [B, S, A]
  m.values = enc.annotations;                 // [B, S, C]
  if (weights) {
    // The projection of every h_j into the gates of the GRU that reads c_t:
    // bahdanau's cell reads [E y; c], so its W_ih's last C columns; cgru's cell2 reads c (bias included).
    auto proj = cell2 ? F::linear(enc.annotations, cell2->weight_ih, cell2->bias_ih)
                      : F::linear(enc.annotations, cell->weight_ih.narrow(1, opt_.emb_dim, C));  // [B, S, 3D]
    m.values = torch::cat({enc.annotations, proj}, 2);                                          // [B, S, C + 3D]
    m.weights = std::move(weights);
  }
  m.mask = enc.mask;
  if (is_training() && opt_.dec_hidden_dropout > 0) {
    const auto ones = torch::ones({enc.annotations.size(0), opt_.dec_hidden}, enc.annotations.options());  // [B, D]
    m.query_mask = hidden_drop(ones);
    if (cell2) m.prev_mask = hidden_drop(ones);
  }
  m.mask_bias = torch::zeros(enc.mask.sizes(), enc.annotations.options())
                    .masked_fill(enc.mask.logical_not(), -std::numeric_limits<float>::infinity());  // [B, S]
  return m;
}

torch::Tensor DecoderImpl::input_gates(const torch::Tensor& ey) {
  if (cell2) return gate_normed(norm_ih, F::linear(ey, cell->weight_ih, cell->bias_ih));  // [.., 3D]
  return F::linear(ey, cell->weight_ih.narrow(1, 0, opt_.emb_dim), cell->bias_ih);  // [.., 3D]
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> DecoderImpl::recur_fast(const torch::Tensor& gi,
                                                                               const torch::Tensor& state,
                                                                               const DecoderMemory& mem) {
  const auto& w = *mem.weights;
  const int64_t C = mem.context_size, A = w.query_size, G = w.query_t.size(1) - A;  // G = 3D
  const bool q = w.reduced_for(state);
  // cgru: s'_t = GRU1(E y, s_{t-1}) queries; bahdanau: s_{t-1} queries.
  // The states enter the products through the dropout masks (training with dec_hidden_dropout).
  const auto prev = dropped(state, mem.prev_mask);
  auto query = cell2 ? gru_update(gi,
                                  gate_normed(norm_hh, q ? (*w.hidden1_r)(prev)
                                                         : step_linear(prev, w.hidden1_p, w.hidden1_t, w.hidden1_b)),
                                  state)
                     : state;                                                              // [B, D]
  const auto query_in = dropped(query, mem.query_mask);
  auto qg = q ? (*w.query_r)(query_in) : step_linear(query_in, w.query_p, w.query_t, w.query_b);  // [B, A' + 3D]
  auto gh = gate_normed(cell2 ? norm2_hh : norm_hh, qg.narrow(1, A, G));             // [B, 3D]
  const auto qa = A > 0 ? qg.narrow(1, 0, A) : query_in;  // W s for additive/concat attention, else s
  torch::Tensor alpha, cg;                              // [B, S], [B, C + 3D]
  if (A > 0 && additive_attention_step_applies(qa, mem.keys, attention->score_weight(), mem.mask_bias, mem.values)) {
    std::tie(alpha, cg) = additive_attention_step(qa, mem.keys, attention->score_weight(), mem.mask_bias, mem.values);
  } else {
    alpha = torch::softmax(attention->score(qa, mem.keys) + mem.mask_bias, /*dim=*/1);
    cg = torch::bmm(alpha.unsqueeze(1), mem.values).squeeze(1);
  }
  auto c = cg.narrow(1, 0, C), gc = cg.narrow(1, C, G);                              // c_t, W c_t (+ b)
  auto s = cell2 ? gru_update(gate_normed(norm2_ih, gc), gh, query)
                  : gru_update(gate_normed(norm_ih, gi + gc), gh, state);              // [B, D]
  return {s, c, alpha};
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> DecoderImpl::recur_plain(const torch::Tensor& ey,
                                                                                const torch::Tensor& state,
                                                                                const DecoderMemory& mem) {
  const auto annotations = mem.annotations();
  if (cell2) {                                                                      // conditional GRU
    auto s1 = gru_cell(*cell, ey, state, mem.prev_mask, norm_ih, norm_hh);          // [B, D] s'_t
    auto [c, alpha] = attention->forward(dropped(s1, mem.query_mask), mem.keys, annotations, mem.mask);  // [B, C], [B, S]
    return {gru_cell(*cell2, c, s1, mem.query_mask, norm2_ih, norm2_hh), c, alpha};
  }
  auto [c, alpha] = attention->forward(dropped(state, mem.query_mask), mem.keys, annotations, mem.mask);
  return {gru_cell(*cell, torch::cat({ey, c}, 1), state, mem.query_mask, norm_ih, norm_hh), c, alpha};
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> DecoderImpl::run_recurrence(const torch::Tensor& ey,
                                                                                   const EncoderOutput& enc,
                                                                                   const DecoderMemory& mem) {
  RecurrenceWeights w;
  w.cgru = static_cast<bool>(cell2);
  if (cell2) {
    w.hidden1_weight = cell->weight_hh;
    w.hidden1_bias = cell->bias_hh;
    w.context_weight = cell2->weight_ih;
    w.context_bias = cell2->bias_ih;
  } else {
    w.context_weight = cell->weight_ih.narrow(1, opt_.emb_dim, mem.context_size);  // [3D, C]
  }
  std::tie(w.query_weight, w.query_bias) = query_projection(*attention, cell2 ? *cell2 : *cell);  // [A + 3D, D]
  w.score_weight = attention->score_weight();
  auto r = attentive_recurrence(input_gates(ey), enc.init_state, mem.keys, mem.annotations(), mem.mask_bias, w,
                                {mem.query_mask, mem.prev_mask});
  return {std::move(r.states), std::move(r.contexts), std::move(r.alphas)};
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> DecoderImpl::run_steps(const torch::Tensor& ey,
                                                                              const EncoderOutput& enc,
                                                                              const DecoderMemory& mem, bool alphas) {
  const int64_t T = ey.size(1);
  auto s = enc.init_state;  // [B, D]
  std::vector<torch::Tensor> ss, cs, as;
  ss.reserve(T);
  cs.reserve(T);
  const bool fast = mem.weights != nullptr;
  const auto gi = fast ? input_gates(ey) : torch::Tensor();  // [B, T, 3D], all steps at once
  for (int64_t t = 0; t < T; ++t) {
    torch::Tensor c, alpha;
    std::tie(s, c, alpha) = fast ? recur_fast(gi.select(1, t), s, mem)
                                 : recur_plain(ey.select(1, t), s, mem);  // [B, D], [B, C], [B, S]
    ss.push_back(s);
    cs.push_back(c);
    if (alphas) as.push_back(alpha);
  }
  return {torch::stack(ss, 1), torch::stack(cs, 1), as.empty() ? torch::Tensor() : torch::stack(as, 1)};
}

DecoderImpl::Forced DecoderImpl::teacher_forced(const torch::Tensor& tgt_in, const EncoderOutput& enc,
                                                bool want_alpha, const torch::Tensor& tgt_out) {
  const auto mem = memory(enc);
  Forced f;
  f.ey = drop(word_drop(embed(tgt_in)));  // [B, T, E]
  const bool head = want_alpha && has_alignment_head() && tgt_out.defined();
  // [B, T, D], [B, T, C], [B, T, S]
  torch::Tensor alphas;
  std::tie(f.states, f.contexts, alphas) =
      runs_recurrence() ? run_recurrence(f.ey, enc, mem) : run_steps(f.ey, enc, mem, want_alpha && !head);
  if (head)
    f.alpha = align_head(f.states, f.contexts, drop(embed(tgt_out)), mem.annotations(), mem.mask_bias);  // [B, T, S]
  else if (want_alpha)
    f.alpha = alphas;
  return f;
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& tgt_in, const EncoderOutput& enc, torch::Tensor* alpha_out,
                                   const torch::Tensor& tgt_out) {
  auto f = teacher_forced(tgt_in, enc, alpha_out != nullptr, tgt_out);
  if (alpha_out) *alpha_out = f.alpha;
  // The output layer and vocabulary projection run once over all steps.
  return output(f.states, f.contexts, f.ey);  // [B, T, V]
}

torch::Tensor DecoderImpl::alignment(const torch::Tensor& tgt_in, const EncoderOutput& enc,
                                     const torch::Tensor& tgt_out) {
  return teacher_forced(tgt_in, enc, /*want_alpha=*/true, tgt_out).alpha;  // [B, T, S]
}

std::shared_ptr<const StepWeights> DecoderImpl::make_step_weights(const StepWeightsFor& what) {
  auto w = std::make_shared<StepWeights>();
  w->for_search = what.search;
  const auto& reader = cell2 ? *cell2 : *cell;  // the GRU whose hidden state queries the attention
  if (cell2) {
    w->hidden1_t = cell->weight_hh.t().contiguous();  // [D, 3D]
    w->hidden1_b = cell->bias_hh;
  }
  auto [qw, qb] = query_projection(*attention, reader);  // [A' + 3D, D], [A' + 3D]
  w->query_t = qw.t().contiguous();                      // [D, A' + 3D]
  w->query_b = qb;
  w->query_size = qw.size(0) - reader.weight_hh.size(0);
  w->deep_t = deep->weight.t().contiguous();             // [D + C + E, E]
  w->deep_b = deep->bias;
  w->out_t = out_weight.t().contiguous();                // [E, V]
  w->out_b = out_bias;
  const auto& e = embed->weight;
  if (what.gate_table && e.size(0) * cell->weight_hh.size(0) * static_cast<int64_t>(sizeof(float)) <= kGateTableBytes)
    w->gate_table = input_gates(e);  // [V, 3D]
  if (what.search && out_weight.device().is_cpu() && out_weight.scalar_type() == torch::kFloat &&
      PackedLinear::available()) {
    if (cell2) w->hidden1_p = std::make_shared<const PackedLinear>(w->hidden1_t, w->hidden1_b);
    w->query_p = std::make_shared<const PackedLinear>(w->query_t, w->query_b);
    w->deep_p = std::make_shared<const PackedLinear>(w->deep_t, w->deep_b);
    w->out_p = std::make_shared<const PackedLinear>(w->out_t, w->out_b);
  }
  if (what.precision != Precision::kFloat32) add_reduced_weights(*w, what.precision);
  return w;
}

void DecoderImpl::add_reduced_weights(StepWeights& w, Precision p) const {
  if (!out_weight.device().is_cpu())
    throw Error(to_string(p) + " decoding runs on the CPU only (the model is on " + out_weight.device().str() + ")");
  torch::NoGradGuard no_grad;
  w.precision = p;
  if (cell2) w.hidden1_r = ReducedLinear::make(p, cell->weight_hh, cell->bias_hh);
  const auto [qw, qb] = query_projection(*attention, cell2 ? *cell2 : *cell);
  w.query_r = ReducedLinear::make(p, qw, qb);
  w.deep_r = ReducedLinear::make(p, deep->weight, deep->bias);
  w.out_r = ReducedLinear::make(p, out_weight, out_bias);
}

DecoderStep DecoderImpl::step(const torch::Tensor& y_prev, const torch::Tensor& state, const DecoderMemory& mem) {
  DecoderStep out;
  auto ey = drop(word_drop(embed(y_prev)));  // [B, E]
  const bool fast = mem.weights != nullptr;
  if (fast && mem.weights->for_search && torch::GradMode::is_enabled())
    throw Error("a decoder memory made for search (weights without autograd) stepped with autograd on");
  torch::Tensor gi;  // [B, 3D] the first GRU's input gates (optimized path)
  if (fast) {
    // The table is there for search only, where ey is the embedding itself.
    const auto& table = mem.weights->gate_table;
    gi = table.defined() && !is_training() ? table.index_select(0, y_prev) : input_gates(ey);
  }
  std::tie(out.state, out.context, out.alpha) = fast ? recur_fast(gi, state, mem) : recur_plain(ey, state, mem);
  out.logits = output(out.state, out.context, ey, &mem);  // [B, V] or [B, V']
  return out;
}

}  // namespace nmt
