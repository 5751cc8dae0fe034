// Checkpoint files: round trip, header checks, corrupt files, atomic writes,
// training state and optimizer restore (checkpoint_state_test.cc: old formats,
// non-finite weights, meta and release).
#include "io/io.h"
#include "model/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/batch.h"
#include "checkpoint_edit.h"
#include "checkpoint_test_util.h"
#include "train/losses.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nmt::test::read_bytes;
using nmt::test::temp_dir;
using nmt::test::write_bytes;

using nmt::test::contains;
using nmt::test::error_of;

using nmt::checkpoint_test::expect_same_weights;
using nmt::checkpoint_test::logits_of;
using nmt::checkpoint_test::tiny;
using nmt::checkpoint_test::toy_batch;
using nmt::checkpoint_test::train_steps;

TEST(CheckpointTest, RoundTrip) {
  for (int variant = 0; variant < 3; ++variant) {  // untied, tied, with an alignment head
    const bool tie = variant == 1;
    const auto dir = temp_dir("ckpt_roundtrip");
    const auto path = dir + "/m.ckpt";
    auto model = tiny(tie, variant == 2 ? 16 : 0);
    const auto& tok = nmt::test::toy_tokenizer();
    nmt::save_checkpoint(path, model, tok, tok);
    const auto bytes = read_bytes(path);
    ASSERT_GT(bytes.size(), 12u);
    EXPECT_EQ(bytes.substr(0, 8), "NMTCKPT\n");
    EXPECT_EQ(bytes.substr(8, 4), std::string("\x03\x00\x00\x00", 4));  // version 3, little-endian
    uint64_t body = 0;  // then the body's size
    for (int i = 7; i >= 0; --i) body = (body << 8) | static_cast<unsigned char>(bytes[12 + i]);
    EXPECT_EQ(body, bytes.size() - 24);

    auto loaded = nmt::load_checkpoint(path, torch::kCPU);
    EXPECT_EQ(loaded.options.serialize(), model->options().serialize());
    EXPECT_EQ(loaded.src_tok.bytes(), tok.bytes());
    EXPECT_EQ(loaded.tgt_tok.bytes(), tok.bytes());
    EXPECT_FALSE(loaded.model->is_training());
    expect_same_weights(model, loaded.model);
    const auto b = toy_batch();
    // The same weights through the same kernels: the same bits.
    EXPECT_TRUE(torch::equal(logits_of(model, b), logits_of(loaded.model, b))) << "variant " << variant;
    EXPECT_EQ(loaded.model->decoder->has_alignment_head(), variant == 2);
    if (variant == 2) {
      torch::NoGradGuard ng;
      EXPECT_TRUE(torch::equal(model->forward_aligned(b.src, b.src_len, b.tgt_in, b.tgt_out).second,
                               loaded.model->forward_aligned(b.src, b.src_len, b.tgt_in, b.tgt_out).second));
    }
    // Saving the loaded model gives the same file.
    nmt::save_checkpoint(dir + "/again.ckpt", loaded.model, loaded.src_tok, loaded.tgt_tok);
    auto again = nmt::load_checkpoint(dir + "/again.ckpt", torch::kCPU);
    expect_same_weights(model, again.model);
  }
}

