// Bootstrap resampling (significance.h): the draws, the resampled scores,
// sacreBLEU's confidence estimate and its paired test.
#include "text/significance.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"

namespace nmt {

namespace detail {
uint32_t uniform_below(std::mt19937_64& gen, uint32_t n) {
  uint64_t m = static_cast<uint64_t>(static_cast<uint32_t>(gen())) * n;
  uint32_t low = static_cast<uint32_t>(m);
  if (low < n) {
    const uint32_t threshold = static_cast<uint32_t>(-n) % n;  // 2^32 mod n: the products to reject
    while (low < threshold) {
      m = static_cast<uint64_t>(static_cast<uint32_t>(gen())) * n;
      low = static_cast<uint32_t>(m);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}
}  // namespace detail

namespace {

// The sum of `stats`' rows named by `draw` (all rows when null). Throws
// nmt::Error when the draw names a row `stats` lacks.
std::vector<int64_t> summed(const SegmentStatistics& stats, const std::vector<uint32_t>* draw) {
  std::vector<int64_t> sum(stats.width, 0);
  const auto add = [&](size_t i) {
    if (i >= stats.rows.size())
      throw Error("bootstrap: draw names segment " + std::to_string(i) + " of " + std::to_string(stats.rows.size()));
    for (size_t k = 0; k < stats.width; ++k) sum[k] += stats.rows[i][k];
  };
  if (draw == nullptr)
    for (size_t i = 0; i < stats.rows.size(); ++i) add(i);
  else
    for (uint32_t i : *draw) add(i);
  return sum;
}

double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

}  // namespace

void for_each_draw(size_t n, const BootstrapOptions& opt, const std::function<void(const std::vector<uint32_t>&)>& fn) {
  if (opt.samples < 1) throw Error("bootstrap: samples must be at least 1, got " + std::to_string(opt.samples));
  if (n > UINT32_MAX) throw Error("bootstrap: more than 2^32 - 1 segments");
  std::mt19937_64 gen(opt.seed);
  std::vector<uint32_t> draw(n);
  for (int64_t k = 0; k < opt.samples; ++k) {
    for (auto& i : draw) i = detail::uniform_below(gen, static_cast<uint32_t>(n));
    fn(draw);
  }
}

std::vector<std::vector<uint32_t>> bootstrap_draws(size_t n, const BootstrapOptions& opt) {
  std::vector<std::vector<uint32_t>> draws;
  for_each_draw(n, opt, [&](const std::vector<uint32_t>& draw) { draws.push_back(draw); });
  return draws;
}

double corpus_score(const SegmentStatistics& stats) { return stats.score(summed(stats, nullptr)); }

std::vector<double> resampled_scores(const SegmentStatistics& stats, const BootstrapOptions& opt) {
  std::vector<double> scores;
  for_each_draw(stats.rows.size(), opt,
                [&](const std::vector<uint32_t>& draw) { scores.push_back(stats.score(summed(stats, &draw))); });
  return scores;
}

BootstrapEstimate estimate_of(std::vector<double> scores) {
  if (scores.empty()) throw Error("bootstrap: no resampled scores");
  std::sort(scores.begin(), scores.end());
  const size_t n = scores.size(), lower = n / 40, upper = n - lower - 1;
  return BootstrapEstimate{mean_of(scores), 0.5 * (scores[upper] - scores[lower])};
}

PairedBootstrap paired_bootstrap(const SegmentStatistics& system, const SegmentStatistics& baseline,
                                 const BootstrapOptions& opt) {
  if (system.rows.size() != baseline.rows.size())
    throw Error("paired bootstrap: the system has " + std::to_string(system.rows.size()) +
                " segments and the baseline " + std::to_string(baseline.rows.size()));
  PairedBootstrap r;
  r.system = corpus_score(system);
  r.baseline = corpus_score(baseline);
  std::vector<double> sys, base, diffs;
  for_each_draw(system.rows.size(), opt, [&](const std::vector<uint32_t>& draw) {
    sys.push_back(system.score(summed(system, &draw)));
    base.push_back(baseline.score(summed(baseline, &draw)));
    diffs.push_back(std::abs(sys.back() - base.back()));
  });
  r.system_estimate = estimate_of(sys);
  r.baseline_estimate = estimate_of(base);
  const double mean = mean_of(diffs), observed = std::abs(r.baseline - r.system);
  // Ties count (>=, where sacreBLEU counts > only): a system against itself
  // then gets p = 1, not the 1 / (draws + 1) of a strict count.
  const auto beyond = std::count_if(diffs.begin(), diffs.end(), [&](double d) { return d - mean >= observed; });
  r.p_value = static_cast<double>(beyond + 1) / static_cast<double>(diffs.size() + 1);
  return r;
}

}  // namespace nmt
