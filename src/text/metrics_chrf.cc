// Corpus chrF matching sacreBLEU 2.x (sacrebleu/metrics/chrf.py,
// helpers.py); see metrics.h. Each function mirrors a piece of sacreBLEU's
// Python source (named in its comment) and keeps the same floating-point
// operation order.
#include <algorithm>
#include <array>
#include <tuple>
#include <unordered_map>

#include "base/error.h"
#include "base/utf8.h"
#include "text/metrics.h"
#include "text/metrics_internal.h"
#include "text/python_text.h"

namespace nmt {
using metrics_detail::bootstrap_fields;
using metrics_detail::check_streams;
using metrics_detail::confidence_text;
using metrics_detail::common_count;
using metrics_detail::format;
using metrics_detail::nrefs_text;
using metrics_detail::score_json;
using metrics_detail::segment_refs;
namespace {

constexpr int kChrfOrder = 6;     // CHRF.CHAR_ORDER

using CharNgramCounts = std::unordered_map<std::u32string, int64_t>;

// helpers.extract_all_char_ngrams(line, 6, include_whitespace).
std::vector<CharNgramCounts> extract_char_ngrams(const std::string& line, bool include_whitespace) {
  std::u32string s;
  if (include_whitespace) {
    s = decode_utf8(line);
  } else {
    for (const auto& w : py_split(decode_utf8(line))) s += w;  // ''.join(line.split())
  }
  std::vector<CharNgramCounts> out(kChrfOrder);
  for (size_t n = 1; n <= static_cast<size_t>(kChrfOrder); ++n) {
    for (size_t i = 0; i + n <= s.size(); ++i) ++out[n - 1][s.substr(i, n)];
  }
  return out;
}

// CHRF._compute_f_score: epsilon smoothing (chrF++.py, Moses, NLTK) or
// sacreBLEU's default effective-order averaging.
double chrf_f_score(const std::array<int64_t, 3 * kChrfOrder>& stats, const ChrfOptions& opt) {
  const double eps = 1e-16;
  const int factor = opt.beta * opt.beta;
  double avg_prec = 0.0, avg_rec = 0.0, smoothed = 0.0;
  int effective_order = 0;
  for (int i = 0; i < kChrfOrder; ++i) {
    const int64_t n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
    const double prec = n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : eps;
    const double rec = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : eps;
    const double denom = factor * prec + rec;
    smoothed += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (opt.eps_smoothing) return 100 * smoothed / kChrfOrder;
  if (effective_order == 0) {
    avg_prec = avg_rec = 0.0;
  } else {
    avg_prec /= effective_order;
    avg_rec /= effective_order;
  }
  if (avg_prec + avg_rec != 0.0) {
    double score = (1 + factor) * avg_prec * avg_rec;
    score /= ((factor * avg_prec) + avg_rec);
    return 100 * score;
  }
  return 0.0;
}

using Stats = std::array<int64_t, 3 * kChrfOrder>;

// CHRF._get_match_statistics of one hypothesis' n-grams against one
// reference's: per order, the hypothesis' n-grams (0 where the reference has
// none of that order), the reference's, and the matches.
Stats match_statistics(const std::vector<CharNgramCounts>& hyp, const std::vector<CharNgramCounts>& ref) {
  Stats seg{};
  for (int n = 0; n < kChrfOrder; ++n) {
    int64_t hyp_count = 0, match_count = 0, ref_count = 0;
    for (const auto& kv : hyp[n]) {
      hyp_count += kv.second;
      auto it = ref[n].find(kv.first);
      if (it != ref[n].end()) match_count += std::min(kv.second, it->second);
    }
    for (const auto& kv : ref[n]) ref_count += kv.second;
    seg[3 * n] = ref[n].empty() ? 0 : hyp_count;
    seg[3 * n + 1] = ref_count;
    seg[3 * n + 2] = match_count;
  }
  return seg;
}

}  // namespace

ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::string>& refs, const ChrfOptions& opt) {
  if (opt.beta < 1) throw Error("corpus_chrf: beta must be at least 1");
  if (hyps.size() != refs.size()) {
    throw Error("corpus_chrf: " + std::to_string(hyps.size()) +
                                " hypotheses but " + std::to_string(refs.size()) +
                                " references; they must be parallel");
  }
  return corpus_chrf_multiref(hyps, std::vector<std::vector<std::string>>{refs}, opt);
}

namespace {

// CHRF._extract_corpus_statistics: per segment, the statistics of the
// reference with the best sentence-level f-score (strictly better than those
// before it); fills *counts with each segment's number of references.
std::vector<Stats> chrf_rows(const std::vector<std::string>& hyps,
                             const std::vector<std::vector<std::string>>& ref_streams, const ChrfOptions& opt,
                             std::vector<size_t>* counts) {
  std::vector<Stats> rows;
  rows.reserve(hyps.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto hyp_ngrams = extract_char_ngrams(hyps[i], opt.whitespace);
    Stats best{};
    double best_f = -1.0;
    for (const std::string* ref : segment_refs(ref_streams, i, counts)) {
      const auto ref_ngrams = extract_char_ngrams(*ref, opt.whitespace);
      const Stats seg = match_statistics(hyp_ngrams, ref_ngrams);
      const double f = chrf_f_score(seg, opt);
      if (f > best_f) best_f = f, best = seg;
    }
    rows.push_back(best);
  }
  return rows;
}

}  // namespace

SegmentStatistics chrf_statistics(const std::vector<std::string>& hyps,
                                  const std::vector<std::vector<std::string>>& ref_streams, const ChrfOptions& opt) {
  if (opt.beta < 1) throw Error("chrf_statistics: beta must be at least 1");
  check_streams(hyps, ref_streams, "chrf_statistics");
  std::vector<size_t> counts;
  SegmentStatistics s;
  for (const Stats& row : chrf_rows(hyps, ref_streams, opt, &counts)) s.rows.emplace_back(row.begin(), row.end());
  s.width = std::tuple_size<Stats>::value;
  s.score = [opt](const std::vector<int64_t>& sum) {
    Stats stats{};
    std::copy(sum.begin(), sum.end(), stats.begin());
    return chrf_f_score(stats, opt);
  };
  return s;
}

ChrfScore corpus_chrf_multiref(const std::vector<std::string>& hyps,
                               const std::vector<std::vector<std::string>>& ref_streams, const ChrfOptions& opt) {
  if (opt.beta < 1) throw Error("corpus_chrf: beta must be at least 1");
  check_streams(hyps, ref_streams, "corpus_chrf");
  Stats stats{};
  std::vector<size_t> counts;
  for (const Stats& best : chrf_rows(hyps, ref_streams, opt, &counts))
    for (size_t k = 0; k < stats.size(); ++k) stats[k] += best[k];
  ChrfScore score;
  score.score = chrf_f_score(stats, opt);
  score.options = opt;
  score.nrefs = common_count(counts, ref_streams.size());
  return score;
}

std::vector<std::vector<double>> pairwise_sentence_chrf(const std::vector<std::string>& segments,
                                                        const ChrfOptions& opt) {
  if (opt.beta < 1) throw Error("pairwise_sentence_chrf: beta must be at least 1");
  std::vector<std::vector<CharNgramCounts>> ngrams;
  for (const auto& segment : segments) ngrams.push_back(extract_char_ngrams(segment, opt.whitespace));
  std::vector<std::vector<double>> out(segments.size(), std::vector<double>(segments.size()));
  for (size_t i = 0; i < segments.size(); ++i)
    for (size_t j = 0; j < segments.size(); ++j) out[i][j] = chrf_f_score(match_statistics(ngrams[i], ngrams[j]), opt);
  return out;
}

std::string ChrfScore::signature() const {
  return "nrefs:" + nrefs_text(nrefs) + bootstrap_fields(confidence) + "|case:mixed|eff:" +
         (options.eps_smoothing ? "no" : "yes") +
         "|nc:6|nw:0|space:" + (options.whitespace ? "yes" : "no") + "|version:" + metrics_version();
}

std::string ChrfScore::to_string() const {
  return "chrF" + std::to_string(options.beta) + format(" = %.2f", score) + confidence_text(confidence);
}

std::string ChrfScore::to_json() const {
  return score_json("chrF" + std::to_string(options.beta), score, signature(), "", confidence);
}

}  // namespace nmt
