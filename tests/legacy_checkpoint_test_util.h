// What the legacy checkpoint tests (legacy_checkpoint_test.cc,
// legacy_hostile_checkpoint_test.cc) share: format 2 checkpoints written as
// nmt wrote them (test_util.h: write_old_checkpoint()) after a few optimizer
// steps, read back with read_legacy_checkpoint, and compared bit for bit.
#pragma once
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/checkpoint.h"
#include "model/checkpoint_format.h"
#include "model/legacy_checkpoint.h"
#include "test_util.h"
#include "train/losses.h"

namespace nmt::legacy_test {

using nmt::test::read_bytes;
using nmt::test::temp_dir;

// The committed format 2 file (written by DISABLED_WriteFormat2Fixture).
inline const std::string kFixture = std::string(NMT_SOURCE_DIR) + "/tests/data/format2-tiny.ckpt";

// A batch of 8 toy sentence pairs. Never fails.
inline nmt::Batch toy_batch() {
  const auto& tok = nmt::test::toy_tokenizer();
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(8, 4, &s, &t);
  std::vector<nmt::Example> ex(s.size());
  std::vector<int64_t> idx;
  for (size_t i = 0; i < s.size(); ++i) {
    ex[i].src = tok.encode(s[i]);
    ex[i].src.push_back(nmt::kEosId);
    ex[i].tgt = tok.encode(t[i]);
    idx.push_back(static_cast<int64_t>(i));
  }
  return nmt::make_batch(ex, idx);
}

// `n` steps of `opt` on `m` over toy_batch(); throws as training does.
inline void train_steps(nmt::Seq2Seq& m, torch::optim::Optimizer& opt, int n) {
  const auto b = toy_batch();
  m->train();
  for (int i = 0; i < n; ++i) {
    opt.zero_grad();
    auto loss = nmt::sequence_loss(m->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0.1);
    (loss / static_cast<double>(b.tgt_tokens)).backward();
    opt.step();
  }
}

// A training state with every field set off its default.
inline nmt::TrainState some_state() {
  nmt::TrainState st;
  st.step = 2;
  st.epoch = 3;
  st.batch_in_epoch = 5;
  st.learning_rate = 3e-3;
  st.best_metric = -12.5;
  st.has_best = true;
  st.bad_validations = 1;
  st.plateau = 4;
  st.seed = 123456789012;  // past 32 bits: the pickle's LONG1
  st.elapsed_seconds = 12.25;
  torch::manual_seed(1234);
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  st.rng_state = gen.get_state();
  return st;
}

// Saves a training checkpoint of a model of `opt` after two steps of `optimizer`
// (made for its parameters) to `path`.
template <class Make>
void save_trained(const std::string& path, const nmt::ModelOptions& opt, Make make_optimizer) {
  torch::manual_seed(5);
  nmt::Seq2Seq model(opt);
  auto optimizer = make_optimizer(model->parameters());
  train_steps(model, optimizer, 2);
  const auto st = some_state();
  nmt::test::write_old_checkpoint(path, model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer(), &optimizer, &st);
}

// The legacy checkpoint at `path`; throws nmt::Error as the reader does.
inline nmt::LegacyCheckpoint read_file(const std::string& path) {
  const std::string bytes = read_bytes(path);
  return nmt::read_legacy_checkpoint(nmt::legacy_archive_bytes(bytes, path), path);
}

// The archive (the bytes after the nmt header) of the file at `path`;
// throws nmt::Error for a file that is not format 1 or 2.
inline std::string archive_of(const std::string& path) {
  return std::string(nmt::legacy_archive_bytes(read_bytes(path), path));
}

// A tensor's bytes: what "bit for bit" compares.
inline std::string bits(const torch::Tensor& t) {
  const auto c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

// Expects `got` to be a contiguous CPU tensor with `want`'s type, sizes and bits.
inline void expect_bitwise(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_TRUE(want.defined()) << what;
  EXPECT_EQ(got.scalar_type(), want.scalar_type()) << what;
  EXPECT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(got.is_contiguous() && got.device().is_cpu()) << what;
  EXPECT_TRUE(bits(got) == bits(want)) << what;
}

// Expects every field of `got` to equal `want`'s, the CPU generator's state bit for bit.
inline void expect_state(const nmt::LegacyTrainState& got, const nmt::TrainState& want) {
  EXPECT_EQ(got.step, want.step);
  EXPECT_EQ(got.epoch, want.epoch);
  EXPECT_EQ(got.batch_in_epoch, want.batch_in_epoch);
  EXPECT_EQ(got.learning_rate, want.learning_rate);
  EXPECT_EQ(got.best_metric, want.best_metric);
  EXPECT_EQ(got.has_best, want.has_best);
  EXPECT_EQ(got.bad_validations, want.bad_validations);
  EXPECT_EQ(got.plateau, want.plateau);
  EXPECT_EQ(got.seed, want.seed);
  EXPECT_EQ(got.elapsed_seconds, want.elapsed_seconds);
  expect_bitwise(got.rng_state, want.rng_state, "rng_state");
  EXPECT_FALSE(got.device_rng_state.defined());
}

// A training checkpoint of the tiny model, written once per process.
inline const std::string& adam_checkpoint() {
  static const std::string path = [] {
    const std::string p = temp_dir("legacy_adam") + "/adam.ckpt";
    save_trained(p, nmt::test::tiny_model(), [](std::vector<torch::Tensor> params) {
      return torch::optim::Adam(params, torch::optim::AdamOptions(3e-3).betas({0.9, 0.98}));
    });
    return p;
  }();
  return path;
}

}  // namespace nmt::legacy_test
