// Search over a trained model or an ensemble (through a Scorer, scorer.h):
// one interface, two implementations (greedy, and beam search), each working
// on a whole batch at once: one decoder call per output position for all
// sentences (and all hypotheses), never a loop of model calls per sentence.
#pragma once
#include <limits>
#include <memory>
#include <vector>

#include "base/options.h"
#include "engine/engine.h"
#include "search/scorer.h"

namespace nmt {

struct Hypothesis {
  std::vector<int64_t> ids;      // target ids without BOS/EOS
  double score = 0;              // sum of token log-probabilities, EOS included
  double norm_score = 0;         // score / ((5 + n) / 6)^alpha, n = len(ids) + 1: what beam search ranks by
  torch::Tensor attention;       // [len(ids) + 1, S_real] float on CPU, when requested
  // Set by rescoring (translate/rescorer.h), NaN otherwise: the
  // forced-decoding log-probabilities of the hypothesis' text by the
  // left-to-right models; of its words reversed by the right-to-left ones
  // (NaN without them); and of the source given the text by the channel
  // models, log P(source | text) (NaN without them).
  double l2r_logprob = std::numeric_limits<double>::quiet_NaN();
  double r2l_logprob = std::numeric_limits<double>::quiet_NaN();
  double channel_logprob = std::numeric_limits<double>::quiet_NaN();
  // Set by minimum Bayes-risk selection (translate/mbr.h), NaN otherwise:
  // the expected utility the list is ordered by.
  double mbr_utility = std::numeric_limits<double>::quiet_NaN();
};

class Search {
 public:
  virtual ~Search() = default;
  // Returns, for each sentence of `batch` (same order), its hypotheses best
  // first. Call under InferenceMode or NoGradGuard.
  virtual std::vector<std::vector<Hypothesis>> run(Scorer& scorer, const Batch& batch, bool with_attention) = 0;
};

// Greedy for beam_size 1 (a fast path without beam bookkeeping), beam search
// otherwise; on `device` CUDA, both over fixed rows with each step replayed as
// a CUDA graph where the build has them (step_graph.h) and
// opt.no_cuda_graphs is off. Throws nmt::Error on bad options (opt.validate()).
std::unique_ptr<Search> make_search(const SearchOptions& opt, const torch::Device& device = torch::kCPU);

// Greedy (beam_size 1) or beam search over fixed rows: finished sentences
// stay in the batch, masked, and each step is one StepGraph run (with
// `capture` on CUDA a replayed CUDA graph, else the step itself) that reads
// nothing on the host. What make_search() uses on CUDA; here for tests on
// any device. Gives the hypotheses of make_search()'s CPU searches (to the
// float rounding of other batch sizes). Throws nmt::Error on bad options.
std::unique_ptr<Search> make_fixed_row_search(const SearchOptions& opt, bool capture);

// Beam search for any beam size, 1 included (the reference the greedy fast
// path is tested against). Throws nmt::Error on bad options.
std::unique_ptr<Search> make_beam_search(const SearchOptions& opt);

}  // namespace nmt
