// Helpers of the search tests: small models in eval mode, source-only
// examples of the toy corpus, and searches and first steps through a
// model's engine (engine/rnn_engine.h).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "engine/rnn_engine.h"
#include "search/search.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace nmt::test {

// The first `n` indices 0 .. n-1.
inline std::vector<int64_t> iota(int n) {
  std::vector<int64_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// `n` toy-corpus sources (pieces then EOS) drawn with `seed`, without targets.
inline std::vector<Example> source_examples(int n, uint64_t seed) {
  const auto& tok = toy_tokenizer();
  std::vector<std::string> s, t;
  toy_corpus(n, seed, &s, &t);
  std::vector<Example> ex(n);
  for (int i = 0; i < n; ++i) {
    ex[i].src = tok.encode(s[i]);
    ex[i].src.push_back(kEosId);
  }
  return ex;
}

// A tiny model (test_util.h's options, `att` attention) seeded with `seed`, in eval mode.
inline Seq2Seq eval_model(uint64_t seed = 2, AttentionType att = AttentionType::kAdditive) {
  torch::manual_seed(seed);
  Seq2Seq m(tiny_model(att));
  m->eval();
  return m;
}

// A scorer over one engine per model, each built with `opt`.
inline Scorer scorer_of(const std::vector<Seq2Seq>& models, const EngineOptions& opt = {}) {
  return Scorer(make_engines(models, opt));
}

// `search` over `batch` with an engine of `model` built with `opt`.
inline std::vector<std::vector<Hypothesis>> run_search(Search& search, Seq2Seq& model, const Batch& batch,
                                                       bool with_attention, const EngineOptions& opt = {}) {
  auto scorer = scorer_of({model}, opt);
  return search.run(scorer, batch, with_attention);
}

// The logits [B, V'] of the first step after BOS for each sentence of
// `batch`, by `engine`, over the target ids `vocab` (undefined: all).
inline torch::Tensor first_step_logits(Engine& engine, const Batch& batch, const torch::Tensor& vocab = {}) {
  auto state = engine.start(batch, 1, vocab);
  return engine.step(torch::full({batch.size()}, kBosId, torch::kLong), state).logits;
}

}  // namespace nmt::test
