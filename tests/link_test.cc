// The SentencePiece / LibTorch isolation (see src/text/spm_module.h).
//
// Debian's libsentencepiece carries a private protobuf-lite (3.14) whose
// exported symbols clash with the libprotobuf (3.21) that libtorch uses. If
// someone links sentencepiece into nmt directly again (target_link_libraries
// nmt ... sentencepiece), both end up in the global symbol scope of every
// program: then either the process crashes at start-up / in protobuf's
// version check, or one of the two libraries silently binds to the other's
// protobuf. These tests catch that in three ways:
//   * the test binary must have no NEEDED entry for sentencepiece (readelf),
//   * SentencePiece's symbols and the module's entry point must not be visible
//     through dlsym(RTLD_DEFAULT, ...) (they live in an RTLD_LOCAL module),
//   * one process must be able to train/encode/decode with SentencePiece AND
//     run LibTorch ops, including a GRU forward/backward, without crashing.
#include <dlfcn.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "text/tokenizer.h"

namespace {

std::string run_and_capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

std::string self_maps() {
  std::ifstream in("/proc/self/maps");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LinkTest, SentencePieceAndTorchWorkInOneProcess) {
  // SentencePiece: train, encode, decode.
  std::vector<std::string> src, tgt;
  nmt::test::toy_corpus(300, 11, &src, &tgt);
  src.insert(src.end(), tgt.begin(), tgt.end());
  nmt::TokenizerOptions opt;
  opt.vocab_size = 50;
  const auto tok = nmt::Tokenizer::train(src, opt);
  EXPECT_GT(tok.vocab_size(), 4);
  const std::string sentence = "the big cat sees a small bird";
  const auto ids = tok.encode(sentence);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(tok.decode(ids), sentence);

  // LibTorch: a plain op and a GRU forward/backward.
  torch::manual_seed(0);
  auto a = torch::arange(6, torch::kFloat).reshape({2, 3});
  EXPECT_FLOAT_EQ(a.sum().item<float>(), 15.0f);  // small integers: exact in any order
  EXPECT_FLOAT_EQ(torch::mm(a, a.t())[0][1].item<float>(), 0 * 3 + 1 * 4 + 2 * 5);
  torch::nn::GRU gru(torch::nn::GRUOptions(4, 5).batch_first(true).bidirectional(true));
  auto x = torch::randn({2, 3, 4});
  auto out = std::get<0>(gru->forward(x));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 3, 10}));
  out.pow(2).sum().backward();
  for (const auto& p : gru->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().norm().item<double>(), 0.0) << p.key();
  }

  // And SentencePiece still works after LibTorch ran.
  EXPECT_EQ(tok.decode(tok.encode("red dog")), "red dog");
}

TEST(LinkTest, ModuleIsLoadedLocallyNotGlobally) {
  const auto& tok = nmt::test::toy_tokenizer();  // forces the module to load
  ASSERT_GT(tok.vocab_size(), 4);
  const std::string path = nmt::Tokenizer::module_path();
  ASSERT_FALSE(path.empty());

  // The module and libsentencepiece are mapped into the process...
  const std::string maps = self_maps();
  const std::string module_file = path.substr(path.find_last_of('/') + 1);
  EXPECT_NE(maps.find(module_file), std::string::npos) << "module " << path << " not in /proc/self/maps";
  EXPECT_NE(maps.find("libsentencepiece"), std::string::npos);

  // ...but not in the global symbol scope: the module was opened RTLD_LOCAL,
  // and nothing in the executable's own dependency tree exports SentencePiece.
  EXPECT_EQ(::dlsym(RTLD_DEFAULT, "nmt_spm_module_api"), nullptr)
      << "the SentencePiece module's entry point is globally visible: it was linked or loaded RTLD_GLOBAL";
  EXPECT_EQ(::dlsym(RTLD_DEFAULT, "_ZN13sentencepiece22SentencePieceProcessorC1Ev"), nullptr)
      << "sentencepiece::SentencePieceProcessor is globally visible: libsentencepiece is linked into the "
         "program (its protobuf-lite then clashes with libtorch's libprotobuf)";
}

TEST(LinkTest, ExecutableDoesNotLinkSentencePieceDirectly) {
  const std::string dyn = run_and_capture("readelf -d /proc/" + std::to_string(::getpid()) + "/exe 2>&1");
  ASSERT_NE(dyn.find("NEEDED"), std::string::npos) << "readelf gave no dynamic section:\n" << dyn;
  std::istringstream lines(dyn);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("NEEDED") == std::string::npos) continue;
    EXPECT_EQ(line.find("sentencepiece"), std::string::npos)
        << "the test binary links SentencePiece directly (" << line
        << "); it must only be loaded through libnmt_spm.so (see src/text/spm_module.h)";
  }
}

}  // namespace
