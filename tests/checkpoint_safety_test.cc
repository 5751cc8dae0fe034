// Checkpoints from a stranger, through the real executables: each file is a
// real checkpoint changed as a hostile author could change it and sealed
// again with a valid size and checksum (checkpoint_edit.h), so that every
// check after the checksum is what gets tested. Each is refused with one
// line naming the file and the field, within a memory bound (the README's:
// the tool's own memory plus the file's size, at most max_peak_mib() here for
// these small files), and nothing from the file runs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint_edit.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nmt::test::CheckpointParts;
using nmt::test::quote;
using nmt::test::read_bytes;
using nmt::test::run;
using nmt::test::temp_dir;


// nmt-train's arguments for the toy model on the corpus in `d`, into `run_dir`.
std::string train_args(const std::string& d, const std::string& run_dir, int steps = 6) {
  return "--train-src " + quote(d + "/train.src") + " --train-tgt " + quote(d + "/train.tgt") + " --valid-src " +
         quote(d + "/valid.src") + " --valid-tgt " + quote(d + "/valid.tgt") + " -o " + quote(run_dir) +
         " --src-spm " + quote(nmt::test::toy_tokenizer_file()) + " --tgt-spm " +
         quote(nmt::test::toy_tokenizer_file()) +
         " --emb-dim 16 --enc-hidden 16 --dec-hidden 32 --attn-dim 16 --batch-tokens 200 --max-steps " +
         std::to_string(steps) + " --valid-every 0 --threads 1 --device cpu";
}

// A training run of the toy model: a folder with last.ckpt to edit.
const std::string& trained_run() {
  static const std::string dir = [] {
    const std::string d = temp_dir("ckpt_safe_run");
    nmt::test::write_toy_corpus(d, 200, 10);
    const auto r = run("nmt-train", train_args(d, d + "/run", 3), d);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return d;
  }();
  return dir;
}

// The most a tool may hold while refusing one of these files (each under
// 1 MB): what nmt-translate holds opening the valid checkpoint they are made
// from, in this build (its own memory and the file's: about 200 MiB, three
// times that under AddressSanitizer), plus kSlackMiB. The files below claim
// tens of gigabytes, which a tool that believed them would try to allocate.
#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer's quarantine keeps up to 256 MiB of freed memory resident
// (quarantine_size_mb), more on one path than on another.
constexpr double kSlackMiB = 64 + 256;
#else
constexpr double kSlackMiB = 64;
#endif
double max_peak_mib() {
  static const double bound = [] {
    const std::string ckpt = trained_run() + "/run/last.ckpt";
    double most = 0;
    for (const std::string mode : {"-m ", "--info -m "}) {
      const auto r = run("nmt-translate", mode + quote(ckpt) + " --threads 1", trained_run(), "/dev/null");
      EXPECT_EQ(r.exit_code, 0) << r.err;
      most = std::max(most, r.peak_rss_mib);
    }
    return most + kSlackMiB;
  }();
  return bound;
}

// Runs nmt-translate -m FILE and (with `info`) --info -m FILE: refused with
// one line holding `parts`, within the memory bound.
void expect_model_refused(const std::string& file, const std::vector<std::string>& parts, bool info = true) {
  const auto dir = fs::path(file).parent_path().string();
  for (const std::string& mode : {std::string("-m "), std::string("--info -m ")}) {
    if (!info && mode != "-m ") continue;
    SCOPED_TRACE(mode + file);
    const auto r = run("nmt-translate", mode + quote(file) + " --threads 1", dir, "/dev/null");
    std::vector<std::string> want = parts;
    want.push_back(file);
    nmt::test::expect_one_line_error(r, want);
    EXPECT_LT(r.peak_rss_mib, max_peak_mib()) << r.err;
  }
}

