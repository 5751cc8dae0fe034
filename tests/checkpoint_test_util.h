// What the checkpoint tests (checkpoint_test.cc, checkpoint_state_test.cc)
// share: a toy batch, a tiny model, its logits, weight comparison and a few
// Adam steps.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/batch.h"
#include "model/model.h"
#include "test_util.h"
#include "train/losses.h"

namespace nmt::checkpoint_test {

inline nmt::Batch toy_batch(int n = 6, uint64_t seed = 3) {
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

inline nmt::Seq2Seq tiny(bool tie = false, int64_t alignment_head = 0) {
  torch::manual_seed(5);
  auto opt = nmt::test::tiny_model();
  opt.tie_embeddings = tie;
  opt.alignment_head = alignment_head;
  nmt::Seq2Seq m(opt);
  m->eval();
  return m;
}

inline torch::Tensor logits_of(nmt::Seq2Seq& m, const nmt::Batch& b) {
  torch::NoGradGuard ng;
  return m->forward(b.src, b.src_len, b.tgt_in);
}

inline void expect_same_weights(nmt::Seq2Seq& a, nmt::Seq2Seq& b) {
  auto pa = a->named_parameters();
  auto pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& p : pa) {
    ASSERT_TRUE(pb.contains(p.key())) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  }
}

inline void train_steps(nmt::Seq2Seq& m, torch::optim::Adam& adam, const nmt::Batch& b, int n) {
  m->train();
  for (int i = 0; i < n; ++i) {
    adam.zero_grad();
    auto loss = nmt::sequence_loss(m->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0.1);
    (loss / static_cast<double>(b.tgt_tokens)).backward();
    adam.step();
  }
}

}  // namespace nmt::checkpoint_test
