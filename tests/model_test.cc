// The attention model: masks, padding invariance, gradients, tied
// embeddings, step-vs-forward equivalence, the decoder's paths and the
// alignment head.
#include "model/model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/batch.h"
#include "test_util.h"
#include "text/tokenizer.h"
#include "train/losses.h"

namespace {
// A model variant the same tests run on: attention score and decoder recurrence.
struct Variant {
  nmt::AttentionType attention;
  nmt::DecoderType decoder;
};
}  // namespace

namespace nmt {
// Readable parameter names in test output and CTest listings.
void PrintTo(AttentionType t, std::ostream* os) { *os << to_string(t); }
}  // namespace nmt

namespace {

using nmt::AttentionType;
using nmt::Example;
using nmt::test::gamma;
using nmt::test::model_depth;
using nmt::test::model_rounding_bound;
using nmt::test::unit_roundoff;
using nmt::test::within;

std::vector<Example> examples() { return nmt::test::padded_examples(); }

using nmt::test::padded_indices;
using nmt::test::seeded_model;

class ModelAttentionTest : public ::testing::TestWithParam<Variant> {
 protected:
  AttentionType attention() const { return GetParam().attention; }
  // Tiny model options of this variant.
  nmt::ModelOptions options() const {
    auto opt = nmt::test::tiny_model(GetParam().attention);
    opt.decoder = GetParam().decoder;
    return opt;
  }
};

std::string variant_name(const ::testing::TestParamInfo<Variant>& i) {
  return std::string(nmt::to_string(i.param.attention)) +
         (i.param.decoder == nmt::DecoderType::kCgru ? "_cgru" : "");
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ModelAttentionTest,
                         ::testing::Values(Variant{AttentionType::kAdditive, nmt::DecoderType::kBahdanau},
                                           Variant{AttentionType::kDot, nmt::DecoderType::kBahdanau},
                                           Variant{AttentionType::kGeneral, nmt::DecoderType::kBahdanau},
                                           Variant{AttentionType::kConcat, nmt::DecoderType::kBahdanau},
                                           Variant{AttentionType::kNone, nmt::DecoderType::kBahdanau}),
                         variant_name);

// The conditional GRU decoder passes the same tests.
INSTANTIATE_TEST_SUITE_P(Cgru, ModelAttentionTest,
                         ::testing::Values(Variant{AttentionType::kAdditive, nmt::DecoderType::kCgru},
                                           Variant{AttentionType::kGeneral, nmt::DecoderType::kCgru},
                                           Variant{AttentionType::kNone, nmt::DecoderType::kCgru}),
                         variant_name);

TEST_P(ModelAttentionTest, AttentionSumsToOneAndIsZeroOnPadding) {
  auto opt = options();
  ASSERT_NO_THROW(opt.validate());
  auto model = seeded_model(opt);
  const auto ex = examples();
  const auto b = nmt::make_batch(ex, padded_indices());
  torch::NoGradGuard ng;
  torch::Tensor alpha;
  const auto logits = model->forward(b.src, b.src_len, b.tgt_in, &alpha);
  ASSERT_TRUE(alpha.defined());
  const int64_t B = b.size(), T = b.tgt_in.size(1), S = b.src.size(1);
  ASSERT_EQ(alpha.sizes(), (std::vector<int64_t>{B, T, S}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{B, T, opt.tgt_vocab}));
  for (int64_t r = 0; r < B; ++r) {
    const int64_t len = b.src_len[r].item<int64_t>();
    auto real = alpha[r].narrow(1, 0, len);  // [T, len]
    // A softmax's weights sum to 1 within gamma_{len+2} (its sum and division), their sum within gamma_len more.
    EXPECT_TRUE(within(real.sum(1), torch::ones({T}), 2 * gamma(len + 2, unit_roundoff(alpha)))) << "row " << r;
    EXPECT_TRUE(real.ge(0).all().item<bool>());
    if (len < S) {
      auto pad = alpha[r].narrow(1, len, S - len);
      EXPECT_TRUE(pad.eq(0.0).all().item<bool>()) << "attention on padding, row " << r << ": " << pad;
    }
  }
  if (attention() == AttentionType::kNone) {
    // Without attention the weights are uniform over the real positions.
    const int64_t len = b.src_len[2].item<int64_t>();
    // exp(0) / len: one rounding of the sum of len ones (exact) and of the division.
    EXPECT_TRUE(within(alpha[2].narrow(1, 0, len), torch::full({T, len}, 1.0 / len), unit_roundoff(alpha) / len));
  }
}

TEST_P(ModelAttentionTest, SentenceAloneEqualsSentenceInPaddedBatch) {
  auto model = seeded_model(options());
  const auto ex = examples();
  const auto b = nmt::make_batch(ex, padded_indices());
  torch::NoGradGuard ng;
  const auto enc = model->encoder->forward(b.src, b.src_len);
  const auto logits = model->forward(b.src, b.src_len, b.tgt_in);
  for (int64_t r = 0; r < b.size(); ++r) {
    const auto one = nmt::make_batch(ex, {r});
    const int64_t S = one.src.size(1), T = one.tgt_in.size(1);
    const auto enc1 = model->encoder->forward(one.src, one.src_len);
    // Alone the products have one row where the batch has several: other
    // kernels (a matrix-vector product), other sums; within model_rounding_bound()
    // of each other over the layers each result passes.
    EXPECT_TRUE(within(enc.annotations[r].narrow(0, 0, S), enc1.annotations[0], model_rounding_bound(*model, S)))
        << "annotations of sentence " << r;
    if (S < b.src.size(1)) {
      EXPECT_TRUE(enc.annotations[r].narrow(0, S, b.src.size(1) - S).eq(0).all().item<bool>())
          << "annotations not zero on padding, sentence " << r;
    }
    EXPECT_TRUE(torch::equal(enc.mask[r].narrow(0, 0, S), enc1.mask[0]));
    EXPECT_TRUE(within(enc.init_state[r], enc1.init_state[0], model_rounding_bound(*model, S + 1)))
        << "init_state " << r;
    const auto logits1 = model->forward(one.src, one.src_len, one.tgt_in);
    EXPECT_TRUE(within(logits[r].narrow(0, 0, T), logits1[0], model_rounding_bound(*model, model_depth(S, T))))
        << "logits of sentence " << r;
  }
}

TEST_P(ModelAttentionTest, GradientsReachEveryParameter) {
  for (bool tie : {false, true}) {
    auto opt = options();
    opt.tie_embeddings = tie;
    opt.dropout = 0.1;
    auto model = seeded_model(opt);
    model->train();
    const auto b = nmt::make_batch(examples(), padded_indices());
    auto loss = nmt::sequence_loss(model->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0.1);
    loss.backward();
    for (const auto& p : model->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << "no gradient for " << p.key() << (tie ? " (tied)" : "");
      EXPECT_GT(p.value().grad().norm().item<double>(), 0.0)
          << "zero gradient for " << p.key() << (tie ? " (tied)" : "");
    }
  }
}

TEST_P(ModelAttentionTest, StepByStepEqualsForward) {
  // The search path (DecoderImpl::step) must compute what training optimizes.
  auto model = seeded_model(options());
  const auto b = nmt::make_batch(examples(), padded_indices());
  torch::NoGradGuard ng;
  torch::Tensor alpha;
  const auto logits = model->forward(b.src, b.src_len, b.tgt_in, &alpha);
  const auto enc = model->encoder->forward(b.src, b.src_len);
  const auto mem = model->decoder->memory(enc);
  auto state = enc.init_state;
  const int64_t S = b.src.size(1);
  for (int64_t t = 0; t < b.tgt_in.size(1); ++t) {
    const auto out = model->decoder->step(b.tgt_in.select(1, t), state, mem);
    // Teacher forcing makes some products for all steps at once, a step for its rows alone.
    const double bound = model_rounding_bound(*model, model_depth(S, t + 1));
    EXPECT_TRUE(within(out.logits, logits.select(1, t), bound)) << "step " << t;
    EXPECT_TRUE(within(out.alpha, alpha.select(1, t), bound)) << "alpha at step " << t;
    state = out.state;
  }
}

// What a decoder path computes in FastPathsEqualReferencePath.
struct PathOutput {
  torch::Tensor logits, alpha, step_logits;
  std::map<std::string, torch::Tensor> grads;
};

// The decoder's optimized step (hoisted input projection, the context's gate
// projection through the attention weights, fused query products) and the
// recurrence with a hand-written backward (attentive_recurrence) compute the
// plain formulation's function: logits, attention weights and every
// parameter's gradient, in training mode with dropout (all paths draw the
// same masks), without and with the decoder's state dropout and layer
// normalization, and a loss on the attention too (guided alignment), and the
// search step.
TEST_P(ModelAttentionTest, FastPathsEqualReferencePath) {
  using Path = nmt::DecoderImpl::Path;
  const std::vector<std::pair<double, bool>> variants{{0.0, false}, {0.3, false}, {0.3, true}};
  for (const auto& [hidden_dropout, layer_norm] : variants) {
    SCOPED_TRACE("dec_hidden_dropout " + std::to_string(hidden_dropout) + (layer_norm ? ", layer_norm" : ""));
    auto opt = options();
    opt.layer_norm = layer_norm;
    opt.dropout = 0.2;
    opt.word_dropout = 0.25;
    opt.dec_hidden_dropout = hidden_dropout;
    if (attention() != AttentionType::kDot) opt.dec_hidden = 20;  // D != C = 24 (dot needs them equal)
    auto model = seeded_model(opt);
    model->train();
    const auto b = nmt::make_batch(examples(), padded_indices());
    torch::manual_seed(3);
    auto guide = torch::softmax(torch::randn({b.src.size(0), b.tgt_in.size(1), b.src.size(1)}), 2);
    auto run = [&](Path path) {
      model->decoder->set_path(path);
      model->zero_grad();
      torch::manual_seed(7);
      PathOutput o;
      o.logits = model->forward(b.src, b.src_len, b.tgt_in, &o.alpha);
      (nmt::sequence_loss(o.logits, b.tgt_out, 0.1) + 0.5 * nmt::guided_alignment_loss(o.alpha, guide)).backward();
      for (const auto& p : model->named_parameters()) o.grads[p.key()] = p.value().grad().clone();
      torch::NoGradGuard ng;
      model->eval();
      const auto enc = model->encoder->forward(b.src, b.src_len);
      o.step_logits = model->decoder->step(b.tgt_in.select(1, 0), enc.init_state, model->decoder->memory(enc)).logits;
      model->train();
      return o;
    };
    // The recurrence runs for additive and concat attention without layer
    // normalization (the others train on the plain path).
    const bool recurrence =
        (attention() == AttentionType::kAdditive || attention() == AttentionType::kConcat) && !layer_norm;
    auto ran_recurrence = [](const PathOutput& o) {
      return o.alpha.grad_fn() && o.alpha.grad_fn()->name().find("AttentiveRecurrence") != std::string::npos;
    };
    // In double precision LibTorch's operations take the place of the energies' one-pass backward.
    const int64_t S = b.src.size(1), T = b.tgt_in.size(1);
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      SCOPED_TRACE(dtype == torch::kFloat ? "float" : "double");
      model->to(dtype);
      guide = guide.to(dtype);
      // The paths make other products and sums (and the optimized step in float
      // the rational tanh, within 8u of tanh): within the rounding bounds of the
      // dtype, in double so tight that any other function would show.
      const double bound = model_rounding_bound(*model, model_depth(S, T));
      const double step_bound = model_rounding_bound(*model, model_depth(S, 1));
      const double grad_bound = nmt::test::gradient_rounding_bound(*model, model_depth(S, T), b.size() * T);
      const auto ref = run(Path::kPlain);
      EXPECT_GT(ref.logits.abs().max().item<double>(), 0.0);
      EXPECT_FALSE(ran_recurrence(ref));
      for (const auto path : {Path::kOptimized, Path::kRecurrence, Path::kAuto}) {
        const auto fast = run(path);
        const std::string name =
            path == Path::kOptimized ? "optimized" : path == Path::kRecurrence ? "recurrence" : "auto";
        EXPECT_EQ(ran_recurrence(fast), recurrence && path != Path::kOptimized) << name;
        EXPECT_TRUE(within(fast.logits, ref.logits, bound)) << name;
        EXPECT_TRUE(within(fast.alpha, ref.alpha, bound)) << name;
        EXPECT_TRUE(within(fast.step_logits, ref.step_logits, step_bound)) << name;
        ASSERT_EQ(fast.grads.size(), ref.grads.size());
        for (const auto& [param, g] : ref.grads) {
          ASSERT_TRUE(g.defined()) << param;
          const auto& f = fast.grads.at(param);
          ASSERT_TRUE(f.defined()) << name << ": " << param;
          const double scale = g.abs().max().item<double>();
          EXPECT_GT(scale, 0.0) << param;
          EXPECT_TRUE(within(f, g, grad_bound * scale)) << name << ": gradient of " << param;
        }
      }
    }
    model->decoder->set_path(Path::kAuto);
  }
}

