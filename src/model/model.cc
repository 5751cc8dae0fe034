// Bahdanau attention model: encoder, attention variants, decoder, loss.
#include "model/model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "base/error.h"
#include "model/step_kernels.h"
#include "model/packed_linear.h"
#include "model/quantized.h"
#include "model/recurrence.h"
#include "text/tokenizer.h"

namespace nmt {
namespace F = torch::nn::functional;
namespace rnn_utils = torch::nn::utils::rnn;

EncoderImpl::EncoderImpl(const ModelOptions& opt) : opt_(opt) {
  opt.validate();
  embed = register_module("embed", torch::nn::Embedding(
      torch::nn::EmbeddingOptions(opt.src_vocab, opt.emb_dim).padding_idx(kPadId)));
  rnn = register_module("rnn", torch::nn::GRU(torch::nn::GRUOptions(opt.emb_dim, opt.enc_hidden)
                                                  .num_layers(opt.enc_layers)
                                                  .bidirectional(true)
                                                  .batch_first(true)
                                                  .dropout(opt.enc_layers > 1 ? opt.dropout : 0.0)));
  init = register_module("init", torch::nn::Linear(opt.enc_hidden, opt.dec_hidden));
  drop = register_module("drop", Dropout(opt.dropout));
  word_drop = register_module("word_drop", Dropout(opt.word_dropout, /*whole_vectors=*/true));
}

EncoderOutput EncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& src_len) {
  const int64_t S = src.size(1);
  auto x = drop(word_drop(embed(src)));  // [B, S, E]
  auto packed = rnn_utils::pack_padded_sequence(x, src_len.cpu(), /*batch_first=*/true, /*enforce_sorted=*/false);
  auto out = std::get<0>(rnn->forward_with_packed_input(packed));
  auto padded = rnn_utils::pad_packed_sequence(out, /*batch_first=*/true, /*padding_value=*/0.0, S);
  EncoderOutput enc;
  enc.annotations = std::get<0>(padded);  // [B, S, 2H]
  enc.mask = src.ne(kPadId);              // [B, S]
  // The backward direction's annotation of the first word summarizes the sentence.
  auto backward_first = enc.annotations.select(1, 0).narrow(1, opt_.enc_hidden, opt_.enc_hidden);  // [B, H]
  enc.init_state = torch::tanh(init(backward_first));                                              // [B, D]
  enc.annotations = drop(enc.annotations);
  return enc;
}

AttentionImpl::AttentionImpl(const ModelOptions& opt) : type_(opt.attention) {
  const int64_t C = 2 * opt.enc_hidden;
  switch (type_) {
    case AttentionType::kAdditive:
    case AttentionType::kConcat:
      // concat's W_a [s; h] is split as W s + U h: the same function, with keys precomputed.
      W = register_module("W", torch::nn::Linear(torch::nn::LinearOptions(opt.dec_hidden, opt.attn_dim).bias(false)));
      U = register_module("U", torch::nn::Linear(torch::nn::LinearOptions(C, opt.attn_dim).bias(type_ == AttentionType::kAdditive)));
      v = register_module("v", torch::nn::Linear(torch::nn::LinearOptions(opt.attn_dim, 1).bias(false)));
      break;
    case AttentionType::kGeneral:
      U = register_module("U", torch::nn::Linear(torch::nn::LinearOptions(C, opt.dec_hidden).bias(false)));
      break;
    case AttentionType::kDot:
    case AttentionType::kNone:
      break;
  }
}

torch::Tensor AttentionImpl::keys(const torch::Tensor& annotations) {
  if (U) return U(annotations);  // [B, S, A] or [B, S, D]
  return annotations;            // [B, S, C]
}

torch::Tensor AttentionImpl::score(const torch::Tensor& q, const torch::Tensor& keys) {
  switch (type_) {
    case AttentionType::kAdditive:
    case AttentionType::kConcat:
      // v^T tanh(U h_j + W s): [B, S, A] x [A, 1] -> [B, S]
      return torch::matmul(torch::tanh(keys + q.unsqueeze(1)), v->weight.t()).squeeze(2);
    case AttentionType::kGeneral:
    case AttentionType::kDot:
      return torch::bmm(keys, q.unsqueeze(2)).squeeze(2);  // [B, S, D] x [B, D, 1] -> [B, S]
    case AttentionType::kNone:
      break;
  }
  return torch::zeros({keys.size(0), keys.size(1)}, keys.options());  // uniform over real positions
}

