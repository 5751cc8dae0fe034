// The checkpoint fuzz target (fuzz/checkpoint_fuzz_target.h), run in every
// test run on a fixed budget of mutations of a real checkpoint's body,
// without libFuzzer: numbers in the tensor header (shapes, offsets, the
// config's dimensions, training-state counts) replaced by extreme values,
// dtypes and names changed, bytes flipped, the header length changed, parts
// cut or repeated. Every mutation must be read or refused with nmt::Error;
// under scripts/sanitize.sh, AddressSanitizer and UBSan watch each one.
// scripts/fuzz.sh runs the same target under libFuzzer, unbounded by a
// fixed list of mutations.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <string>
#include <vector>

#include "checkpoint_edit.h"
#include "fuzz/checkpoint_fuzz_target.h"
#include "model/checkpoint.h"
#include "test_util.h"

namespace {

constexpr int kMutations = 3000;  // about 2 s, 20 s under the sanitizers

// A training checkpoint of the tiny model (optimizer and state included).
std::string seed_body() {
  const auto dir = nmt::test::temp_dir("ckpt_fuzz");
  torch::manual_seed(3);
  nmt::Seq2Seq model(nmt::test::tiny_model());
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  for (auto& p : model->parameters()) p.mutable_grad() = torch::ones_like(p);
  adam.step();
  nmt::TrainState st;
  st.step = 1;
  st.learning_rate = 1e-3;
  nmt::save_checkpoint(dir + "/m.ckpt", model, nmt::test::toy_tokenizer(), nmt::test::toy_tokenizer(), &adam, &st);
  return nmt::test::checkpoint_body(dir + "/m.ckpt");
}

// One random mutation of `body`, chosen and placed by `rng`.
std::string mutate(std::string body, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(body[i]);
  std::string json = nmt::test::json_header(body);
  static const std::vector<std::string> kNumbers = {
      "0", "1", "-1", "65536", "4294967295", "4294967296", "9223372036854775807", "18446744073709551615",
      "99999999999999999999999", "1e308", "-1e308", "0.5", "NaN", "1099511627776", "3"};
  static const std::vector<std::string> kWords = {"\"F32\"", "\"U8\"",    "\"I8\"",     "\"BF16\"", "\"F64\"",
                                                  "\"I64\"", "null",      "[]",         "{}",       "[[[[1]]]]",
                                                  "true",    "\"model.\"", "\"state.rng\"", "\"\""};
  switch (rng() % 8) {
    case 0:
    case 1: {  // a run of digits (a shape, an offset, a dimension in the config text) replaced
      std::vector<std::pair<size_t, size_t>> runs;
      for (size_t i = 0; i < json.size();) {
        if (json[i] >= '0' && json[i] <= '9') {
          size_t j = i;
          while (j < json.size() && json[j] >= '0' && json[j] <= '9') ++j;
          runs.push_back({i, j - i});
          i = j;
        } else {
          ++i;
        }
      }
      if (runs.empty()) break;
      const auto [at, len] = runs[pick(runs.size())];
      json.replace(at, len, kNumbers[pick(kNumbers.size())]);
      return nmt::test::with_json_header(body, json);
    }
    case 2: {  // a quoted string or a value replaced by another token
      const size_t at = json.find('"', pick(json.size()));
      if (at == std::string::npos) break;
      const size_t end = json.find('"', at + 1);
      if (end == std::string::npos) break;
      json.replace(at, end - at + 1, kWords[pick(kWords.size())]);
      return nmt::test::with_json_header(body, json);
    }
    case 3: {  // a span of the JSON cut out or repeated
      const size_t at = pick(json.size()), len = 1 + pick(64);
      if (rng() % 2) {
        json.erase(at, len);
      } else {
        json.insert(at, json.substr(at, len));
      }
      return nmt::test::with_json_header(body, json);
    }
    case 4:  // bytes flipped anywhere
      for (int k = 0, n = 1 + static_cast<int>(pick(8)); k < n; ++k) body[pick(body.size())] ^= static_cast<char>(1 + pick(255));
      return body;
    case 5:  // cut short
      body.resize(pick(body.size()));
      return body;
    case 6: {  // the header length changed
      const uint64_t lens[] = {0, header_len - 1, header_len + 1, body.size(), uint64_t{1} << 32, ~uint64_t{0},
                               static_cast<uint64_t>(pick(body.size()))};
      const uint64_t v = lens[pick(7)];
      for (int i = 0; i < 8; ++i) body[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
      return body;
    }
    default: {  // bytes appended to the data, or the data cut
      if (rng() % 2) {
        body.append(1 + pick(16), '\0');
      } else if (body.size() > 8 + header_len) {
        body.resize(8 + header_len + pick(body.size() - 8 - header_len));
      }
      return body;
    }
  }
  return body;
}

TEST(CheckpointFuzzTest, MutatedBodiesAreReadOrRefusedWithAnError) {
  const std::string seed = seed_body();
  ASSERT_TRUE(nmt::fuzz::fuzz_checkpoint_body(reinterpret_cast<const uint8_t*>(seed.data()), seed.size()))
      << "the seed itself must read";
  std::mt19937_64 rng(20261126);
  int accepted = 0, refused = 0;
  for (int i = 0; i < kMutations; ++i) {
    const std::string m = mutate(seed, rng);
    (nmt::fuzz::fuzz_checkpoint_body(reinterpret_cast<const uint8_t*>(m.data()), m.size()) ? accepted : refused)++;
  }
  // Most mutations are refused; some (a digit in the meta text, say) are harmless.
  EXPECT_GT(refused, kMutations / 2) << accepted << " accepted";
  RecordProperty("accepted", accepted);
  RecordProperty("refused", refused);
}

}  // namespace
