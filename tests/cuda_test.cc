// CUDA against CPU on tiny models: the same weights give the same logits,
// attention and gradients within float tolerance, the same greedy and beam
// hypotheses, graphed searches equal to eager ones (on two threads at once too),
// and a checkpoint written from one device loads on the other.
// Every test skips itself where CUDA is not available (the CPU build and CI).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "model/batch.h"
#include "model/checkpoint.h"
#include "engine/rnn_engine.h"
#include "model/model.h"
#include "search/scorer.h"
#include "search/search.h"
#include "search/step_graph.h"
#include "train/losses.h"
#include "search_util.h"
#include "test_util.h"

namespace nmt {
// Readable parameter names in test output.
void PrintTo(DecoderType t, std::ostream* os) { *os << to_string(t); }
}  // namespace nmt

namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "CUDA is not available"

const std::vector<std::pair<std::string, std::string>> kPairs = {
    {"red cat", "cato redo"},
    {"big dog sees small bird", "birdo smallo seeso dogo bigo"},
    {"old fish eats new tree house green blue", "blueo greeno houseo treeo newo eatso fisho oldo"},
    {"blue", "blueo"},
};

nmt::Batch batch_of(bool with_target) {
  return nmt::make_batch(nmt::test::toy_examples(kPairs), {0, 1, 2, 3}, with_target);
}

// Largest absolute difference between `a` (any device) and `b`, on the CPU.
double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu() - b.cpu()).abs().max().item<double>();
}

// A copy of `cpu` on CUDA (the same weights).
nmt::Seq2Seq cuda_copy(const nmt::Seq2Seq& cpu) {
  nmt::Seq2Seq m(cpu->options());
  {
    torch::NoGradGuard ng;
    auto src = cpu->named_parameters();
    for (auto& p : m->named_parameters()) p.value().copy_(src[p.key()]);
  }
  m->to(torch::kCUDA);
  return m;
}

class CudaTest : public ::testing::TestWithParam<nmt::DecoderType> {};

TEST_P(CudaTest, LogitsAttentionAndGradientsMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  auto opt = nmt::test::tiny_model();
  opt.decoder = GetParam();
  opt.dropout = 0;  // dropout masks differ between devices' generators
  torch::manual_seed(1);
  nmt::Seq2Seq cpu(opt);
  auto gpu = cuda_copy(cpu);
  const auto b = batch_of(true);
  const auto bg = b.to(torch::kCUDA);
  torch::Tensor a_cpu, a_gpu;
  const auto l_cpu = cpu->forward(b.src, b.src_len, b.tgt_in, &a_cpu);
  const auto l_gpu = gpu->forward(bg.src, bg.src_len, bg.tgt_in, &a_gpu);
  EXPECT_TRUE(l_gpu.is_cuda());
  EXPECT_LE(max_diff(l_gpu, l_cpu), 1e-3 * (1 + l_cpu.abs().max().item<double>())) << "logits";
  EXPECT_LE(max_diff(a_gpu, a_cpu), 1e-4) << "attention";
  nmt::sequence_loss(l_cpu, b.tgt_out, 0.1).backward();
  nmt::sequence_loss(l_gpu, bg.tgt_out, 0.1).backward();
  auto g_cpu = cpu->named_parameters();
  for (const auto& p : gpu->named_parameters()) {
    const auto& gc = g_cpu[p.key()].grad();
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    const double scale = gc.abs().max().item<double>();
    EXPECT_LE(max_diff(p.value().grad(), gc), 1e-3 * scale + 1e-5) << "gradient of " << p.key();
  }
}

INSTANTIATE_TEST_SUITE_P(Decoders, CudaTest, ::testing::Values(nmt::DecoderType::kBahdanau, nmt::DecoderType::kCgru),
                         [](const auto& i) { return std::string(nmt::to_string(i.param)); });