std::pair<torch::Tensor, torch::Tensor> AttentionImpl::forward(const torch::Tensor& query, const torch::Tensor& keys,
                                                               const torch::Tensor& annotations,
                                                               const torch::Tensor& mask) {
  auto scores = score(W ? W(query) : query, keys);  // [B, S]
  scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity());
  auto alpha = torch::softmax(scores, /*dim=*/1);                             // [B, S]
  auto context = torch::bmm(alpha.unsqueeze(1), annotations).squeeze(1);     // [B, 1, S] x [B, S, C] -> [B, C]
  return {context, alpha};
}

AlignmentHeadImpl::AlignmentHeadImpl(const ModelOptions& opt) {
  const int64_t C = 2 * opt.enc_hidden, A = opt.alignment_head;
  query = register_module("query", torch::nn::Linear(opt.dec_hidden + C + opt.emb_dim, A));
  key = register_module("key", torch::nn::Linear(torch::nn::LinearOptions(C, A).bias(false)));
}

torch::Tensor AlignmentHeadImpl::forward(const torch::Tensor& states, const torch::Tensor& contexts,
                                         const torch::Tensor& ey, const torch::Tensor& annotations,
                                         const torch::Tensor& mask_bias) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(key->weight.size(0)));
  auto q = torch::tanh(query(torch::cat({states, contexts, ey}, -1))) * scale;  // [B, T, A]
  auto k = key(annotations);                                                     // [B, S, A]
  auto scores = torch::baddbmm(mask_bias.unsqueeze(1), q, k.transpose(1, 2));    // [B, T, S]
  return torch::softmax(scores, -1);                                             // [B, T, S]
}

torch::Tensor gru_update(const torch::Tensor& gi, const torch::Tensor& gh, const torch::Tensor& h) {
  // On CUDA, LibTorch's fused GRU kernel does the whole update (and its backward) in one launch each.
  if (gi.is_cuda()) return std::get<0>(at::_thnn_fused_gru_cell(gi.contiguous(), gh.contiguous(), h.contiguous()));
  const int64_t D = h.size(-1);
  auto rz = torch::sigmoid(gi.narrow(-1, 0, 2 * D) + gh.narrow(-1, 0, 2 * D));  // [B, 2D]
  auto r = rz.narrow(-1, 0, D), z = rz.narrow(-1, D, D);                         // [B, D] each
  auto n = torch::tanh(gi.narrow(-1, 2 * D, D) + r * gh.narrow(-1, 2 * D, D));   // [B, D]
  return n + z * (h - n);                                                        // (1 - z) n + z h
}

namespace {
thread_local at::Generator* t_dropout_generator = nullptr;  // the newest DropoutRng on this thread
}  // namespace

DropoutRng::DropoutRng(uint64_t seed)
    : gen_(at::make_generator<at::CPUGeneratorImpl>(seed)), outer_(t_dropout_generator) {
  t_dropout_generator = &gen_;
}

DropoutRng::~DropoutRng() { t_dropout_generator = outer_; }

torch::Tensor DropoutImpl::forward(const torch::Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  const bool own_rng = t_dropout_generator != nullptr && x.device().is_cpu();
  if (!whole_vectors_ && !own_rng) return torch::dropout(x, p_, /*train=*/true);
  // For elements, what torch::dropout does on the CPU, with this thread's
  // generator; for whole vectors, one draw per vector broadcast over it.
  torch::Tensor noise;  // [..., E], or [..., 1] for whole vectors
  if (whole_vectors_) {
    auto shape = x.sizes().vec();
    shape.back() = 1;
    noise = torch::empty(shape, x.options());
  } else {
    noise = torch::empty_like(x);
  }
  if (own_rng)
    noise.bernoulli_(1 - p_, *t_dropout_generator);
  else
    noise.bernoulli_(1 - p_);
  return x * noise.div_(1 - p_);
}