// The alignment head: its weights are a distribution over the real source
// positions, the same for a sentence alone or in a padded batch and on every
// decoder path; it leaves the translation untouched (registered last, so the
// same seed gives the same other weights) and learns only from the guided
// alignment loss.
TEST(AlignmentHeadTest, WeightsMaskPathsAndGradients) {
  using Path = nmt::DecoderImpl::Path;
  for (const auto decoder : {nmt::DecoderType::kBahdanau, nmt::DecoderType::kCgru}) {
    SCOPED_TRACE(decoder == nmt::DecoderType::kCgru ? "cgru" : "bahdanau");
    auto plain_opt = nmt::test::tiny_model(AttentionType::kAdditive);
    plain_opt.decoder = decoder;
    auto opt = plain_opt;
    opt.alignment_head = 8;
    ASSERT_NO_THROW(opt.validate());
    auto model = seeded_model(opt), plain = seeded_model(plain_opt);
    ASSERT_TRUE(model->decoder->has_alignment_head());
    ASSERT_FALSE(plain->decoder->has_alignment_head());
    const auto ex = examples();
    const auto b = nmt::make_batch(ex, padded_indices());
    const int64_t B = b.size(), T = b.tgt_in.size(1), S = b.src.size(1);
    {
      torch::NoGradGuard ng;
      auto [logits, head] = model->forward_aligned(b.src, b.src_len, b.tgt_in, b.tgt_out);
      ASSERT_EQ(head.sizes(), (std::vector<int64_t>{B, T, S}));
      torch::Tensor attention, plain_attention;
      // The same path, kernels and weights compute these: the same bits.
      EXPECT_TRUE(torch::equal(model->forward(b.src, b.src_len, b.tgt_in, &attention), logits));
      EXPECT_TRUE(torch::equal(plain->forward(b.src, b.src_len, b.tgt_in, &plain_attention), logits));
      EXPECT_TRUE(torch::equal(attention, plain_attention)) << "without tgt_out: the attention";
      EXPECT_GT((head - attention).abs().max().item<double>(), 1e-3) << "the head's weights are its own";
      // A model without a head aligns with its attention.
      EXPECT_TRUE(torch::equal(plain->forward_aligned(b.src, b.src_len, b.tgt_in, b.tgt_out).second, plain_attention));
      for (int64_t r = 0; r < B; ++r) {
        const int64_t len = b.src_len[r].item<int64_t>();
        EXPECT_TRUE(within(head[r].narrow(1, 0, len).sum(1), torch::ones({T}), 2 * gamma(len + 2, unit_roundoff(head))))
            << "row " << r;
        if (len < S) {
          EXPECT_TRUE(head[r].narrow(1, len, S - len).eq(0).all().item<bool>()) << "padding, row " << r;
        }
        const auto one = nmt::make_batch(ex, {r});
        const int64_t T1 = one.tgt_in.size(1);
        const auto head1 = model->forward_aligned(one.src, one.src_len, one.tgt_in, one.tgt_out).second;
        EXPECT_TRUE(within(head[r].narrow(0, 0, T1).narrow(1, 0, len), head1[0],
                           model_rounding_bound(*model, model_depth(len, T1))))
            << "sentence " << r << " alone";
      }
    }
    // Translation loss alone: no gradient reaches the head. Guided loss: the
    // head's parameters get one, the same on every path.
    model->train();
    model->zero_grad();
    nmt::sequence_loss(model->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0.1).backward();
    for (const auto& p : model->named_parameters())
      if (p.key().find("align_head") != std::string::npos) {
        EXPECT_FALSE(p.value().grad().defined() && p.value().grad().abs().max().item<double>() > 0) << p.key();
      }
    torch::manual_seed(3);
    const auto guide = torch::softmax(torch::randn({B, T, S}), 2);
    auto run = [&](Path path) {
      model->decoder->set_path(path);
      model->zero_grad();
      auto head = model->forward_aligned(b.src, b.src_len, b.tgt_in, b.tgt_out).second;
      nmt::guided_alignment_loss(head, guide).backward();
      std::map<std::string, torch::Tensor> grads;
      for (const auto& p : model->named_parameters())
        if (p.value().grad().defined()) grads[p.key()] = p.value().grad().clone();
      return std::make_pair(head.detach(), grads);
    };
    const auto ref = run(Path::kPlain);
    const double bound = model_rounding_bound(*model, model_depth(S, T));
    const double grad_bound = nmt::test::gradient_rounding_bound(*model, model_depth(S, T), B * T);
    for (const char* name : {"decoder.align_head.query.weight", "decoder.align_head.key.weight", "encoder.rnn.weight_ih_l0"}) {
      ASSERT_TRUE(ref.second.count(name)) << name;
      EXPECT_GT(ref.second.at(name).abs().max().item<double>(), 0.0) << name;
    }
    for (const auto path : {Path::kOptimized, Path::kRecurrence}) {
      const auto fast = run(path);
      EXPECT_TRUE(within(fast.first, ref.first, bound));
      ASSERT_EQ(fast.second.size(), ref.second.size());
      for (const auto& [param, g] : ref.second)
        EXPECT_TRUE(within(fast.second.at(param), g, grad_bound * g.abs().max().item<double>())) << param;
    }
    model->decoder->set_path(Path::kAuto);
  }
}

