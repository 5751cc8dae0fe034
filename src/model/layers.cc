// The model's layers: encoder, attention variants, alignment head, GRU
// update and dropout (layers.h).
#include "model/layers.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "text/tokenizer.h"

namespace nmt {
namespace F = torch::nn::functional;
namespace rnn_utils = torch::nn::utils::rnn;

EncoderImpl::EncoderImpl(const ModelOptions& opt, torch::nn::Embedding shared_embed) : opt_(opt) {
  opt.validate();
  embed = shared_embed ? shared_embed
                       : register_module("embed", torch::nn::Embedding(
                             torch::nn::EmbeddingOptions(opt.src_vocab, opt.emb_dim).padding_idx(kPadId)));
  rnn = register_module("rnn", torch::nn::GRU(torch::nn::GRUOptions(opt.emb_dim, opt.enc_hidden)
                                                  .num_layers(opt.enc_layers)
                                                  .bidirectional(true)
                                                  .batch_first(true)
                                                  .dropout(opt.enc_layers > 1 ? opt.dropout : 0.0)));
  init = register_module("init", torch::nn::Linear(opt.enc_hidden, opt.dec_hidden));
  drop = register_module("drop", Dropout(opt.dropout));
  word_drop = register_module("word_drop", Dropout(opt.word_dropout, /*whole_vectors=*/true));
  state_drop = register_module("state_drop", Dropout(opt.enc_hidden_dropout));
  if (opt.layer_norm)
    for (int64_t l = 0; l < opt.enc_layers; ++l)
      for (const char* dir : {"", "_reverse"}) {
        const std::string k = "l" + std::to_string(l) + dir;
        // one statement each: the registration order is the parameters' (parameter_shapes())
        auto ih = register_module("norm_ih_" + k, GateNorm(opt.enc_hidden));
        auto hh = register_module("norm_hh_" + k, GateNorm(opt.enc_hidden));
        norms_.emplace(k, std::make_pair(ih, hh));
      }
}

GateNormImpl::GateNormImpl(int64_t hidden) {
  weight = register_parameter("weight", torch::ones({3 * hidden}));
  bias = register_parameter("bias", torch::zeros({3 * hidden}));
}

torch::Tensor GateNormImpl::forward(const torch::Tensor& g) {
  const int64_t H = weight.size(0) / 3;
  constexpr double kEps = 1e-5;
  auto rz = torch::layer_norm(g.narrow(-1, 0, 2 * H), {2 * H}, weight.narrow(0, 0, 2 * H), bias.narrow(0, 0, 2 * H),
                              kEps);                                                                   // [.., 2H]
  auto n = torch::layer_norm(g.narrow(-1, 2 * H, H), {H}, weight.narrow(0, 2 * H, H), bias.narrow(0, 2 * H, H),
                             kEps);                                                                    // [.., H]
  return torch::cat({rz, n}, -1);                                                                      // [.., 3H]
}

torch::Tensor gate_normed(const GateNorm& norm, const torch::Tensor& g) {
  return norm.is_empty() ? g : norm.ptr()->forward(g);
}

namespace {

// For each sentence, its positions [0, len) reversed and the padding after
// them left in place: [B, S] int64, from mask [B, S] (true on real
// positions); its own inverse.
torch::Tensor reverse_within_length(const torch::Tensor& mask) {
  const auto len = mask.sum(1, /*keepdim=*/true);                                      // [B, 1]
  const auto t = torch::arange(mask.size(1), mask.options().dtype(torch::kLong)).unsqueeze(0);  // [1, S]
  return torch::where(t < len, len - 1 - t, t);                                          // [B, S]
}

// x [B, S, F] with its positions reordered by index [B, S].
torch::Tensor take_positions(const torch::Tensor& x, const torch::Tensor& index) {
  return x.gather(1, index.unsqueeze(2).expand({-1, -1, x.size(2)}));
}

// One direction of a GRU layer over input [B, S, F] from a zero state, step
// by step (weights: W_ih, W_hh, b_ih, b_hh, as torch::gru takes them) ->
// [B, S, H]: the state masked by state_mask [B, H] where it enters W_hh when
// the mask is defined, the products W_ih x + b_ih and W_hh h + b_hh
// normalized by `norms` when they are not empty. The gates' element-wise
// work runs in the input's dtype (float under CPU autocast, whose products
// give bfloat16).
torch::Tensor stepped_gru(const torch::Tensor& input, const std::vector<torch::Tensor>& w,
                          const torch::Tensor& state_mask, const std::pair<GateNorm, GateNorm>& norms) {
  const auto gi = gate_normed(norms.first, F::linear(input, w[0], w[2])).to(input.scalar_type());  // [B, S, 3H], once
  auto h = torch::zeros({input.size(0), w[1].size(1)}, input.options());                       // [B, H]
  std::vector<torch::Tensor> states;
  states.reserve(input.size(1));
  for (int64_t t = 0; t < input.size(1); ++t) {
    const auto in = state_mask.defined() ? h * state_mask : h;
    const auto gh = gate_normed(norms.second, F::linear(in, w[1], w[3]));  // [B, 3H]
    h = gru_update(gi.select(1, t), gh.to(h.scalar_type()), h);
    states.push_back(h);
  }
  return torch::stack(states, 1);  // [B, S, H]
}

}  // namespace

EncoderOutput EncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& src_len) {
  const int64_t S = src.size(1);
  auto x = drop(word_drop(embed(src)));  // [B, S, E]
  EncoderOutput enc;
  enc.mask = src.ne(kPadId);  // [B, S]
  if (src_len.defined() && !stepped()) {
    auto packed = rnn_utils::pack_padded_sequence(x, src_len.cpu(), /*batch_first=*/true, /*enforce_sorted=*/false);
    auto out = std::get<0>(rnn->forward_with_packed_input(packed));
    enc.annotations = std::get<0>(rnn_utils::pad_packed_sequence(out, /*batch_first=*/true, /*padding_value=*/0.0, S));
  } else {
    enc.annotations = recur_in_place(x, enc.mask);
  }
  // [B, S, 2H]
  // The backward direction's annotation of the first word summarizes the sentence.
  auto backward_first = enc.annotations.select(1, 0).narrow(1, opt_.enc_hidden, opt_.enc_hidden);  // [B, H]
  enc.init_state = torch::tanh(init(backward_first));                                              // [B, D]
  enc.annotations = drop(enc.annotations);
  return enc;
}

