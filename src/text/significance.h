// Bootstrap resampling of a test set (Koehn 2004), as sacreBLEU's
// --confidence and --paired-bs run it: the corpus is drawn again with
// replacement, `samples` times, and each draw scored from the segments'
// statistics (metrics.h, SegmentStatistics). The draws depend only on the
// number of segments and BootstrapOptions, so every system and metric of an
// evaluation is resampled alike, and the systems' resamples are paired. They
// come from nmt's own generator (a 64-bit Mersenne twister, whose sequence
// the C++ standard fixes, and unbiased bounded integers), the same on every
// platform; they are not numpy's, so means, intervals and p-values agree
// with sacreBLEU's to within resampling noise, not digit for digit. Each
// draw is made when scored, so memory stays that of one draw.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "text/metrics.h"

namespace nmt {

// How many resampled corpora, and the generator's seed.
struct BootstrapOptions {
  int64_t samples = 1000;  // sacreBLEU's default for both tests
  uint64_t seed = 12345;   // sacreBLEU's SACREBLEU_SEED default
};

// Calls fn(draw) for each of opt.samples draws, in order: `n` segment
// indices each, drawn uniformly with replacement from opt.seed, the same for
// the same (n, opt) everywhere (the first k draws of more samples are those
// of k). `draw` is reused between calls. Throws nmt::Error when opt.samples
// is below 1 or n above 2^32 - 1, and what fn throws.
void for_each_draw(size_t n, const BootstrapOptions& opt, const std::function<void(const std::vector<uint32_t>&)>& fn);

// All the draws of for_each_draw at once (opt.samples x n indices). Throws as it.
std::vector<std::vector<uint32_t>> bootstrap_draws(size_t n, const BootstrapOptions& opt);

// The bootstrap estimate of one system's score (sacreBLEU's estimate_ci):
// the mean of the resampled scores, and half the width of the interval
// between the sorted scores at 0-based positions n/40 and n - 1 - n/40 (for
// 1000 scores the 26th lowest and the 26th highest: 95%).
struct BootstrapEstimate {
  double mean = 0;
  double ci = 0;
};

// The score of each drawn corpus of `stats` (for_each_draw over its rows).
// Throws as for_each_draw.
std::vector<double> resampled_scores(const SegmentStatistics& stats, const BootstrapOptions& opt);

// sacreBLEU's estimate_ci of `scores`. Throws nmt::Error when empty.
BootstrapEstimate estimate_of(std::vector<double> scores);

// Paired bootstrap resampling of a system against a baseline, on the same
// draws (sacreBLEU's _paired_bs_test): the estimates of both, and the
// p-value of the null hypothesis that they score alike: with d the absolute
// difference of the two corpus scores and d_k that of draw k, the share of
// draws with d_k - mean(d_k) >= d, as (count + 1) / (draws + 1). sacreBLEU
// counts > only, which gives a system against itself p = 1 / (draws + 1);
// here it gets 1.
struct PairedBootstrap {
  double system = 0, baseline = 0;  // the corpus scores
  BootstrapEstimate system_estimate, baseline_estimate;
  double p_value = 1;
};

// Throws nmt::Error when the two have different numbers of segments, and as
// for_each_draw.
PairedBootstrap paired_bootstrap(const SegmentStatistics& system, const SegmentStatistics& baseline,
                                 const BootstrapOptions& opt);

// The corpus score of all of `stats`' rows: stats.score(their sum). Never
// throws but on allocation (std::bad_function_call for a SegmentStatistics
// without a score).
double corpus_score(const SegmentStatistics& stats);

namespace detail {
// A uniform integer in [0, n), n >= 1, from `gen`, without bias (Lemire's
// multiply and reject), so that the draws do not depend on the standard
// library's distributions, which differ between implementations. Never throws.
uint32_t uniform_below(std::mt19937_64& gen, uint32_t n);
}  // namespace detail

}  // namespace nmt