TEST(CheckpointTest, TruncatedFileIsAnErrorNamingThePath) {
  const auto dir = temp_dir("ckpt_trunc");
  const auto path = dir + "/m.ckpt";
  auto model = tiny();
  nmt::save_checkpoint(path, model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
  const auto bytes = read_bytes(path);
  for (size_t keep : {size_t{5}, size_t{12}, size_t{13}, bytes.size() / 2, bytes.size() - 30}) {
    const auto cut = dir + "/cut-" + std::to_string(keep) + ".ckpt";
    write_bytes(cut, bytes.substr(0, keep));
    const auto msg = error_of([&] { nmt::load_checkpoint(cut, torch::kCPU); });
    EXPECT_TRUE(contains(msg, cut)) << "kept " << keep << " bytes: " << msg;
  }
}

TEST(CheckpointTest, ForeignFileIsNotACheckpoint) {
  const auto dir = temp_dir("ckpt_foreign");
  const auto path = dir + "/random.ckpt";
  std::mt19937 rng(1);
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk.push_back(static_cast<char>(rng()));
  write_bytes(path, junk);
  auto msg = error_of([&] { nmt::load_checkpoint(path, torch::kCPU); });
  EXPECT_TRUE(contains(msg, "not an nmt checkpoint")) << msg;
  EXPECT_TRUE(contains(msg, path)) << msg;
  // A SentencePiece model given where a checkpoint is expected.
  write_bytes(path, nmt::test::toy_tokenizer().bytes());
  msg = error_of([&] { nmt::load_checkpoint(path, torch::kCPU); });
  EXPECT_TRUE(contains(msg, "not an nmt checkpoint")) << msg;
  write_bytes(path, "");
  msg = error_of([&] { nmt::load_checkpoint(path, torch::kCPU); });
  EXPECT_TRUE(contains(msg, "not an nmt checkpoint")) << msg;
}

TEST(CheckpointTest, NewerVersionIsRejected) {
  const auto dir = temp_dir("ckpt_version");
  const auto path = dir + "/m.ckpt";
  auto model = tiny();
  nmt::save_checkpoint(path, model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
  auto bytes = read_bytes(path);
  bytes[8] = 99;
  write_bytes(path, bytes);
  auto msg = error_of([&] { nmt::load_checkpoint(path, torch::kCPU); });
  EXPECT_TRUE(contains(msg, "newer")) << msg;
  EXPECT_TRUE(contains(msg, "99")) << msg;
  bytes[8] = 0;
  write_bytes(path, bytes);
  msg = error_of([&] { nmt::load_checkpoint(path, torch::kCPU); });
  EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST(CheckpointTest, MissingFile) {
  const auto path = temp_dir("ckpt_missing") + "/nope.ckpt";
  const auto msg = error_of([&] { nmt::load_checkpoint(path, torch::kCPU); });
  EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST(CheckpointTest, WriteFileAtomic) {
  const auto dir = temp_dir("ckpt_atomic");
  const auto path = dir + "/f.bin";
  nmt::write_file_atomic(path, "first");
  EXPECT_EQ(read_bytes(path), "first");
  nmt::write_file_atomic(path, std::string("sec\0ond", 7));
  EXPECT_EQ(read_bytes(path), std::string("sec\0ond", 7));
  nmt::write_file_atomic(path, "");
  EXPECT_EQ(read_bytes(path), "");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "f.bin") << "left behind: " << e.path();
  }
  EXPECT_EQ(files, 1);
  // An unwritable place is an nmt::Error, not a crash.
  const auto msg = error_of([&] { nmt::write_file_atomic(dir + "/no/such/dir/f.bin", "x"); });
  EXPECT_TRUE(contains(msg, dir + "/no/such/dir/f.bin")) << msg;
}

TEST(CheckpointTest, SaveOverExistingFileKeepsItValid) {
  const auto dir = temp_dir("ckpt_overwrite");
  const auto path = dir + "/m.ckpt";
  const auto& tok = nmt::test::toy_tokenizer();
  auto a = tiny();
  nmt::save_checkpoint(path, a, tok, tok);
  torch::manual_seed(99);
  nmt::Seq2Seq b(nmt::test::tiny_model());
  b->eval();
  nmt::save_checkpoint(path, b, tok, tok);
  auto loaded = nmt::load_checkpoint(path, torch::kCPU);
  expect_same_weights(b, loaded.model);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) ++files, (void)e;
  EXPECT_EQ(files, 1);
}

// A few Adam steps on a fixed batch.

TEST(CheckpointTest, TrainingCheckpointRestoresStateAndOptimizer) {
  const auto dir = temp_dir("ckpt_train");
  const auto path = dir + "/train.ckpt";
  const auto& tok = nmt::test::toy_tokenizer();
  const auto b = toy_batch(8, 4);
  auto model = tiny();
  const auto adam_opt = torch::optim::AdamOptions(3e-3).betas({0.9, 0.98});
  torch::optim::Adam adam(model->parameters(), adam_opt);
  train_steps(model, adam, b, 3);

  nmt::TrainState st;
  st.step = 3;
  st.epoch = 2;
  st.batch_in_epoch = 5;
  st.learning_rate = 3e-3;
  st.best_metric = -12.5;
  st.has_best = true;
  st.bad_validations = 1;
  st.plateau = 2;
  st.seed = 77;
  st.elapsed_seconds = 12.25;
  torch::manual_seed(1234);
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    st.rng_state = gen.get_state();
  }
  nmt::save_checkpoint(path, model, tok, tok, &adam, &st);

  auto loaded = nmt::load_checkpoint(path, torch::kCPU);
  expect_same_weights(model, loaded.model);
  torch::optim::Adam adam2(loaded.model->parameters(), adam_opt);
  const auto st2 = nmt::load_train_state(path, adam2, torch::kCPU);
  EXPECT_EQ(st2.step, st.step);
  EXPECT_EQ(st2.epoch, st.epoch);
  EXPECT_EQ(st2.batch_in_epoch, st.batch_in_epoch);
  EXPECT_DOUBLE_EQ(st2.learning_rate, st.learning_rate);
  EXPECT_DOUBLE_EQ(st2.best_metric, st.best_metric);
  EXPECT_EQ(st2.has_best, st.has_best);
  EXPECT_EQ(st2.bad_validations, st.bad_validations);
  EXPECT_EQ(st2.plateau, st.plateau);
  EXPECT_EQ(st2.seed, st.seed);
  EXPECT_DOUBLE_EQ(st2.elapsed_seconds, st.elapsed_seconds);
  ASSERT_TRUE(st2.rng_state.defined());
  EXPECT_TRUE(torch::equal(st2.rng_state, st.rng_state));

  // One more step from the originals and from the loaded copies: same weights.
  // (A fresh optimizer would take a different first step: Adam's moments matter.)
  train_steps(model, adam, b, 1);
  train_steps(loaded.model, adam2, b, 1);
  expect_same_weights(model, loaded.model);

  // Control: the same step with a fresh optimizer diverges, so the check above has teeth.
  auto control = nmt::load_checkpoint(path, torch::kCPU);
  torch::optim::Adam fresh(control.model->parameters(), adam_opt);
  train_steps(control.model, fresh, b, 1);
  EXPECT_FALSE(torch::equal(control.model->named_parameters()["decoder.out_bias"],
                            model->named_parameters()["decoder.out_bias"]));
}