// A copy of the run's last.ckpt after `edit`, sealed, in a fresh run folder
// (for --resume) or a file; returns the file's path.
std::string edited(const std::string& name, const std::function<void(CheckpointParts&)>& edit) {
  const auto dir = temp_dir("ckpt_safe_" + name);
  auto parts = nmt::test::read_checkpoint_parts(trained_run() + "/run/last.ckpt");
  edit(parts);
  fs::create_directories(dir + "/run");
  nmt::test::write_checkpoint_parts(dir + "/run/last.ckpt", parts);
  return dir + "/run/last.ckpt";
}

// The run's last.ckpt body with its JSON header changed by `edit`.
std::string edited_header(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  const auto dir = temp_dir("ckpt_safe_" + name);
  const std::string body = nmt::test::checkpoint_body(trained_run() + "/run/last.ckpt");
  auto j = nlohmann::json::parse(nmt::test::json_header(body));
  edit(j);
  nmt::test::write_sealed(dir + "/m.ckpt", nmt::test::with_json_header(body, j.dump()));
  return dir + "/m.ckpt";
}

// Sets one field of the stored training state.
std::function<void(CheckpointParts&)> state_field(const std::string& key, const nlohmann::json& value) {
  return [=](CheckpointParts& p) {
    auto s = nlohmann::json::parse(p.metadata.at("train_state"));
    s[key] = value;
    p.metadata["train_state"] = s.dump();
  };
}

// --resume from `ckpt`'s folder: refused with one line holding `parts`;
// nothing was trained (no metrics written past the refusal).
void expect_resume_refused(const std::string& ckpt, const std::vector<std::string>& parts) {
  const auto run_dir = fs::path(ckpt).parent_path().string();
  const auto before = read_bytes(ckpt);
  const auto r = run("nmt-train", train_args(trained_run(), run_dir) + " --resume", run_dir);
  std::vector<std::string> want = parts;
  want.push_back(ckpt);
  nmt::test::expect_one_line_error(r, want);
  EXPECT_EQ(r.err.find("resumed from"), std::string::npos) << r.err;
  EXPECT_EQ(read_bytes(ckpt), before) << "the checkpoint was replaced";
}

