// Bahdanau attention model: encoder, attention variants, decoder, loss.
#include "model/model.h"

#include <cmath>

#include "base/error.h"
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
  drop = register_module("drop", torch::nn::Dropout(opt.dropout));
}

EncoderOutput EncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& src_len) {
  const int64_t S = src.size(1);
  auto x = drop(embed(src));  // [B, S, E]
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

std::pair<torch::Tensor, torch::Tensor> AttentionImpl::forward(const torch::Tensor& query, const torch::Tensor& keys,
                                                               const torch::Tensor& annotations,
                                                               const torch::Tensor& mask) {
  torch::Tensor scores;  // [B, S]
  switch (type_) {
    case AttentionType::kAdditive:
    case AttentionType::kConcat:
      scores = v(torch::tanh(keys + W(query).unsqueeze(1))).squeeze(2);  // [B, S, A] -> [B, S]
      break;
    case AttentionType::kGeneral:
    case AttentionType::kDot:
      scores = torch::bmm(keys, query.unsqueeze(2)).squeeze(2);  // [B, S, D] x [B, D, 1] -> [B, S]
      break;
    case AttentionType::kNone:
      scores = torch::zeros(mask.sizes(), annotations.options());  // uniform over real positions
      break;
  }
  scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity());
  auto alpha = torch::softmax(scores, /*dim=*/1);                             // [B, S]
  auto context = torch::bmm(alpha.unsqueeze(1), annotations).squeeze(1);     // [B, 1, S] x [B, S, C] -> [B, C]
  return {context, alpha};
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
  drop = register_module("drop", torch::nn::Dropout(opt.dropout));
}

torch::Tensor DecoderImpl::output(const torch::Tensor& s, const torch::Tensor& c, const torch::Tensor& ey) {
  auto t = torch::tanh(deep(torch::cat({s, c, ey}, -1)));  // [.., E]
  return F::linear(drop(t), out_weight, out_bias);          // [.., V]
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> DecoderImpl::recur(const torch::Tensor& ey,
                                                                          const torch::Tensor& state,
                                                                          const EncoderOutput& enc,
                                                                          const torch::Tensor& keys) {
  if (cell2) {                                                                 // conditional GRU
    auto s1 = cell(ey, state);                                                 // [B, D] s'_t
    auto [c, alpha] = attention->forward(s1, keys, enc.annotations, enc.mask);  // [B, C], [B, S]
    return {cell2(c, s1), c, alpha};
  }
  auto [c, alpha] = attention->forward(state, keys, enc.annotations, enc.mask);
  return {cell(torch::cat({ey, c}, 1), state), c, alpha};
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& tgt_in, const EncoderOutput& enc, torch::Tensor* alpha_out) {
  const int64_t T = tgt_in.size(1);
  auto keys = attention->keys(enc.annotations);  // [B, S, A]
  auto ey = drop(embed(tgt_in));                 // [B, T, E]
  auto s = enc.init_state;                       // [B, D]
  std::vector<torch::Tensor> states, contexts, alphas;
  states.reserve(T);
  contexts.reserve(T);
  for (int64_t t = 0; t < T; ++t) {
    torch::Tensor c, alpha;
    std::tie(s, c, alpha) = recur(ey.select(1, t), s, enc, keys);  // [B, D], [B, C], [B, S]
    states.push_back(s);
    contexts.push_back(c);
    if (alpha_out) alphas.push_back(alpha);
  }
  if (alpha_out) *alpha_out = torch::stack(alphas, 1);  // [B, T, S]
  // The output layer and vocabulary projection run once over all steps.
  return output(torch::stack(states, 1), torch::stack(contexts, 1), ey);  // [B, T, V]
}

DecoderStep DecoderImpl::step(const torch::Tensor& y_prev, const torch::Tensor& state, const EncoderOutput& enc,
                              const torch::Tensor& keys) {
  DecoderStep out;
  auto ey = drop(embed(y_prev));                                           // [B, E]
  std::tie(out.state, out.context, out.alpha) = recur(ey, state, enc, keys);  // [B, D], [B, C], [B, S]
  out.logits = output(out.state, out.context, ey);                         // [B, V]
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

torch::Tensor guided_alignment_loss(const torch::Tensor& alpha, const torch::Tensor& guide) {
  return -(guide * torch::log(alpha.clamp_min(1e-9))).sum();
}

torch::Tensor sequence_loss(const torch::Tensor& logits, const torch::Tensor& tgt_out, double label_smoothing) {
  return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), tgt_out.reshape({-1}),
                          F::CrossEntropyFuncOptions()
                              .ignore_index(kPadId)
                              .label_smoothing(label_smoothing)
                              .reduction(torch::kSum));
}

int64_t count_parameters(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace nmt