namespace {

// x W^T + b with the weight given transposed: x [.., K], wt [K, N], b [N] -> [.., N].
torch::Tensor linear_t(const torch::Tensor& x, const torch::Tensor& wt, const torch::Tensor& b) {
  if (x.dim() == 2) return torch::addmm(b, x, wt);
  auto shape = x.sizes().vec();
  shape.back() = wt.size(1);
  return torch::addmm(b, x.reshape({-1, x.size(-1)}), wt).view(shape);
}

// linear_t() through the packed copy `p` where there is one (search on an AVX-512 CPU).
torch::Tensor step_linear(const torch::Tensor& x, const std::shared_ptr<const PackedLinear>& p, const torch::Tensor& wt,
                          const torch::Tensor& b) {
  if (p && x.dim() == 2 && x.device().is_cpu() && !torch::GradMode::is_enabled()) return (*p)(x);
  return linear_t(x, wt, b);
}

// The attention's query projection W [A, D] stacked over the hidden projection
// of `reader`, the GRU whose state queries: {weight [A' + 3D, D], bias [A' + 3D]}
// with zeros for W's bias; A' = 0 where the attention projects no query.
std::pair<torch::Tensor, torch::Tensor> query_projection(const AttentionImpl& attention,
                                                         const torch::nn::GRUCellImpl& reader) {
  const auto wa = attention.query_weight();  // [A, D] or undefined
  if (!wa.defined()) return {reader.weight_hh, reader.bias_hh};
  return {torch::cat({wa, reader.weight_hh}, 0),
          torch::cat({torch::zeros({wa.size(0)}, reader.bias_hh.options()), reader.bias_hh})};
}

}  // namespace

DecoderMemory DecoderMemory::repeat(int64_t copies) const {
  if (copies == 1) return *this;
  DecoderMemory m = *this;
  m.keys = keys.repeat_interleave(copies, 0);
  m.values = values.repeat_interleave(copies, 0);
  m.mask = mask.repeat_interleave(copies, 0);
  m.mask_bias = mask_bias.repeat_interleave(copies, 0);
  return m;
}

DecoderMemory DecoderMemory::index_select(const torch::Tensor& rows) const {
  DecoderMemory m = *this;
  m.keys = keys.index_select(0, rows);
  m.values = values.index_select(0, rows);
  m.mask = mask.index_select(0, rows);
  m.mask_bias = mask_bias.index_select(0, rows);
  return m;
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
  if (opt.alignment_head > 0) align_head = register_module("align_head", AlignmentHead(opt));
}

torch::Tensor DecoderImpl::output(const torch::Tensor& s, const torch::Tensor& c, const torch::Tensor& ey,
                                  const DecoderMemory* mem) {
  const auto* q = reduced_now(s);
  const StepWeights* w = mem ? mem->weights.get() : nullptr;
  auto x = torch::cat({s, c, ey}, -1);  // [.., D + C + E]
  auto t = drop(torch::tanh(q ? (*q->deep)(x) : w ? step_linear(x, w->deep_p, w->deep_t, w->deep_b) : deep(x)));  // [.., E]
  if (mem && mem->out_t.defined()) {
    if (q && mem->out_reduced) return (*mem->out_reduced)(t);     // [.., V']
    return step_linear(t, mem->out_packed, mem->out_t, mem->out_b);  // [.., V']
  }
  if (q) return (*q->out)(t);
  return w ? step_linear(t, w->out_p, w->out_t, w->out_b) : F::linear(t, out_weight, out_bias);  // [.., V]
}

void DecoderImpl::restrict_output(DecoderMemory& mem, const torch::Tensor& ids) const {
  mem.out_t = out_weight.t().index_select(1, ids);  // [E, V']
  mem.out_b = out_bias.index_select(0, ids);        // [V']
  // Packing an int8 copy per batch cost greedy search (64 rows, never int8) a fifth of its speed: only
  // for memories with rows enough to use it.
  const bool rows = reduced_ && mem.keys.defined() && mem.keys.size(0) >= min_rows(reduced_->precision);
  mem.out_reduced = rows ? ReducedLinear::make(reduced_->precision, mem.out_t.t(), mem.out_b) : nullptr;
  const bool packs = mem.weights && mem.weights->out_p && !mem.out_reduced;
  mem.out_packed = packs ? std::make_shared<const PackedLinear>(mem.out_t, mem.out_b) : nullptr;
}

int64_t DecoderImpl::min_rows(Precision p) { return p == Precision::kInt8 ? kInt8MinRows : 1; }

Precision DecoderImpl::precision() const { return reduced_ ? reduced_->precision : Precision::kFloat32; }

void DecoderImpl::set_int8(bool on) { set_precision(on ? Precision::kInt8 : Precision::kFloat32); }

