// Checkpoint files: round trip, header checks, corrupt files, atomic writes,
// training state and optimizer restore.
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
#include "train/losses.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nmt::test::read_bytes;
using nmt::test::temp_dir;
using nmt::test::write_bytes;

using nmt::test::contains;
using nmt::test::error_of;

nmt::Batch toy_batch(int n = 6, uint64_t seed = 3) {
  const auto& tok = nmt::test::toy_tokenizer();
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(n, seed, &s, &t);
  std::vector<nmt::Example> ex(n);
  std::vector<int64_t> idx;
  for (int i = 0; i < n; ++i) {
    ex[i].src = tok.encode(s[i]);
    ex[i].src.push_back(nmt::kEosId);
    ex[i].tgt = tok.encode(t[i]);
    idx.push_back(i);
  }
  return nmt::make_batch(ex, idx);
}

nmt::Seq2Seq tiny(bool tie = false, int64_t alignment_head = 0) {
  torch::manual_seed(5);
  auto opt = nmt::test::tiny_model();
  opt.tie_embeddings = tie;
  opt.alignment_head = alignment_head;
  nmt::Seq2Seq m(opt);
  m->eval();
  return m;
}

torch::Tensor logits_of(nmt::Seq2Seq& m, const nmt::Batch& b) {
  torch::NoGradGuard ng;
  return m->forward(b.src, b.src_len, b.tgt_in);
}

void expect_same_weights(nmt::Seq2Seq& a, nmt::Seq2Seq& b) {
  auto pa = a->named_parameters();
  auto pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& p : pa) {
    ASSERT_TRUE(pb.contains(p.key())) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  }
}

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
void train_steps(nmt::Seq2Seq& m, torch::optim::Adam& adam, const nmt::Batch& b, int n) {
  m->train();
  for (int i = 0; i < n; ++i) {
    adam.zero_grad();
    auto loss = nmt::sequence_loss(m->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0.1);
    (loss / static_cast<double>(b.tgt_tokens)).backward();
    adam.step();
  }
}

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
