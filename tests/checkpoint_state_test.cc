// Checkpoint files beyond the round trip: old formats refused and converted,
// non-finite weights refused, loading a training state from a model-only
// file, the meta record, and release (checkpoint_test.cc has the rest).
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

TEST(CheckpointTest, OldFormatsAreRefusedWithTheCommandThatConvertsThem) {
  const auto dir = temp_dir("ckpt_old");
  const auto& tok = nmt::test::toy_tokenizer();
  auto model = tiny();
  const auto adam_opt = torch::optim::AdamOptions(3e-3).betas({0.9, 0.98});
  torch::optim::Adam adam(model->parameters(), adam_opt);
  const auto b = toy_batch(8, 4);
  train_steps(model, adam, b, 2);
  nmt::TrainState st;
  st.step = 2;
  st.epoch = 1;
  st.batch_in_epoch = 2;
  st.learning_rate = 3e-3;
  st.seed = 9;
  for (int version : {1, 2})
    nmt::test::write_old_checkpoint(dir + "/v" + std::to_string(version) + ".ckpt", model, tok, tok, &adam, &st, version);
  std::vector<nmt::LoadedModel> stepped;
  for (int version : {1, 2}) {
    SCOPED_TRACE(version);
    const auto old = dir + "/v" + std::to_string(version) + ".ckpt";
    for (const auto& msg : {error_of([&] { nmt::load_checkpoint(old, torch::kCPU); }),
                            error_of([&] { nmt::describe_checkpoint(old); }),
                            error_of([&] { nmt::load_train_state(old, adam, torch::kCPU); })})
      EXPECT_TRUE(contains(msg, old) && contains(msg, "format " + std::to_string(version)) &&
                  contains(msg, "nmt-train --convert " + old + " NEW.ckpt"))
          << msg;
    const auto r = nmt::convert_checkpoint(old, old + ".new");
    EXPECT_EQ(r.from_version, static_cast<uint32_t>(version));
    EXPECT_TRUE(r.resumable);
    EXPECT_EQ(r.step, 2);
    auto loaded = nmt::load_checkpoint(old + ".new", torch::kCPU);
    expect_same_weights(model, loaded.model);
    EXPECT_EQ(loaded.src_tok.bytes(), tok.bytes());
    EXPECT_TRUE(contains(loaded.meta.made_from, "converted from " + old)) << loaded.meta.made_from;
    torch::optim::Adam adam2(loaded.model->parameters(), adam_opt);
    const auto st2 = nmt::load_train_state(old + ".new", adam2, torch::kCPU);
    EXPECT_EQ(st2.batch_in_epoch, 2);
    EXPECT_TRUE(st2.rng_state.defined() == st.rng_state.defined());
    train_steps(loaded.model, adam2, b, 1);
    stepped.push_back(loaded);
    // Converting a current file, or over the input, is refused.
    EXPECT_TRUE(contains(error_of([&] { nmt::convert_checkpoint(old + ".new", dir + "/x.ckpt"); }), "nothing to convert"));
    EXPECT_THROW(nmt::convert_checkpoint(old, old), nmt::UsageError);
  }
  // Resumed from a converted file, the next step is the original's: Adam's
  // moments and steps came through.
  train_steps(model, adam, b, 1);
  for (auto& m : stepped) expect_same_weights(model, m.model);
}