TEST(CheckpointTest, EveryFlippedByteIsRefused) {
  const auto dir = temp_dir("ckpt_flip");
  const auto path = dir + "/m.ckpt";
  auto model = tiny();
  nmt::save_checkpoint(path, model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
  const auto bytes = read_bytes(path);
  std::mt19937 rng(11);
  for (int copy = 0; copy < 20; ++copy) {
    auto damaged = bytes;
    const size_t at = rng() % damaged.size();
    damaged[at] = static_cast<char>(damaged[at] ^ (1 + rng() % 255));
    const auto file = dir + "/flip" + std::to_string(copy) + ".ckpt";
    write_bytes(file, damaged);
    const auto msg = error_of([&] { nmt::load_checkpoint(file, torch::kCPU); });
    EXPECT_TRUE(contains(msg, file)) << "byte " << at << ": " << msg;
    if (at >= 24) { EXPECT_TRUE(contains(msg, "checksum mismatch")) << "byte " << at << ": " << msg; }
  }
  // Trailing bytes are damage too.
  write_bytes(path, bytes + "x");
  EXPECT_TRUE(contains(error_of([&] { nmt::load_checkpoint(path, torch::kCPU); }), "damaged"));
}

// Files of formats 1 and 2 are refused by every reader with the command
// that converts them; --convert's output holds the same weights, tokenizers
// and (format 2 training checkpoints) optimizer and training state.
}  // namespace
