// ModelOptions: validation, serialization, and the parameter shapes the
// options describe (what checkpoints are checked against).
#include "model/model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "base/error.h"
#include "test_util.h"

namespace {

using nmt::AttentionType;

TEST(ModelOptionsTest, ValidateRejectsBadOptions) {
  auto opt = nmt::test::tiny_model(AttentionType::kDot);
  EXPECT_NO_THROW(opt.validate());
  opt.dec_hidden = 2 * opt.enc_hidden + 1;
  try {
    opt.validate();
    FAIL() << "dot attention with dec_hidden != 2 * enc_hidden accepted";
  } catch (const nmt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("dot"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nmt::Seq2Seq{opt}, nmt::Error);
  opt.attention = AttentionType::kGeneral;  // general handles any sizes
  EXPECT_NO_THROW(opt.validate());

  auto bad = nmt::test::tiny_model();
  bad.emb_dim = 0;
  EXPECT_THROW(bad.validate(), nmt::Error);
  bad = nmt::test::tiny_model();
  bad.dropout = 1.0;
  EXPECT_THROW(bad.validate(), nmt::Error);
  bad = nmt::test::tiny_model();
  bad.word_dropout = -0.1;
  EXPECT_THROW(bad.validate(), nmt::Error);
  bad = nmt::test::tiny_model();
  bad.dec_hidden_dropout = 1.0;
  EXPECT_THROW(bad.validate(), nmt::Error);
  bad = nmt::test::tiny_model();
  bad.enc_hidden_dropout = -0.5;
  EXPECT_THROW(bad.validate(), nmt::Error);
  bad = nmt::test::tiny_model();
  bad.src_vocab = 0;
  EXPECT_THROW(bad.validate(), nmt::Error);
}

TEST(ModelOptionsTest, SerializeParseRoundTrip) {
  auto opt = nmt::test::tiny_model(AttentionType::kConcat);
  opt.enc_layers = 2;
  opt.dropout = 0.35;
  opt.word_dropout = 0.15;
  opt.dec_hidden_dropout = 0.25;
  opt.enc_hidden_dropout = 0.125;
  opt.layer_norm = true;
  opt.tie_embeddings = true;
  opt.tie_all_embeddings = true;
  opt.attn_dim = 17;
  const auto back = nmt::ModelOptions::parse(opt.serialize(), "test");
  EXPECT_EQ(back.src_vocab, opt.src_vocab);
  EXPECT_EQ(back.tgt_vocab, opt.tgt_vocab);
  EXPECT_EQ(back.emb_dim, opt.emb_dim);
  EXPECT_EQ(back.enc_hidden, opt.enc_hidden);
  EXPECT_EQ(back.enc_layers, opt.enc_layers);
  EXPECT_EQ(back.dec_hidden, opt.dec_hidden);
  EXPECT_EQ(back.attn_dim, opt.attn_dim);
  EXPECT_EQ(back.attention, opt.attention);
  EXPECT_DOUBLE_EQ(back.dropout, opt.dropout);
  EXPECT_DOUBLE_EQ(back.word_dropout, opt.word_dropout);
  EXPECT_DOUBLE_EQ(back.dec_hidden_dropout, opt.dec_hidden_dropout);
  // A config written before dec_hidden_dropout existed reads as none.
  auto before = opt.serialize();
  before.erase(before.find("dec_hidden_dropout=0.25\n"), std::string("dec_hidden_dropout=0.25\n").size());
  EXPECT_EQ(nmt::ModelOptions::parse(before, "old").dec_hidden_dropout, 0.0);
  EXPECT_DOUBLE_EQ(back.enc_hidden_dropout, opt.enc_hidden_dropout);
  before.erase(before.find("enc_hidden_dropout=0.125\n"), std::string("enc_hidden_dropout=0.125\n").size());
  EXPECT_EQ(nmt::ModelOptions::parse(before, "old").enc_hidden_dropout, 0.0);
  EXPECT_TRUE(back.layer_norm);
  before.erase(before.find("layer_norm=1\n"), std::string("layer_norm=1\n").size());
  EXPECT_FALSE(nmt::ModelOptions::parse(before, "old").layer_norm) << "a config from before layer_norm: none";
  EXPECT_EQ(back.tie_embeddings, opt.tie_embeddings);
  EXPECT_TRUE(back.tie_all_embeddings);
  before.erase(before.find("tie_all_embeddings=1\n"), std::string("tie_all_embeddings=1\n").size());
  EXPECT_FALSE(nmt::ModelOptions::parse(before, "old").tie_all_embeddings) << "a config from before it: untied";
  EXPECT_EQ(back.serialize(), opt.serialize());
  for (auto t : {AttentionType::kAdditive, AttentionType::kDot, AttentionType::kGeneral, AttentionType::kConcat,
                 AttentionType::kNone}) {
    EXPECT_EQ(nmt::parse_attention(nmt::to_string(t)), t);
    auto o = nmt::test::tiny_model(t);
    EXPECT_EQ(nmt::ModelOptions::parse(o.serialize(), "x").attention, t);
  }
  EXPECT_THROW(nmt::parse_attention("multihead"), nmt::Error);
  // The decoder: round trip, and configs written before it existed mean bahdanau.
  auto cgru = nmt::test::tiny_model();
  cgru.decoder = nmt::DecoderType::kCgru;
  EXPECT_EQ(nmt::ModelOptions::parse(cgru.serialize(), "x").decoder, nmt::DecoderType::kCgru);
  std::string old = nmt::test::tiny_model().serialize();
  old.erase(old.find("decoder="), old.find('\n', old.find("decoder=")) - old.find("decoder=") + 1);
  EXPECT_EQ(nmt::ModelOptions::parse(old, "old").decoder, nmt::DecoderType::kBahdanau);
  EXPECT_THROW(nmt::parse_decoder("lstm"), nmt::Error);
}

TEST(ModelOptionsTest, ParseRejectsUnknownAndMissingKeys) {
  const auto text = nmt::test::tiny_model().serialize();
  try {
    nmt::ModelOptions::parse(text + "num_heads=8\n", "some.ckpt");
    FAIL() << "unknown key accepted";
  } catch (const nmt::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("num_heads"), std::string::npos) << msg;
    EXPECT_NE(msg.find("newer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("some.ckpt"), std::string::npos) << msg;
  }
  // Dropping a line: the key is named.
  std::string missing = text;
  missing.erase(missing.find("emb_dim="), missing.find('\n', missing.find("emb_dim=")) - missing.find("emb_dim=") + 1);
  try {
    nmt::ModelOptions::parse(missing, "o");
    FAIL() << "missing key accepted";
  } catch (const nmt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("emb_dim"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nmt::ModelOptions::parse("garbage without equals sign\n", "o"), nmt::Error);
}


// parameter_shapes() computes what Seq2Seq(opt) registers, without building
// it: checkpoints are checked against it before a model is allocated, so it
// must agree with the real model (names, order, shapes) for every kind of
// model the options describe.
TEST(ModelOptionsTest, ParameterShapesAreTheModelsOwn) {
  int configs = 0;
  for (auto attention : {nmt::AttentionType::kAdditive, nmt::AttentionType::kDot, nmt::AttentionType::kGeneral,
                         nmt::AttentionType::kConcat, nmt::AttentionType::kNone})
    for (auto decoder : {nmt::DecoderType::kBahdanau, nmt::DecoderType::kCgru})
      for (int tie : {0, 1, 2})  // untied, the target's embedding and output tied, and the source's too
        for (int64_t layers : {1, 3})
          for (int64_t head : {0, 5})
            for (bool norm : {false, true}) {
              nmt::ModelOptions opt = nmt::test::tiny_model(attention);
              opt.layer_norm = norm;
              opt.decoder = decoder;
              opt.tie_embeddings = tie > 0;
              opt.tie_all_embeddings = tie == 2;
              opt.enc_layers = layers;
              opt.alignment_head = head;
              opt.src_vocab = 37;  // every size distinct, so a swapped dimension shows
              opt.tgt_vocab = tie == 2 ? 37 : 41;  // one vocabulary is what three-way tying needs
              opt.emb_dim = 6;
              opt.enc_hidden = 7;
              opt.dec_hidden = attention == nmt::AttentionType::kDot ? 14 : 9;
              opt.attn_dim = 11;
              nmt::Seq2Seq model(opt);
              EXPECT_TRUE(model->named_buffers().is_empty()) << "buffers would need shapes too";
              const auto want = model->named_parameters();
              const auto got = nmt::parameter_shapes(opt);
              ASSERT_EQ(got.size(), want.size()) << opt.serialize();
              for (size_t i = 0; i < got.size(); ++i) {
                EXPECT_EQ(got[i].name, want[i].key()) << i << "\n" << opt.serialize();
                EXPECT_EQ(got[i].shape, want[i].value().sizes().vec()) << got[i].name << "\n" << opt.serialize();
              }
              ++configs;
            }
  EXPECT_EQ(configs, 240);
}

}  // namespace