TEST(CheckpointSafetyTest, AnOldFormatFileIsNeverLoadedAndConvertsWithoutRunningIt) {
  const auto dir = temp_dir("ckpt_safe_old");
  // The committed format 2 file: a LibTorch archive, which LibTorch's own
  // loader would compile and run. Every tool refuses it with the command.
  const std::string old = dir + "/old.ckpt";
  fs::copy_file(std::string(NMT_SOURCE_DIR) + "/tests/data/format2-tiny.ckpt", old);
  expect_model_refused(old, {"checkpoint format 2", "nmt-train --convert " + old + " NEW.ckpt"});
  // --convert reads it with nmt's own reader and writes the current format.
  auto r = run("nmt-train", "--convert " + quote(old) + " " + quote(dir + "/new.ckpt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("in checkpoint format 3 (was 2), resumable from step 2"), std::string::npos) << r.err;
  r = run("nmt-translate", "--info -m " + quote(dir + "/new.ckpt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("format version: 3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("made from: converted from " + old), std::string::npos) << r.out;
  // A format 2 file whose TorchScript code says that loading it never ends
  // (a __setstate__ with `while True`), as LibTorch's loader would run it:
  // --convert never reads the code (not even its zip checksum), so it
  // converts at once and the result holds the same tensors.
  std::string bytes = read_bytes(old);
  const std::string name = "archive/code/__torch__.py";
  const size_t at = bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  const size_t header = at - 30;  // the zip's local header of that entry
  ASSERT_EQ(bytes.substr(header, 4), "PK\x03\x04");
  auto le = [&](size_t i, int n) {
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(bytes[i + k]);
    return v;
  };
  const size_t data = header + 30 + le(header + 26, 2) + le(header + 28, 2), size = le(header + 18, 4);
  std::string code = "class Module:\n  def __setstate__(self, state):\n    while True:\n      pass\n";
  code.resize(size, ' ');
  bytes.replace(data, size, code.substr(0, size));
  nmt::test::write_old_body(dir + "/hostile.ckpt", bytes.substr(24));  // the nmt header's checksum made right
  r = run("nmt-train", "--convert " + quote(dir + "/hostile.ckpt") + " " + quote(dir + "/hostile-new.ckpt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_model_refused(dir + "/hostile.ckpt", {"nmt-train --convert"});
  // Over its own input, or a current file: refused.
  r = run("nmt-train", "--convert " + quote(dir + "/new.ckpt") + " " + quote(dir + "/x.ckpt"), dir);
  nmt::test::expect_one_line_error(r, {dir + "/new.ckpt", "nothing to convert"});
  r = run("nmt-train", "--convert " + quote(old) + " " + quote(old), dir);
  nmt::test::expect_one_line_error(r, {"is the input checkpoint"}, nmt::test::kExitUsage);
}

// A config that claims huge dimensions over the real (small) tensors: the
// shapes are compared before a model is built.
TEST(CheckpointSafetyTest, SizesAreCheckedBeforeAnythingIsAllocated) {
  for (const auto& [key, value, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"emb_dim", "65536", "wrong shape for the model config"},
           {"enc_hidden", "8192", "wrong shape for the model config"},
           {"tgt_vocab", "4000000", "wrong shape for the model config"},
           {"enc_layers", "64", "lacks weight 'encoder.rnn.weight_ih_l1'"}}) {
    SCOPED_TRACE(key);
    const auto file = edited("dims_" + key, [&](CheckpointParts& p) {
      std::string config = p.metadata.at("config");
      const auto at = config.find(key + "=");
      ASSERT_NE(at, std::string::npos) << config;
      config.replace(at, config.find('\n', at) - at, key + "=" + value);
      p.metadata["config"] = config;
    });
    expect_model_refused(file, {says});
  }
  // Tensor headers that claim more than the file holds.
  auto file = edited_header("shape", [](nlohmann::json& j) {
    j["model.decoder.out_bias"]["shape"] = {65536, 65536};
  });
  expect_model_refused(file, {"model.decoder.out_bias", "needs more bytes than the file"});
  file = edited_header("offsets", [](nlohmann::json& j) {
    j["model.decoder.out_bias"]["data_offsets"] = {uint64_t{8} << 30, (uint64_t{8} << 30) + 4};
  });
  expect_model_refused(file, {"model.decoder.out_bias", "begin offset"});
  // A header length near 2^32 over a small file.
  const auto dir = temp_dir("ckpt_safe_len");
  std::string body = nmt::test::checkpoint_body(trained_run() + "/run/last.ckpt");
  for (int i = 0; i < 8; ++i) body[i] = static_cast<char>((uint64_t{0xFFFFFFF0} >> (8 * i)) & 0xFF);
  nmt::test::write_sealed(dir + "/m.ckpt", body);
  expect_model_refused(dir + "/m.ckpt", {"tensor header declares 4294967280 bytes"});
  // A header nested deeper than the layout.
  const std::string real = nmt::test::checkpoint_body(trained_run() + "/run/last.ckpt");
  nmt::test::write_sealed(dir + "/deep.ckpt",
                          nmt::test::with_json_header(real, std::string(100000, '[') + std::string(100000, ']')));
  expect_model_refused(dir + "/deep.ckpt", {"nests deeper"});
}

// A format 1 header (which declares no size) from a FIFO followed by
// endless zeros: refused after the header, not read to the end.
TEST(CheckpointSafetyTest, AnUnsizedOldHeaderFromAPipeIsNotReadToItsEnd) {
  const auto dir = temp_dir("ckpt_safe_fifo");
  int n = 0;
  for (const std::string& tool : {std::string("nmt-translate -m "), std::string("nmt-train --convert ")}) {
    SCOPED_TRACE(tool);
    // A FIFO of its own per tool: a writer of the last one that has not died
    // yet could otherwise feed this reader its zeros before the new header.
    const auto fifo = dir + "/m" + std::to_string(++n) + ".ckpt";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // The writer ends when the reader closes the pipe (SIGPIPE), or after 1 GB.
    const std::string writer = "(printf 'NMTCKPT\\n\\001\\000\\000\\000'; head -c 1000000000 /dev/zero) > " +
                               quote(fifo) + " 2>/dev/null &";
    ASSERT_EQ(std::system(writer.c_str()), 0);
    const auto space = tool.find(' ');
    const auto r = run(tool.substr(0, space), tool.substr(space + 1) + quote(fifo) +
                                                  (tool.find("convert") != std::string::npos ? " " + quote(dir + "/out.ckpt") : ""),
                       dir);
    nmt::test::expect_one_line_error(r, {fifo, "format 1", "regular file"});
    EXPECT_LT(r.peak_rss_mib, max_peak_mib());
    // Unblock a writer that found no reader, so that it ends.
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
}

// A weight cut short, two weights over the same bytes, a dtype nmt never
// writes: the ranges must tile the data exactly.
TEST(CheckpointSafetyTest, RangesOutsideTheirTensorAreRefused) {
  auto file = edited_header("cut", [](nlohmann::json& j) {
    auto& off = j["model.decoder.out_bias"]["data_offsets"];
    off[1] = off[0].get<uint64_t>() + 4;
  });
  expect_model_refused(file, {"model.decoder.out_bias", "do not hold"});
  file = edited_header("overlap", [](nlohmann::json& j) {
    j["model.decoder.out_bias"]["data_offsets"] = j["model.encoder.init.bias"]["data_offsets"];
    j["model.decoder.out_bias"]["shape"] = j["model.encoder.init.bias"]["shape"];
  });
  expect_model_refused(file, {"starts at byte"});
  file = edited_header("qint8", [](nlohmann::json& j) { j["model.decoder.out_bias"]["dtype"] = "I8"; });
  expect_model_refused(file, {"model.decoder.out_bias", "dtype \"I8\" is not one nmt reads"});
  file = edited("nan", [](CheckpointParts& p) { p.tensors["model.decoder.out_bias"][0] = NAN; });
  // NaN weights: a model that cannot translate (--info still describes it).
  expect_model_refused(file, {"decoder.out_bias", "NaN or Inf"}, /*info=*/false);
}

// The training state, field by field, before anything trains.
TEST(CheckpointSafetyTest, TrainingStateIsCheckedFieldByField) {
  expect_resume_refused(edited("batch", state_field("batch_in_epoch", -100000000)), {"'batch_in_epoch'", "outside"});
  expect_resume_refused(edited("batch_big", state_field("batch_in_epoch", 100000000)),
                        {"'batch_in_epoch'", "past the"});
  expect_resume_refused(edited("lr_neg", state_field("learning_rate", -1.0)), {"'learning_rate'", "not positive"});
  expect_resume_refused(edited("lr_nan", state_field("learning_rate", nullptr)), {"'learning_rate'", "not a number"});
  expect_resume_refused(edited("epoch", state_field("epoch", 0)), {"'epoch'", "outside"});
  expect_resume_refused(edited("rng", [](CheckpointParts& p) { p.tensors["state.rng"] = torch::zeros({7}, torch::kByte); }),
                        {"'state.rng'", "generator state"});
  expect_resume_refused(edited("moment", [](CheckpointParts& p) {
                          p.tensors["optimizer.0.3.exp_avg"] = torch::zeros({2, 2});
                        }),
                        {"optimizer.0.3.exp_avg", "shape"});
  expect_resume_refused(edited("beta", [](CheckpointParts& p) {
                          auto o = nlohmann::json::parse(p.metadata.at("optimizer"));
                          o["groups"][0]["options"]["beta2"] = 7;
                          p.metadata["optimizer"] = o.dump();
                        }),
                        {"'beta2'", "outside"});
}

}  // namespace