// The bidirectional GRU of forward() over the padded batch: each layer runs
// one direction over the batch as it is (padding comes after a sentence, so
// it never reaches that sentence's states) and the other over each sentence
// reversed within its length; the padding's states are then zeroed, as
// unpacking leaves them. Layers are joined with the GRU module's dropout.
// With state masks (enc_hidden_dropout in training) or layer normalization
// each direction runs stepped_gru(), with a mask of its own drawn before it
// runs and its own norms.
torch::Tensor EncoderImpl::recur_in_place(const torch::Tensor& x, const torch::Tensor& mask) {
  const auto reversed = reverse_within_length(mask);  // [B, S]
  const auto weights = rnn->named_parameters();
  const auto layer = [&](const std::string& name) {
    return std::vector<torch::Tensor>{weights["weight_ih_" + name], weights["weight_hh_" + name],
                                      weights["bias_ih_" + name], weights["bias_hh_" + name]};
  };
  const auto h0 = torch::zeros({1, x.size(0), opt_.enc_hidden}, x.options());  // [1, B, H]
  auto in = x;
  for (int64_t l = 0; l < opt_.enc_layers; ++l) {
    const auto k = "l" + std::to_string(l);
    auto run = [&](const torch::Tensor& input, const std::string& name) {  // [B, S, F] -> [B, S, H]
      if (stepped()) {
        const auto mask = state_masks() ? state_drop(torch::ones_like(h0[0])) : torch::Tensor();
        const auto norms = opt_.layer_norm ? norms_.at(name) : std::pair<GateNorm, GateNorm>(nullptr, nullptr);
        return stepped_gru(input, layer(name), mask, norms);
      }
      return std::get<0>(torch::gru(input, h0, layer(name), /*has_biases=*/true, /*num_layers=*/1, /*dropout=*/0.0,
                                    is_training(), /*bidirectional=*/false, /*batch_first=*/true));
    };
    const auto forward_states = run(in, k);
    const auto backward_states = take_positions(run(take_positions(in, reversed), k + "_reverse"), reversed);
    in = torch::cat({forward_states, backward_states}, 2);  // [B, S, 2H]
    if (l + 1 < opt_.enc_layers) in = F::dropout(in, F::DropoutFuncOptions().p(opt_.dropout).training(is_training()));
  }
  return in.masked_fill(mask.logical_not().unsqueeze(2), 0.0);
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

}  // namespace nmt