// A batch (on the CPU) of `n` toy-corpus sources, encoded with `tok`.
nmt::Batch toy_source_batch(const nmt::Tokenizer& tok, int n, uint64_t seed) {
  std::vector<std::string> src, tgt;
  nmt::test::toy_corpus(n, seed, &src, &tgt);
  std::vector<nmt::Example> ex;
  for (const auto& s : src) {
    nmt::Example e;
    e.src = tok.encode(s);
    e.src.push_back(nmt::kEosId);
    ex.push_back(e);
  }
  std::vector<int64_t> idx(ex.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  return nmt::make_batch(ex, idx, false);
}

TEST(CudaSearchTest, GreedyAndBeamHypothesesMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  const auto& path = nmt::test::trained_toy_checkpoint();
  auto cpu = nmt::load_checkpoint(path, torch::kCPU);
  auto gpu = nmt::load_checkpoint(path, torch::kCUDA);
  const auto batch = toy_source_batch(cpu.src_tok, 16, 99);
  for (int beam : {1, 5}) {
    nmt::SearchOptions so;
    so.beam_size = beam;
    auto search = nmt::make_search(so);
    c10::InferenceMode guard;
    nmt::InferenceScope scope({cpu.model, gpu.model});
    const auto hc = nmt::test::run_search(*search, cpu.model, batch, false);
    const auto hg = nmt::test::run_search(*search, gpu.model, batch.to(torch::kCUDA), false);
    ASSERT_EQ(hc.size(), hg.size());
    for (size_t i = 0; i < hc.size(); ++i) {
      EXPECT_EQ(hc[i][0].ids, hg[i][0].ids) << "sentence " << i << ", beam " << beam;
      EXPECT_NEAR(hc[i][0].score, hg[i][0].score, 1e-3) << "sentence " << i << ", beam " << beam;
    }
  }
}

// Greedy and beam search on CUDA as make_search() gives them there (steps
// replayed as CUDA graphs where the build has them) against the same
// searches run eagerly. One graphed search with one scorer (as a Translator
// keeps them) decodes batches A, B and A again, where B has A's shape but
// other sentences: B and the second A replay the graph captured for A, from
// the state each refilled it with. The count of captures tells replay from
// a capture per batch and from the eager fallback: exactly one each time.
TEST(CudaSearchTest, GraphedSearchEqualsEagerSearch) {
  SKIP_WITHOUT_CUDA();
  if (!nmt::cuda_graphs_built()) GTEST_SKIP() << "this build has no CUDA graphs (LibTorch 2.x with CUDA)";
  const auto& path = nmt::test::trained_toy_checkpoint();
  auto gpu = nmt::load_checkpoint(path, torch::kCUDA);
  auto a = toy_source_batch(gpu.src_tok, 40, 7), b = toy_source_batch(gpu.src_tok, 40, 8);
  const int64_t S = std::max(a.src.size(1), b.src.size(1));
  const std::vector<nmt::Batch> batches = {nmt::pad_batch(a, 40, S, 0).to(torch::kCUDA),
                                           nmt::pad_batch(b, 40, S, 0).to(torch::kCUDA)};
  c10::InferenceMode guard;
  nmt::InferenceScope scope({gpu.model});
  for (int beam : {1, 5}) {
    nmt::SearchOptions opt;
    opt.beam_size = beam;  // the best hypothesis only: lower ranks can be near ties that other batch sizes reorder
    nmt::SearchOptions eager_opt = opt;
    eager_opt.no_cuda_graphs = true;
    for (bool with_attention : {false, true}) {
      auto graphed = nmt::make_search(opt, torch::kCUDA);
      auto scorer = nmt::test::scorer_of({gpu.model});
      const int64_t captures_before = nmt::StepGraph::captures();
      for (int k : {0, 1, 0}) {
        const auto& batch = batches[k];
        const auto want =
            nmt::test::run_search(*nmt::make_search(eager_opt, torch::kCUDA), gpu.model, batch, with_attention);
        const auto got = graphed->run(scorer, batch, with_attention);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(got[i].size(), want[i].size());
          for (size_t r = 0; r < want[i].size(); ++r) {
            const auto where = "batch " + std::to_string(k) + ", sentence " + std::to_string(i) + ", beam " +
                               std::to_string(beam) + ", rank " + std::to_string(r);
            EXPECT_EQ(got[i][r].ids, want[i][r].ids) << where;
            EXPECT_NEAR(got[i][r].score, want[i][r].score, 1e-3) << where;
            if (with_attention) {
              ASSERT_EQ(got[i][r].attention.sizes(), want[i][r].attention.sizes());
              EXPECT_TRUE(torch::allclose(got[i][r].attention, want[i][r].attention, 0, 1e-4)) << where;
            }
          }
        }
      }
      EXPECT_EQ(nmt::StepGraph::captures() - captures_before, 1)
          << "beam " << beam << ", attention " << with_attention
          << ": the three batches of one shape should share one captured graph";
    }
  }
}