bool DecoderImpl::int8() const { return precision() == Precision::kInt8; }

void DecoderImpl::set_precision(Precision p) {
  if (p == Precision::kFloat32) {
    reduced_.reset();
    return;
  }
  if (!out_weight.device().is_cpu())
    throw Error(to_string(p) + " decoding runs on the CPU only (the model is on " + out_weight.device().str() + ")");
  torch::NoGradGuard no_grad;
  auto w = std::make_shared<ReducedWeights>();
  w->precision = p;
  if (cell2) w->hidden1 = ReducedLinear::make(p, cell->weight_hh, cell->bias_hh);
  const auto [qw, qb] = query_projection(*attention, cell2 ? *cell2 : *cell);
  w->query = ReducedLinear::make(p, qw, qb);
  w->deep = ReducedLinear::make(p, deep->weight, deep->bias);
  w->out = ReducedLinear::make(p, out_weight, out_bias);
  reduced_ = std::move(w);
}

const DecoderImpl::ReducedWeights* DecoderImpl::reduced_now(const torch::Tensor& x) const {
  const bool use = reduced_ && !torch::GradMode::is_enabled() && x.device().is_cpu() && x.dim() > 0 &&
                   x.numel() / x.size(-1) >= min_rows(reduced_->precision);  // rows, however many leading dimensions
  return use ? reduced_.get() : nullptr;
}

bool DecoderImpl::optimized() const {
  return path_ == Path::kOptimized ||
         ((path_ == Path::kAuto || path_ == Path::kRecurrence) && !torch::GradMode::is_enabled());
}

bool DecoderImpl::runs_recurrence() const {
  const bool chosen = path_ == Path::kRecurrence || (path_ == Path::kAuto && torch::GradMode::is_enabled());
  return chosen && attention->query_weight().defined() && attention->score_weight().defined();
}

bool DecoderImpl::runs_optimized(const DecoderMemory& mem) const {
  return optimized() && mem.values.size(2) > mem.context_size;  // needs memory() to have projected h_j
}

DecoderMemory DecoderImpl::memory(const EncoderOutput& enc) {
  const int64_t C = enc.annotations.size(2);
  DecoderMemory m;
  m.context_size = C;
  m.keys = attention->keys(enc.annotations);  // [B, S, A]
  m.values = enc.annotations;                 // [B, S, C]
  if (optimized()) {
    // The projection of every h_j into the gates of the GRU that reads c_t:
    // bahdanau's cell reads [E y; c], so its W_ih's last C columns; cgru's cell2 reads c (bias included).
    auto proj = cell2 ? F::linear(enc.annotations, cell2->weight_ih, cell2->bias_ih)
                      : F::linear(enc.annotations, cell->weight_ih.narrow(1, opt_.emb_dim, C));  // [B, S, 3D]
    m.values = torch::cat({enc.annotations, proj}, 2);                                          // [B, S, C + 3D]
    m.weights = step_weights();
  }
  m.mask = enc.mask;
  m.mask_bias = torch::zeros(enc.mask.sizes(), enc.annotations.options())
                    .masked_fill(enc.mask.logical_not(), -std::numeric_limits<float>::infinity());  // [B, S]
  return m;
}