TEST(ModelTest, TiedEmbeddingsShareTheOutputProjection) {
  auto opt = nmt::test::tiny_model();
  auto untied = seeded_model(opt);
  opt.tie_embeddings = true;
  auto tied = seeded_model(opt);
  const auto np_untied = untied->named_parameters();
  const auto np_tied = tied->named_parameters();
  EXPECT_EQ(np_tied.size() + 1, np_untied.size());
  EXPECT_TRUE(np_untied.contains("decoder.out_weight"));
  EXPECT_FALSE(np_tied.contains("decoder.out_weight"));
  EXPECT_EQ(nmt::count_parameters(*untied) - nmt::count_parameters(*tied), opt.tgt_vocab * opt.emb_dim);

  // A target token that never appears in tgt_in still gets an embedding
  // gradient when tied (through the output projection), never when untied.
  const auto ex = examples();
  const auto b = nmt::make_batch(ex, padded_indices());
  std::set<int64_t> used;
  auto flat = b.tgt_in.flatten();
  for (int64_t i = 0; i < flat.numel(); ++i) used.insert(flat[i].item<int64_t>());
  int64_t unused = -1;
  for (int64_t id = 4; id < opt.tgt_vocab; ++id)
    if (!used.count(id)) { unused = id; break; }
  ASSERT_GE(unused, 0);
  for (auto* m : {&untied, &tied}) {
    (*m)->train();
    nmt::sequence_loss((*m)->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0.0).backward();
  }
  const auto& g_untied = np_untied["decoder.embed.weight"].grad();
  const auto& g_tied = np_tied["decoder.embed.weight"].grad();
  EXPECT_EQ(g_untied[unused].abs().sum().item<double>(), 0.0);
  EXPECT_GT(g_tied[unused].abs().sum().item<double>(), 0.0);
}


}  // namespace