TEST(CheckpointTest, NonFiniteWeightsAreRefusedNamingTheTensor) {
  const auto dir = temp_dir("ckpt_nan");
  auto model = tiny();
  {
    torch::NoGradGuard ng;
    model->named_parameters()["decoder.deep.weight"].view(-1).narrow(0, 0, 256).fill_(NAN);
  }
  // Loading one (written by older code, or by other tools) is refused, and
  // so is converting one.
  {
    auto good = tiny();
    nmt::save_checkpoint(dir + "/good.ckpt", good, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
    auto parts = nmt::test::read_checkpoint_parts(dir + "/good.ckpt");
    parts.tensors["model.decoder.deep.weight"] = model->named_parameters()["decoder.deep.weight"].detach().clone();
    nmt::test::write_checkpoint_parts(dir + "/nan.ckpt", parts);
  }
  auto msg = error_of([&] { nmt::load_checkpoint(dir + "/nan.ckpt", torch::kCPU); });
  EXPECT_TRUE(contains(msg, dir + "/nan.ckpt") && contains(msg, "decoder.deep.weight") && contains(msg, "NaN")) << msg;
  nmt::test::write_old_checkpoint(dir + "/nan-v2.ckpt", model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
  msg = error_of([&] { nmt::convert_checkpoint(dir + "/nan-v2.ckpt", dir + "/nan-v3.ckpt"); });
  EXPECT_TRUE(contains(msg, "decoder.deep.weight") && contains(msg, "NaN")) << msg;
  EXPECT_FALSE(fs::exists(dir + "/nan-v3.ckpt"));
  // Saving one is refused, and the file already there is kept byte for byte.
  auto good = tiny();
  nmt::save_checkpoint(dir + "/m.ckpt", good, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
  const auto before = read_bytes(dir + "/m.ckpt");
  msg = error_of([&] { nmt::save_checkpoint(dir + "/m.ckpt", model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer()); });
  EXPECT_TRUE(contains(msg, "decoder.deep.weight")) << msg;
  EXPECT_EQ(read_bytes(dir + "/m.ckpt"), before);
}

TEST(CheckpointTest, LoadTrainStateNeedsATrainingCheckpoint) {
  const auto dir = temp_dir("ckpt_notrain");
  const auto path = dir + "/m.ckpt";
  auto model = tiny();
  nmt::save_checkpoint(path, model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer());
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  const auto msg = error_of([&] { nmt::load_train_state(path, adam, torch::kCPU); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_TRUE(contains(msg, "training")) << msg;
}

// Each checkpoint records who wrote it and how ("meta"); files from before
// that load as ever and say so in --info.
TEST(CheckpointTest, MetaRecordsTheWriterAndTheCommand) {
  const auto dir = temp_dir("ckpt_meta");
  const auto& tok = nmt::test::toy_tokenizer();
  auto model = tiny();
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  train_steps(model, adam, toy_batch(), 1);
  nmt::TrainState st;
  st.step = 42;
  st.learning_rate = 1e-3;
  nmt::CheckpointMeta meta;
  meta.command = "nmt-train -c 'my config.toml'";
  meta.folder = "/some/where";
  nmt::save_checkpoint(dir + "/m.ckpt", model, tok, tok, &adam, &st, meta);
  const auto info = nmt::inspect_checkpoint(read_bytes(dir + "/m.ckpt"), "m.ckpt");
  ASSERT_TRUE(info.has_meta);
  EXPECT_EQ(info.meta.writer.rfind("nmt 0.", 0), 0u) << info.meta.writer;
  EXPECT_TRUE(contains(info.meta.writer, "(commit ")) << info.meta.writer;
  EXPECT_EQ(info.meta.command, meta.command);
  EXPECT_EQ(info.meta.folder, meta.folder);
  EXPECT_EQ(info.meta.step, 42);  // from the training state
  EXPECT_EQ(nmt::load_checkpoint(dir + "/m.ckpt", torch::kCPU).meta.command, meta.command);
  const auto text = nmt::describe_checkpoint(dir + "/m.ckpt");
  EXPECT_TRUE(contains(text, "trained by: nmt-train -c 'my config.toml' (in /some/where)\n")) << text;
  EXPECT_TRUE(contains(text, "weights of step: 42\n")) << text;

  // A file without it (meta is informational) loads and says so.
  auto parts = nmt::test::read_checkpoint_parts(dir + "/m.ckpt");
  parts.metadata.erase("meta");
  nmt::test::write_checkpoint_parts(dir + "/bare.ckpt", parts);
  EXPECT_FALSE(nmt::inspect_checkpoint(read_bytes(dir + "/bare.ckpt"), "bare.ckpt").has_meta);
  EXPECT_TRUE(contains(nmt::describe_checkpoint(dir + "/bare.ckpt"), "written by: not recorded"));
}

// release_checkpoint: the model without optimizer and training state, the
// same weights, a smaller file; never over its input.
TEST(CheckpointTest, ReleaseDropsTheTrainingStateAndNeverReplacesItsInput) {
  const auto dir = temp_dir("ckpt_release");
  const auto& tok = nmt::test::toy_tokenizer();
  auto model = tiny();
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  train_steps(model, adam, toy_batch(), 2);
  nmt::TrainState st;
  st.step = 2;
  st.learning_rate = 1e-3;
  nmt::save_checkpoint(dir + "/in.ckpt", model, tok, tok, &adam, &st);
  const auto before = read_bytes(dir + "/in.ckpt");
  const auto r = nmt::release_checkpoint(dir + "/in.ckpt", dir + "/out.ckpt");
  EXPECT_EQ(r.in_bytes, before.size());
  EXPECT_EQ(r.out_bytes, fs::file_size(dir + "/out.ckpt"));
  EXPECT_LT(r.out_bytes, r.in_bytes);
  EXPECT_EQ(r.step, 2);
  const auto info = nmt::inspect_checkpoint(read_bytes(dir + "/out.ckpt"), "out.ckpt");
  EXPECT_FALSE(info.has_train_state);
  EXPECT_EQ(info.meta.step, 2);
  EXPECT_TRUE(contains(info.meta.made_from, "released from " + dir + "/in.ckpt")) << info.meta.made_from;
  auto loaded = nmt::load_checkpoint(dir + "/out.ckpt", torch::kCPU);
  expect_same_weights(model, loaded.model);
  // Released again (no training state to drop): still loads, the same weights.
  nmt::release_checkpoint(dir + "/out.ckpt", dir + "/out2.ckpt");
  auto again = nmt::load_checkpoint(dir + "/out2.ckpt", torch::kCPU);
  expect_same_weights(model, again.model);
  // The input as output, by any path: refused before anything is written.
  fs::create_hard_link(dir + "/in.ckpt", dir + "/hard.ckpt");
  for (const std::string& out : {dir + "/in.ckpt", dir + "/../" + fs::path(dir).filename().string() + "/in.ckpt",
                                 dir + "/hard.ckpt"}) {
    try {
      nmt::release_checkpoint(dir + "/in.ckpt", out);
      ADD_FAILURE() << "released over its input: " << out;
    } catch (const nmt::UsageError& e) {
      EXPECT_TRUE(contains(e.what(), "is the input checkpoint")) << e.what();
    }
  }
  EXPECT_EQ(read_bytes(dir + "/in.ckpt"), before);
  EXPECT_TRUE(nmt::test::temporary_files(dir).empty());
}

}  // namespace
