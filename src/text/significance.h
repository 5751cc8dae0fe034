// Bootstrap resampling of a test set (Koehn 2004), as sacreBLEU's
// --confidence and --paired-bs run it: the corpus is drawn again with
// replacement, `samples` times, and each draw scored from the segments'
// statistics (metrics.h, SegmentStatistics). One set of draws serves every
// system and metric of an evaluation, so the systems' resamples are paired.
// The draws come from nmt's own generator (a 64-bit Mersenne twister and
// unbiased bounded integers), the same on every platform; they are not
// numpy's, so means, intervals and p-values agree with sacreBLEU's to
// within resampling noise, not digit for digit.
#pragma once
#include <cstdint>
#include <vector>

#include "text/metrics.h"

namespace nmt {

// How many resampled corpora, and the generator's seed.
struct BootstrapOptions {
  int64_t samples = 1000;  // sacreBLEU's default for both tests
  uint64_t seed = 12345;   // sacreBLEU's SACREBLEU_SEED default
};

// `opt.samples` corpora of `n` segment indices each, drawn uniformly with
// replacement from `opt.seed`: the same for the same (n, opt) everywhere.
// Throws nmt::Error when opt.samples is below 1.
std::vector<std::vector<uint32_t>> bootstrap_draws(size_t n, const BootstrapOptions& opt);

// The bootstrap estimate of one system's score (sacreBLEU's estimate_ci):
// the mean of the resampled scores, and half the width of the interval from
// the (n/40)-th lowest to the (n/40)-th highest (95%).
struct BootstrapEstimate {
  double mean = 0;
  double ci = 0;
};

// The score of each drawn corpus of `stats`. Throws nmt::Error when a draw
// names a segment `stats` lacks.
std::vector<double> resampled_scores(const SegmentStatistics& stats, const std::vector<std::vector<uint32_t>>& draws);

// sacreBLEU's estimate_ci of `scores` (at least one). Throws nmt::Error when empty.
BootstrapEstimate estimate_of(std::vector<double> scores);

// Paired bootstrap resampling of a system against a baseline, on the same
// draws (sacreBLEU's _paired_bs_test): the estimates of both, and the
// p-value of the null hypothesis that they score alike: with d the absolute
// difference of the two corpus scores and d_k that of draw k, the share of
// draws with d_k - mean(d_k) >= d, as (count + 1) / (draws + 1) (capped at
// 1). sacreBLEU counts > only, which gives a system against itself
// p = 1 / (draws + 1); here it gets 1.
struct PairedBootstrap {
  double system = 0, baseline = 0;  // the corpus scores
  BootstrapEstimate system_estimate, baseline_estimate;
  double p_value = 1;
};

// Throws nmt::Error when the two have different numbers of segments or a
// draw names a segment they lack.
PairedBootstrap paired_bootstrap(const SegmentStatistics& system, const SegmentStatistics& baseline,
                                 const std::vector<std::vector<uint32_t>>& draws);

// The corpus score of all of `stats`' rows: stats.score(their sum).
double corpus_score(const SegmentStatistics& stats);

}  // namespace nmt
