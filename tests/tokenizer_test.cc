// The SentencePiece front end: training, reserved ids, encode/decode,
// serialization.
#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "test_util.h"

namespace {

using nmt::Tokenizer;
using nmt::test::toy_tokenizer;

const std::vector<std::string> kSentences = {
    "red cat sees big dog", "dogo bigo seeso cato redo", "the old fish eats a new bird",
    "house", "green tree runs", "small small small bird"};

using nmt::test::error_of;

TEST(TokenizerTest, ReservedIds) {
  const auto& tok = toy_tokenizer();
  EXPECT_EQ(nmt::kPadId, 0);
  EXPECT_EQ(nmt::kUnkId, 1);
  EXPECT_EQ(nmt::kBosId, 2);
  EXPECT_EQ(nmt::kEosId, 3);
  EXPECT_EQ(tok.piece(nmt::kPadId), "<pad>");
  EXPECT_EQ(tok.piece(nmt::kUnkId), "<unk>");
  EXPECT_EQ(tok.piece(nmt::kBosId), "<s>");
  EXPECT_EQ(tok.piece(nmt::kEosId), "</s>");
  EXPECT_GT(tok.vocab_size(), 10);
  EXPECT_LE(tok.vocab_size(), 60);  // the requested size is a soft upper limit
  EXPECT_EQ(tok.piece(-1), "<unk>");
  EXPECT_EQ(tok.piece(tok.vocab_size()), "<unk>");
}

TEST(TokenizerTest, EncodeDecodeRoundTrip) {
  const auto& tok = toy_tokenizer();
  for (const auto& s : kSentences) {
    const auto ids = tok.encode(s);
    ASSERT_FALSE(ids.empty()) << s;
    for (int64_t id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, tok.vocab_size());
      EXPECT_NE(id, nmt::kPadId);
      EXPECT_NE(id, nmt::kBosId);
      EXPECT_NE(id, nmt::kEosId);  // encode adds no BOS/EOS
    }
    EXPECT_EQ(tok.decode(ids), s);
  }
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.decode({}), "");
}

TEST(TokenizerTest, PiecesMatchIds) {
  const auto& tok = toy_tokenizer();
  for (const auto& s : kSentences) {
    const auto ids = tok.encode(s);
    const auto pieces = tok.pieces(s);
    ASSERT_EQ(pieces.size(), ids.size()) << s;
    std::string joined;
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(pieces[i], tok.piece(ids[i])) << s << " piece " << i;
      joined += pieces[i];
    }
    // SentencePiece marks word starts with U+2581.
    EXPECT_EQ(joined.rfind("\xE2\x96\x81", 0), 0u) << joined;
  }
}

TEST(TokenizerTest, UnknownCharactersMapToUnk) {
  const auto& tok = toy_tokenizer();
  const auto ids = tok.encode("cat \xE2\x82\xAC");  // '€' never appears in the toy corpus
  EXPECT_NE(std::find(ids.begin(), ids.end(), nmt::kUnkId), ids.end());
}

TEST(TokenizerTest, FromBytesGivesIdenticalTokenizer) {
  const auto& tok = toy_tokenizer();
  const auto copy = Tokenizer::from_bytes(tok.bytes(), "copy");
  EXPECT_EQ(copy.bytes(), tok.bytes());
  EXPECT_EQ(copy.vocab_size(), tok.vocab_size());
  for (const auto& s : kSentences) {
    EXPECT_EQ(copy.encode(s), tok.encode(s)) << s;
    EXPECT_EQ(copy.pieces(s), tok.pieces(s)) << s;
  }
  for (int64_t id = 0; id < tok.vocab_size(); ++id) EXPECT_EQ(copy.piece(id), tok.piece(id));
}

TEST(TokenizerTest, LoadFromFile) {
  const auto dir = nmt::test::temp_dir("tok_load");
  const auto path = dir + "/x.model";
  nmt::test::write_bytes(path, toy_tokenizer().bytes());
  const auto loaded = Tokenizer::load(path);
  EXPECT_EQ(loaded.bytes(), toy_tokenizer().bytes());
  for (const auto& s : kSentences) EXPECT_EQ(loaded.encode(s), toy_tokenizer().encode(s));
}

TEST(TokenizerTest, FromBytesOfGarbageThrows) {
  std::mt19937 rng(3);
  std::string garbage;
  for (int i = 0; i < 2000; ++i) garbage.push_back(static_cast<char>(rng()));
  auto msg = error_of([&] { Tokenizer::from_bytes(garbage, "garbage-origin"); });
  EXPECT_NE(msg.find("garbage-origin"), std::string::npos) << msg;
  msg = error_of([&] { Tokenizer::from_bytes("this is not a sentencepiece model", "text-origin"); });
  EXPECT_NE(msg.find("text-origin"), std::string::npos) << msg;
  msg = error_of([&] { Tokenizer::from_bytes("", "empty-origin"); });
  EXPECT_NE(msg.find("empty-origin"), std::string::npos) << msg;
  // A truncated model is not a model either.
  const auto& b = toy_tokenizer().bytes();
  msg = error_of([&] { Tokenizer::from_bytes(b.substr(0, b.size() / 2), "half-origin"); });
  EXPECT_NE(msg.find("half-origin"), std::string::npos) << msg;
}

