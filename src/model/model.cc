// The whole model: encoder and decoder, teacher-forced (model.h), and the
// shapes of its parameters.
#include "model/model.h"

namespace nmt {

Seq2SeqImpl::Seq2SeqImpl(const ModelOptions& opt) : opt_(opt) {
  opt.validate();
  // The construction order is the weights' draw order after a seed: encoder
  // first. Three-way tying builds the decoder first, to hand its embedding to
  // the encoder; either way the encoder registers first (the parameters'
  // order, parameter_shapes()).
  if (opt.tie_all_embeddings) {
    Decoder dec(opt);
    encoder = register_module("encoder", Encoder(opt, dec->embed));
    decoder = register_module("decoder", dec);
  } else {
    encoder = register_module("encoder", Encoder(opt));
    decoder = register_module("decoder", Decoder(opt));
  }
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

torch::Tensor Seq2SeqImpl::alignment(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                     const torch::Tensor& tgt_out) {
  return decoder->alignment(tgt_in, encoder->forward(src, src_len), tgt_out);
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
  // Encoder: embedding (the decoder's with three-way tying), a bidirectional GRU of enc_layers (per layer and
  // direction: w_ih, w_hh, b_ih, b_hh), the decoder's initial state.
  if (!opt.tie_all_embeddings) add("encoder.embed.weight", {opt.src_vocab, E});
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
  // layer_norm: each GRU's two gate norms (GateNormImpl: weight, bias [3H]),
  // per layer and direction in the encoder, after the modules above.
  auto gate_norm = [&](const std::string& name, int64_t h) {
    add(name + ".weight", {3 * h});
    add(name + ".bias", {3 * h});
  };
  if (opt.layer_norm)
    for (int64_t l = 0; l < opt.enc_layers; ++l)
      for (const char* dir : {"", "_reverse"}) {
        const std::string k = "_l" + std::to_string(l) + dir;
        gate_norm("encoder.norm_ih" + k, H);
        gate_norm("encoder.norm_hh" + k, H);
      }
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
  if (opt.layer_norm) {
    gate_norm("decoder.cell_norm_ih", D);
    gate_norm("decoder.cell_norm_hh", D);
    if (opt.decoder == DecoderType::kCgru) {
      gate_norm("decoder.cell2_norm_ih", D);
      gate_norm("decoder.cell2_norm_hh", D);
    }
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