// One graphed search used with two scorers of the same engines under other
// ensemble weights (as two translators of one ensemble would use it): each
// decodes as eager search with its own weights, so a graph captured under
// one weighting is not replayed under the other: two captures.
TEST(CudaSearchTest, GraphedSearchCapturesAGraphPerEnsembleWeighting) {
  SKIP_WITHOUT_CUDA();
  if (!nmt::cuda_graphs_built()) GTEST_SKIP() << "this build has no CUDA graphs (LibTorch 2.x with CUDA)";
  auto gpu = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCUDA);
  torch::manual_seed(42);
  nmt::Seq2Seq other(gpu.options);  // the same shape and vocabulary, other (random) weights
  other->to(torch::kCUDA);
  const auto batch = toy_source_batch(gpu.src_tok, 40, 7).to(torch::kCUDA);
  c10::InferenceMode guard;
  nmt::InferenceScope scope({gpu.model, other});
  const auto engines = nmt::make_engines({gpu.model, other});
  nmt::SearchOptions opt;
  opt.beam_size = 5;
  nmt::SearchOptions eager_opt = opt;
  eager_opt.no_cuda_graphs = true;
  auto graphed = nmt::make_search(opt, torch::kCUDA);
  const int64_t captures_before = nmt::StepGraph::captures();
  std::vector<std::vector<std::vector<nmt::Hypothesis>>> wants;
  for (const auto& weights : {std::vector<double>{3, 1}, std::vector<double>{1, 3}}) {
    nmt::Scorer scorer(engines, weights), eager(engines, weights);
    wants.push_back(nmt::make_search(eager_opt, torch::kCUDA)->run(eager, batch, false));
    const auto got = graphed->run(scorer, batch, false);
    ASSERT_EQ(got.size(), wants.back().size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i][0].ids, wants.back()[i][0].ids) << "weights " << weights[0] << ", sentence " << i;
      EXPECT_NEAR(got[i][0].score, wants.back()[i][0].score, 1e-3) << "weights " << weights[0] << ", sentence " << i;
    }
  }
  int differ = 0;  // the two weightings must decode differently for the test to tell them apart
  for (size_t i = 0; i < wants[0].size(); ++i) differ += wants[0][i][0].ids != wants[1][i][0].ids;
  EXPECT_GT(differ, 0);
  EXPECT_EQ(nmt::StepGraph::captures() - captures_before, 2);
}