TEST(TokenizerTest, LoadMissingFileNamesPath) {
  const auto path = nmt::test::temp_dir("tok_missing") + "/nope.model";
  auto msg = error_of([&] { Tokenizer::load(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

TEST(TokenizerTest, DecodeStopsAtEosAndSkipsPadAndBos) {
  const auto& tok = toy_tokenizer();
  const auto a = tok.encode("red cat");
  const auto b = tok.encode("big dog");
  std::vector<int64_t> ids = {nmt::kBosId};
  ids.insert(ids.end(), a.begin(), a.end());
  ids.push_back(nmt::kPadId);
  ids.push_back(nmt::kEosId);
  ids.insert(ids.end(), b.begin(), b.end());
  EXPECT_EQ(tok.decode(ids), "red cat");

  std::vector<int64_t> padded = a;
  padded.insert(padded.begin() + 1, nmt::kPadId);
  padded.push_back(nmt::kPadId);
  EXPECT_EQ(tok.decode(padded), "red cat");
  EXPECT_EQ(tok.decode({nmt::kEosId, a[0]}), "");
  // Out-of-range ids are skipped, not a crash.
  std::vector<int64_t> bad = a;
  bad.push_back(tok.vocab_size() + 5);
  bad.push_back(-7);
  EXPECT_EQ(tok.decode(bad), "red cat");
}

TEST(TokenizerTest, BpeTrains) {
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(200, 5, &s, &t);
  nmt::TokenizerOptions opt;
  opt.model_type = "bpe";
  opt.vocab_size = 50;
  const auto tok = Tokenizer::train(s, opt);
  EXPECT_EQ(tok.piece(nmt::kEosId), "</s>");
  EXPECT_GT(tok.vocab_size(), 10);
  for (const auto& x : {"red cat sees big dog", "old fish"}) EXPECT_EQ(tok.decode(tok.encode(x)), x);
  // A different model from the unigram one.
  EXPECT_NE(tok.bytes(), toy_tokenizer().bytes());
}

// The model type SentencePiece records in the model (what --resume checks
// --spm-type against).
TEST(TokenizerTest, ModelTypeIsReadFromTheModel) {
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(200, 5, &s, &t);
  nmt::TokenizerOptions opt;
  opt.model_type = "bpe";
  opt.vocab_size = 50;
  EXPECT_EQ(Tokenizer::train(s, opt).model_type(), "bpe");
  EXPECT_EQ(toy_tokenizer().model_type(), "unigram");
}

TEST(TokenizerTest, UnknownModelTypeThrows) {
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(50, 5, &s, &t);
  nmt::TokenizerOptions opt;
  opt.model_type = "wordpiece";
  auto msg = error_of([&] { Tokenizer::train(s, opt); });
  EXPECT_NE(msg.find("wordpiece"), std::string::npos) << msg;
}

TEST(TokenizerTest, EmptyCorpusThrows) {
  error_of([] { Tokenizer::train({}, nmt::TokenizerOptions{}); });
}

TEST(TokenizerTest, SampledSegmentationsAreSeededAndSpellTheText) {
  const auto& tok = toy_tokenizer();
  const std::string text = "dogo bigo seeso cato redo";
  std::set<std::vector<int64_t>> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const auto ids = tok.sample(text, 64, 0.1, seed);
    EXPECT_EQ(tok.sample(text, 64, 0.1, seed), ids) << "seed " << seed;  // the same seed, the same draw
    EXPECT_EQ(tok.decode(ids), text);
    seen.insert(ids);
  }
  EXPECT_GT(seen.size(), 5u);                    // a low alpha spreads the draws
  EXPECT_TRUE(seen.count(tok.encode(text)));     // the best segmentation is among them
  // A high alpha almost always picks the most probable segmentation.
  int best = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) best += tok.sample(text, 64, 50.0, seed) == tok.encode(text);
  EXPECT_GE(best, 48);
  // n-best of 2: only two segmentations can come out.
  std::set<std::vector<int64_t>> two;
  for (uint64_t seed = 0; seed < 100; ++seed) two.insert(tok.sample(text, 2, 0.0, seed));
  EXPECT_EQ(two.size(), 2u);
}

TEST(TokenizerTest, SamplingABpeModelIsRefused) {
  std::vector<std::string> s, t;
  nmt::test::toy_corpus(300, 3, &s, &t);
  nmt::TokenizerOptions opt;
  opt.model_type = "bpe";
  opt.vocab_size = 60;
  const auto bpe = Tokenizer::train(s, opt);
  EXPECT_THROW(bpe.sample(s[0], 64, 0.1, 1), nmt::Error);
}

}  // namespace