torch::Tensor DecoderImpl::input_gates(const torch::Tensor& ey) {
  if (cell2) return F::linear(ey, cell->weight_ih, cell->bias_ih);               // [.., 3D]
  return F::linear(ey, cell->weight_ih.narrow(1, 0, opt_.emb_dim), cell->bias_ih);  // [.., 3D]
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> DecoderImpl::recur_fast(const torch::Tensor& gi,
                                                                               const torch::Tensor& state,
                                                                               const DecoderMemory& mem) {
  const auto& w = *mem.weights;
  const int64_t C = mem.context_size, A = w.query_size, G = w.query_t.size(1) - A;  // G = 3D
  const auto* q = reduced_now(state);
  // cgru: s'_t = GRU1(E y, s_{t-1}) queries; bahdanau: s_{t-1} queries.
  auto query = cell2 ? gru_update(gi, q ? (*q->hidden1)(state) : step_linear(state, w.hidden1_p, w.hidden1_t, w.hidden1_b),
                                  state)
                     : state;                                                              // [B, D]
  auto qg = q ? (*q->query)(query) : step_linear(query, w.query_p, w.query_t, w.query_b);  // [B, A' + 3D]
  auto gh = qg.narrow(1, A, G);                                                      // [B, 3D]
  const auto qa = A > 0 ? qg.narrow(1, 0, A) : query;  // W s for additive/concat attention, else s
  torch::Tensor alpha, cg;                              // [B, S], [B, C + 3D]
  if (A > 0 && additive_attention_step_applies(qa, mem.keys, attention->score_weight(), mem.mask_bias, mem.values)) {
    std::tie(alpha, cg) = additive_attention_step(qa, mem.keys, attention->score_weight(), mem.mask_bias, mem.values);
  } else {
    alpha = torch::softmax(attention->score(qa, mem.keys) + mem.mask_bias, /*dim=*/1);
    cg = torch::bmm(alpha.unsqueeze(1), mem.values).squeeze(1);
  }
  auto c = cg.narrow(1, 0, C), gc = cg.narrow(1, C, G);                              // c_t, W c_t (+ b)
  auto s = cell2 ? gru_update(gc, gh, query) : gru_update(gi + gc, gh, state);       // [B, D]
  return {s, c, alpha};
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> DecoderImpl::recur_reference(const torch::Tensor& ey,
                                                                                    const torch::Tensor& state,
                                                                                    const DecoderMemory& mem) {
  const auto annotations = mem.annotations();
  if (cell2) {                                                                 // conditional GRU
    auto s1 = cell(ey, state);                                                 // [B, D] s'_t
    auto [c, alpha] = attention->forward(s1, mem.keys, annotations, mem.mask);  // [B, C], [B, S]
    return {cell2(c, s1), c, alpha};
  }
  auto [c, alpha] = attention->forward(state, mem.keys, annotations, mem.mask);
  return {cell(torch::cat({ey, c}, 1), state), c, alpha};
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& tgt_in, const EncoderOutput& enc, torch::Tensor* alpha_out,
                                   const torch::Tensor& tgt_out) {
  const int64_t T = tgt_in.size(1);
  const auto mem = memory(enc);
  auto ey = drop(word_drop(embed(tgt_in)));  // [B, T, E]
  const bool head = alpha_out != nullptr && has_alignment_head() && tgt_out.defined();
  torch::Tensor states, contexts, alphas;  // [B, T, D], [B, T, C], [B, T, S]
  if (runs_recurrence()) {
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
    auto r = attentive_recurrence(input_gates(ey), enc.init_state, mem.keys, mem.annotations(), mem.mask_bias, w);
    states = std::move(r.states);
    contexts = std::move(r.contexts);
    alphas = std::move(r.alphas);
  } else {
    auto s = enc.init_state;  // [B, D]
    std::vector<torch::Tensor> ss, cs, as;
    ss.reserve(T);
    cs.reserve(T);
    const bool fast = runs_optimized(mem);
    const auto gi = fast ? input_gates(ey) : torch::Tensor();  // [B, T, 3D], all steps at once
    for (int64_t t = 0; t < T; ++t) {
      torch::Tensor c, alpha;
      std::tie(s, c, alpha) = fast ? recur_fast(gi.select(1, t), s, mem)
                                   : recur_reference(ey.select(1, t), s, mem);  // [B, D], [B, C], [B, S]
      ss.push_back(s);
      cs.push_back(c);
      if (alpha_out && !head) as.push_back(alpha);
    }
    states = torch::stack(ss, 1);
    contexts = torch::stack(cs, 1);
    if (!as.empty()) alphas = torch::stack(as, 1);
  }
  if (head)
    *alpha_out = align_head(states, contexts, drop(embed(tgt_out)), mem.annotations(), mem.mask_bias);  // [B, T, S]
  else if (alpha_out)
    *alpha_out = alphas;
  // The output layer and vocabulary projection run once over all steps.
  return output(states, contexts, ey);  // [B, T, V]
}

std::shared_ptr<const StepWeights> DecoderImpl::make_step_weights(bool for_search) {
  auto w = std::make_shared<StepWeights>();
  w->for_search = for_search;
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
  if (for_search && e.size(0) * cell->weight_hh.size(0) * static_cast<int64_t>(sizeof(float)) <= kGateTableBytes)
    w->gate_table = input_gates(e);  // [V, 3D]
  if (for_search && out_weight.device().is_cpu() && out_weight.scalar_type() == torch::kFloat &&
      PackedLinear::available()) {
    if (cell2) w->hidden1_p = std::make_shared<const PackedLinear>(w->hidden1_t, w->hidden1_b);
    w->query_p = std::make_shared<const PackedLinear>(w->query_t, w->query_b);
    w->deep_p = std::make_shared<const PackedLinear>(w->deep_t, w->deep_b);
    w->out_p = std::make_shared<const PackedLinear>(w->out_t, w->out_b);
  }
  return w;
}

bool DecoderImpl::searching() const { return !is_training() && !torch::GradMode::is_enabled(); }

std::shared_ptr<const StepWeights> DecoderImpl::step_weights() {
  if (!searching()) return make_step_weights(/*for_search=*/false);
  // Each parameter's storage (held, so that its address cannot be reused), offset and
  // version: an in-place change bumps the version, a move or load replaces the storage.
  std::vector<ParamStamp> key;
  for (const auto& p : parameters()) key.push_back({p.storage(), p.storage_offset(), p._version()});
  const std::lock_guard<std::mutex> lock(step_weights_mutex_);
  if (!step_weights_ || key != step_weights_key_) {
    step_weights_ = make_step_weights(/*for_search=*/true);
    step_weights_key_ = std::move(key);
  }
  return step_weights_;
}

DecoderStep DecoderImpl::step(const torch::Tensor& y_prev, const torch::Tensor& state, const DecoderMemory& given) {
  DecoderStep out;
  auto ey = drop(word_drop(embed(y_prev)));  // [B, E]
  const bool fast = runs_optimized(given);
  // A memory made for search carries weights autograd does not see: a step in training
  // mode or under autograd multiplies with fresh ones instead.
  DecoderMemory fresh;
  if (given.weights && given.weights->for_search && !searching()) {
    fresh = given;
    fresh.weights = make_step_weights(/*for_search=*/false);
  }
  const DecoderMemory& mem = fresh.weights ? fresh : given;
  torch::Tensor gi;  // [B, 3D] the first GRU's input gates (optimized path)
  if (fast) {
    // The table is there for search only, where ey is the embedding itself.
    const auto& table = mem.weights->gate_table;
    gi = table.defined() ? table.index_select(0, y_prev) : input_gates(ey);
  }
  std::tie(out.state, out.context, out.alpha) = fast ? recur_fast(gi, state, mem) : recur_reference(ey, state, mem);
  out.logits = output(out.state, out.context, ey, &mem);  // [B, V] or [B, V']
  return out;
}

Seq2SeqImpl::Seq2SeqImpl(const ModelOptions& opt) : opt_(opt) {
  opt.validate();
  encoder = register_module("encoder", Encoder(opt));
  decoder = register_module("decoder", Decoder(opt));
}

torch::Tensor Seq2SeqImpl::forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                   torch::Tensor* alpha_out) {
  return decoder->forward(tgt_in, encoder->forward(src, src_len), alpha_out);
}

std::pair<torch::Tensor, torch::Tensor> Seq2SeqImpl::forward_aligned(const torch::Tensor& src,
                                                                     const torch::Tensor& src_len,
                                                                     const torch::Tensor& tgt_in,
                                                                     const torch::Tensor& tgt_out) {
  torch::Tensor alignment;
  auto logits = decoder->forward(tgt_in, encoder->forward(src, src_len), &alignment, tgt_out);
  return {logits, alignment};
}

torch::Tensor guided_alignment_loss(const torch::Tensor& alpha, const torch::Tensor& guide) {
  return -(guide * torch::log(alpha.clamp_min(1e-9))).sum();
}

namespace {

// Label-smoothed cross-entropy summed over the rows whose target is not
// padding, with a hand-written backward. F::cross_entropy computes the same
// loss with a dozen passes over the [N, V] logits forward and backward (the
// log-softmax, the smoothing term's sum, the gradients of both and of the
// NLL as separate dense tensors); here the forward makes the log-softmax and
// one sum, and the backward turns the saved log-probabilities into the
// gradient in place: g * (softmax - (1 - eps) onehot(target) - eps / V).
// The saved log-probabilities are consumed, so the graph runs backward once.
struct SmoothedCrossEntropy : torch::autograd::Function<SmoothedCrossEntropy> {
  // logits [N, V], target [N] int64 -> scalar.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& target, double eps) {
    const int64_t V = logits.size(1);
    auto lp = torch::log_softmax(logits, 1);                             // [N, V]
    auto keep = target.ne(kPadId).to(logits.scalar_type());              // [N]
    auto lp_target = lp.gather(1, target.unsqueeze(1)).squeeze(1);       // [N]
    auto row = lp_target * (1.0 - eps);                                  // [N]
    if (eps > 0) row = row + lp.sum(1) * (eps / static_cast<double>(V));
    ctx->save_for_backward({lp, target, keep});
    ctx->saved_data["eps"] = eps;
    return -(row * keep).sum();
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto grad = saved[0];  // the log-probabilities, turned into the gradient in place
    const auto& target = saved[1];
    const double eps = ctx->saved_data["eps"].toDouble();
    const int64_t V = grad.size(1);
    auto w = (saved[2] * grad_out[0]).unsqueeze(1);  // [N, 1]: the upstream gradient, 0 on padding
    grad.exp_();                                      // softmax
    if (eps > 0) grad.sub_(eps / static_cast<double>(V));
    grad.mul_(w);
    grad.scatter_add_(1, target.unsqueeze(1), w * -(1.0 - eps));
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor sequence_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing) {
  return SmoothedCrossEntropy::apply(logits.reshape({-1, logits.size(-1)}), tgt_out.reshape({-1}), label_smoothing);
}

std::vector<ParameterShape> parameter_shapes(const ModelOptions& opt) {
  std::vector<ParameterShape> out;
  auto add = [&](std::string name, std::vector<int64_t> shape) { out.push_back({std::move(name), std::move(shape)}); };
  auto linear = [&](const std::string& name, int64_t in, int64_t n, bool bias) {
    add(name + ".weight", {n, in});
    if (bias) add(name + ".bias", {n});
  };
  auto gru_cell = [&](const std::string& name, int64_t in, int64_t h) {  // GRUCell: weight_ih, weight_hh, bias_ih, bias_hh
    add(name + ".weight_ih", {3 * h, in});
    add(name + ".weight_hh", {3 * h, h});
    add(name + ".bias_ih", {3 * h});
    add(name + ".bias_hh", {3 * h});
  };
  const int64_t E = opt.emb_dim, H = opt.enc_hidden, C = 2 * opt.enc_hidden, D = opt.dec_hidden, A = opt.attn_dim;
  // Encoder: embedding, a bidirectional GRU of enc_layers (per layer and
  // direction: w_ih, w_hh, b_ih, b_hh), the decoder's initial state.
  add("encoder.embed.weight", {opt.src_vocab, E});
  for (int64_t l = 0; l < opt.enc_layers; ++l)
    for (const char* dir : {"", "_reverse"}) {
      const std::string k = "_l" + std::to_string(l) + dir;
      const int64_t in = l == 0 ? E : C;
      add("encoder.rnn.weight_ih" + k, {3 * H, in});
      add("encoder.rnn.weight_hh" + k, {3 * H, H});
      add("encoder.rnn.bias_ih" + k, {3 * H});
      add("encoder.rnn.bias_hh" + k, {3 * H});
    }
  linear("encoder.init", H, D, true);
  // Decoder: its own output layer first (a module's parameters precede its
  // children's), then embedding, attention, recurrence, deep output.
  if (!opt.tie_embeddings) add("decoder.out_weight", {opt.tgt_vocab, E});
  add("decoder.out_bias", {opt.tgt_vocab});
  add("decoder.embed.weight", {opt.tgt_vocab, E});
  switch (opt.attention) {
    case AttentionType::kAdditive:
    case AttentionType::kConcat:
      linear("decoder.attention.W", D, A, false);
      linear("decoder.attention.U", C, A, opt.attention == AttentionType::kAdditive);
      linear("decoder.attention.v", A, 1, false);
      break;
    case AttentionType::kGeneral:
      linear("decoder.attention.U", C, D, false);
      break;
    case AttentionType::kDot:
    case AttentionType::kNone:
      break;
  }
  if (opt.decoder == DecoderType::kCgru) {
    gru_cell("decoder.cell", E, D);
    gru_cell("decoder.cell2", C, D);
  } else {
    gru_cell("decoder.cell", E + C, D);
  }
  linear("decoder.deep", D + C + E, E, true);
  if (opt.alignment_head > 0) {
    linear("decoder.align_head.query", D + C + E, opt.alignment_head, true);
    linear("decoder.align_head.key", C, opt.alignment_head, false);
  }
  return out;
}

int64_t count_parameters(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace nmt