// Two threads at once, each with a model, a graphed search and a scorer of
// its own (as nmt-serve's batchers, one per model), decode batches A, B and A
// again, round after round: every output equals the eager search's, and each
// thread's search captures exactly one graph. A capture broken by the other
// thread's work (a synchronisation, an allocation, a capture of its own)
// falls back to eager steps: the outputs stay right but the count falls short.
TEST(CudaSearchTest, GraphedSearchesOnTwoThreadsAtOnceEachEqualEagerSearch) {
  SKIP_WITHOUT_CUDA();
  if (!nmt::cuda_graphs_built()) GTEST_SKIP() << "this build has no CUDA graphs (LibTorch 2.x with CUDA)";
  const auto& path = nmt::test::trained_toy_checkpoint();
  std::vector<nmt::LoadedModel> models;
  for (int t = 0; t < 2; ++t) models.push_back(nmt::load_checkpoint(path, torch::kCUDA));
  auto a = toy_source_batch(models[0].src_tok, 40, 7), b = toy_source_batch(models[0].src_tok, 40, 8);
  const int64_t S = std::max(a.src.size(1), b.src.size(1));
  const std::vector<nmt::Batch> batches = {nmt::pad_batch(a, 40, S, 0).to(torch::kCUDA),
                                           nmt::pad_batch(b, 40, S, 0).to(torch::kCUDA)};
  for (int beam : {1, 5}) {
    nmt::SearchOptions opt;
    opt.beam_size = beam;
    nmt::SearchOptions eager_opt = opt;
    eager_opt.no_cuda_graphs = true;
    std::vector<std::vector<std::vector<nmt::Hypothesis>>> want;  // [batch][sentence][rank]
    {
      nmt::InferenceScope scope({models[0].model});
      for (const auto& batch : batches)
        want.push_back(nmt::test::run_search(*nmt::make_search(eager_opt, torch::kCUDA), models[0].model, batch, false));
    }
    const int64_t captures_before = nmt::StepGraph::captures();
    std::atomic<int> mismatches{0}, failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&, t] {
        try {
          nmt::InferenceScope scope({models[t].model});  // InferenceMode is per thread
          auto graphed = nmt::make_search(opt, torch::kCUDA);
          auto scorer = nmt::test::scorer_of({models[t].model});
          for (int round = 0; round < 4; ++round)
            for (int k : {0, 1, 0}) {
              const auto got = graphed->run(scorer, batches[k], false);
              bool same = got.size() == want[k].size();
              for (size_t i = 0; same && i < got.size(); ++i)
                same = !got[i].empty() && got[i][0].ids == want[k][i][0].ids &&
                       std::abs(got[i][0].score - want[k][i][0].score) <= 1e-3;
              if (!same) ++mismatches;
            }
        } catch (const std::exception& e) {
          ++failures;
          ADD_FAILURE() << "thread " << t << ", beam " << beam << ": " << e.what();
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0) << "beam " << beam;
    EXPECT_EQ(mismatches.load(), 0) << "beam " << beam << ": batches whose best hypotheses differ from eager search's";
    EXPECT_EQ(nmt::StepGraph::captures() - captures_before, 2)
        << "beam " << beam << ": each thread's search should capture one graph and replay it";
  }
}

TEST(CudaCheckpointTest, ACheckpointWrittenFromCudaLoadsOnTheCpuAndBack) {
  SKIP_WITHOUT_CUDA();
  const auto dir = nmt::test::temp_dir("cuda_ckpt");
  auto gpu = nmt::load_checkpoint(nmt::test::trained_toy_checkpoint(), torch::kCUDA);
  const auto path = dir + "/from-cuda.ckpt";
  nmt::save_checkpoint(path, gpu.model, gpu.src_tok, gpu.tgt_tok);
  auto cpu = nmt::load_checkpoint(path, torch::kCPU);
  auto back = nmt::load_checkpoint(path, torch::kCUDA);
  auto pc = cpu.model->named_parameters(), pb = back.model->named_parameters();
  for (const auto& p : gpu.model->named_parameters()) {
    EXPECT_TRUE(pc[p.key()].device().is_cpu()) << p.key();
    EXPECT_TRUE(pb[p.key()].is_cuda()) << p.key();
    EXPECT_TRUE(torch::equal(pc[p.key()], p.value().cpu())) << p.key();
    EXPECT_TRUE(torch::equal(pb[p.key()].cpu(), p.value().cpu())) << p.key();
  }
}

}  // namespace
