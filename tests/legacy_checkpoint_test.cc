// read_legacy_checkpoint, the reader of format 1 and 2 checkpoints that runs
// nothing in them: files written as nmt wrote them (test_util.h:
// write_old_checkpoint()) read back bit for bit, and so does what
// convert_checkpoint() makes of them; the committed
// fixture tests/data/format2-tiny.ckpt still reads once save_checkpoint
// writes another format. Hostile edits of real files are in
// legacy_hostile_checkpoint_test.cc.
#include "model/legacy_checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <zlib.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "legacy_checkpoint_test_util.h"
#include "model/checkpoint.h"
#include "train/losses.h"
#include "test_util.h"

namespace {

using nmt::test::temp_dir;
using nmt::test::write_bytes;

using nmt::legacy_test::archive_of;
using nmt::legacy_test::bits;
using nmt::legacy_test::expect_bitwise;
using nmt::legacy_test::expect_state;
using nmt::legacy_test::kFixture;
using nmt::legacy_test::read_file;
using nmt::legacy_test::save_trained;
using nmt::ckpt::optimizer_state_key;

// Adam's moments (with and without amsgrad), weights, tokenizers, config and
// training state: exactly what LibTorch's loader gives.
TEST(LegacyCheckpointTest, ReadsWhatLoadCheckpointAndLoadTrainStateRead) {
  for (bool amsgrad : {false, true}) {
    SCOPED_TRACE(amsgrad ? "amsgrad" : "adam");
    const auto options = torch::optim::AdamOptions(3e-3).betas({0.9, 0.98}).weight_decay(1e-4).amsgrad(amsgrad);
    const std::string path = temp_dir("legacy_adam") + "/m.ckpt";
    save_trained(path, nmt::test::tiny_model(), [&](std::vector<torch::Tensor> p) { return torch::optim::Adam(p, options); });
    const auto c = read_file(path);

    nmt::convert_checkpoint(path, path + ".new");
    auto loaded = nmt::load_checkpoint(path + ".new", torch::kCPU);
    torch::optim::Adam adam(loaded.model->parameters(), options);
    const auto st = nmt::load_train_state(path + ".new", adam, torch::kCPU);
    EXPECT_EQ(c.config, loaded.options.serialize());
    EXPECT_TRUE(c.src_spm == loaded.src_tok.bytes() && c.tgt_spm == loaded.tgt_tok.bytes());
    std::vector<std::string> names;
    for (const auto& p : loaded.model->named_parameters()) {
      names.push_back(p.key());
      expect_bitwise(c.weights.at(p.key()), p.value(), p.key());
      const auto& want = static_cast<const torch::optim::AdamParamState&>(*adam.state().at(optimizer_state_key(adam.state(), p.value())));
      const auto& got = c.optimizer.state.at(p.key());
      EXPECT_TRUE(got.has_step);
      EXPECT_EQ(got.step, want.step()) << p.key();
      expect_bitwise(got.exp_avg, want.exp_avg(), p.key() + " exp_avg");
      expect_bitwise(got.exp_avg_sq, want.exp_avg_sq(), p.key() + " exp_avg_sq");
      EXPECT_EQ(got.max_exp_avg_sq.defined(), amsgrad);
      if (amsgrad) expect_bitwise(got.max_exp_avg_sq, want.max_exp_avg_sq(), p.key() + " max_exp_avg_sq");
      EXPECT_FALSE(got.momentum_buffer.defined());
    }
    EXPECT_EQ(c.weight_order, names);
    EXPECT_EQ(c.weights.size(), names.size());
    ASSERT_TRUE(c.has_optimizer && c.has_train_state);
    EXPECT_EQ(c.optimizer.kind, "adam");
    ASSERT_EQ(c.optimizer.groups.size(), 1u);
    EXPECT_EQ(c.optimizer.groups[0].params, names);
    EXPECT_EQ(c.optimizer.groups[0].options, (std::map<std::string, double>{
        {"lr", 3e-3}, {"beta1", 0.9}, {"beta2", 0.98}, {"eps", 1e-8}, {"weight_decay", 1e-4}, {"amsgrad", amsgrad ? 1.0 : 0.0}}));
    expect_state(c.state, st);
  }
}

TEST(LegacyCheckpointTest, ReadsSgdMomentum) {
  const std::string path = temp_dir("legacy_sgd") + "/m.ckpt";
  const auto options = torch::optim::SGDOptions(0.1).momentum(0.9);
  save_trained(path, nmt::test::tiny_model(), [&](std::vector<torch::Tensor> p) { return torch::optim::SGD(p, options); });
  const auto c = read_file(path);
  nmt::convert_checkpoint(path, path + ".new");
  auto loaded = nmt::load_checkpoint(path + ".new", torch::kCPU);
  torch::optim::SGD sgd(loaded.model->parameters(), options);
  nmt::load_train_state(path + ".new", sgd, torch::kCPU);
  EXPECT_EQ(c.optimizer.kind, "sgd");
  EXPECT_EQ(c.optimizer.groups.at(0).options.at("momentum"), 0.9);
  for (const auto& p : loaded.model->named_parameters()) {
    const auto& want = static_cast<const torch::optim::SGDParamState&>(*sgd.state().at(optimizer_state_key(sgd.state(), p.value())));
    expect_bitwise(c.optimizer.state.at(p.key()).momentum_buffer, want.momentum_buffer(), p.key());
    EXPECT_FALSE(c.optimizer.state.at(p.key()).has_step);
  }
}

// Weights only (an average, say), and the same archive behind a version 1 header.
TEST(LegacyCheckpointTest, ReadsWeightsOnlyAndFormat1) {
  const std::string dir = temp_dir("legacy_plain");
  torch::manual_seed(5);
  nmt::Seq2Seq model(nmt::test::tiny_model());
  nmt::test::write_old_checkpoint(dir + "/m.ckpt", model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
  const std::string archive = archive_of(dir + "/m.ckpt");
  write_bytes(dir + "/v1.ckpt", std::string("NMTCKPT\n\1\0\0\0", 12) + archive);
  const auto r = nmt::convert_checkpoint(dir + "/v1.ckpt", dir + "/v1.new");
  EXPECT_FALSE(r.resumable);
  auto loaded = nmt::load_checkpoint(dir + "/v1.new", torch::kCPU);
  for (const auto& p : loaded.model->named_parameters()) expect_bitwise(p.value(), model->named_parameters()[p.key()], p.key());
  const auto c = read_file(dir + "/v1.ckpt");
  EXPECT_FALSE(c.has_optimizer);
  EXPECT_FALSE(c.has_train_state);
  for (const auto& p : loaded.model->named_parameters()) expect_bitwise(c.weights.at(p.key()), p.value(), p.key());
}

// The committed old file: written by save_checkpoint in format 2 (the
// DISABLED_ test below), read with no help from LibTorch's loader.
TEST(LegacyCheckpointTest, ReadsTheCommittedFormat2File) {
  const auto c = read_file(kFixture);
  const auto options = nmt::ModelOptions::parse(c.config, kFixture);
  EXPECT_EQ(nmt::Tokenizer::from_bytes(c.src_spm, "src").vocab_size(), options.src_vocab);
  EXPECT_EQ(c.tgt_spm, c.src_spm);
  nmt::Seq2Seq model(options);
  std::vector<std::string> names;
  uLong fingerprint = ::crc32(0L, Z_NULL, 0);
  auto add = [&](const torch::Tensor& t) {
    const std::string b = bits(t);
    fingerprint = ::crc32(fingerprint, reinterpret_cast<const Bytef*>(b.data()), b.size());
  };
  for (const auto& p : model->named_parameters()) {
    names.push_back(p.key());
    const auto& w = c.weights.at(p.key());
    EXPECT_EQ(w.sizes(), p.value().sizes()) << p.key();
    const auto& s = c.optimizer.state.at(p.key());
    EXPECT_EQ(s.step, 2);
    EXPECT_EQ(s.exp_avg.sizes(), p.value().sizes());
    for (const auto& t : {w, s.exp_avg, s.exp_avg_sq}) add(t);
  }
  EXPECT_EQ(c.weight_order, names);
  EXPECT_EQ(c.optimizer.kind, "adam");
  EXPECT_EQ(c.optimizer.groups.at(0).options.at("beta2"), 0.98);
  const nmt::LegacyTrainState& st = c.state;
  EXPECT_EQ(st.step, 2);
  EXPECT_EQ(st.epoch, 3);
  EXPECT_EQ(st.batch_in_epoch, 5);
  EXPECT_EQ(st.learning_rate, 3e-3);
  EXPECT_EQ(st.best_metric, -12.5);
  EXPECT_TRUE(st.has_best);
  EXPECT_EQ(st.bad_validations, 1);
  EXPECT_EQ(st.plateau, 4);
  EXPECT_EQ(st.seed, 123456789012);
  EXPECT_EQ(st.elapsed_seconds, 12.25);
  ASSERT_TRUE(st.rng_state.defined());
  EXPECT_EQ(st.rng_state.scalar_type(), torch::kByte);
  add(st.rng_state);
  EXPECT_EQ(fingerprint, 4248234973u) << "the fixture's tensors changed";
}

// Writes the fixture (run once, by hand, with --gtest_also_run_disabled_tests).
TEST(LegacyCheckpointTest, DISABLED_WriteFormat2Fixture) {
  auto options = nmt::test::tiny_model();
  options.emb_dim = options.enc_hidden = options.attn_dim = 8;
  options.dec_hidden = 8;
  std::filesystem::create_directories(std::filesystem::path(kFixture).parent_path());
  save_trained(kFixture, options, [](std::vector<torch::Tensor> params) {
    return torch::optim::Adam(params, torch::optim::AdamOptions(3e-3).betas({0.9, 0.98}));
  });
}

}  // namespace
