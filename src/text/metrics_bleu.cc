// Corpus BLEU matching sacreBLEU 2.x (sacrebleu/metrics/bleu.py,
// helpers.py); see metrics.h. Each function mirrors a piece of sacreBLEU's
// Python source (named in its comment) and keeps the same floating-point
// operation order.
#include <algorithm>
#include <cmath>
#include <cstdio>
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

constexpr int kMaxOrder = 4;      // sacreBLEU MAX_NGRAM_ORDER

using NgramCounts = std::unordered_map<std::string, int64_t>;

// TokenizerChar: every character (code point) joined by a space.
std::string tokenize_char(const std::string& line) {
  std::string out;
  for (char32_t c : decode_utf8(line)) {
    if (!out.empty()) out += ' ';
    out += encode_utf8(std::u32string(1, c));
  }
  return out;
}

// BLEU._preprocess_segment: optional lower(), rstrip(), then the tokenizer.
std::string preprocess_bleu(const std::string& sent, const BleuOptions& opt) {
  std::u32string u = decode_utf8(sent);
  if (opt.lowercase) u = lower_u32(u);
  py_rstrip(u);
  std::string line = encode_utf8(u);
  if (opt.tokenize == "13a") return tokenize_13a(line);
  if (opt.tokenize == "intl") return tokenize_intl(line);
  if (opt.tokenize == "char") return tokenize_char(line);
  return line;
}

// helpers.extract_all_word_ngrams(line, 1, 4): counts of all 1..4-grams
// (tokens joined by ' ', which cannot occur inside a token); returns the length.
int64_t extract_word_ngrams(const std::string& line, NgramCounts& counts) {
  const std::vector<std::string> tokens = py_split(line);
  const size_t len = tokens.size();
  for (size_t n = 1; n <= static_cast<size_t>(kMaxOrder); ++n) {
    for (size_t i = 0; i + n <= len; ++i) {
      std::string key = tokens[i];
      for (size_t k = 1; k < n; ++k) {
        key.push_back(' ');
        key += tokens[i + k];
      }
      ++counts[key];
    }
  }
  return static_cast<int64_t>(len);
}

int ngram_order(const std::string& key) {
  return 1 + static_cast<int>(std::count(key.begin(), key.end(), ' '));
}

// BLEU._compute_segment_statistics' counts: adds each order's hypothesis
// n-grams to *total and those the references hold (clipped to their count)
// to *correct.
void add_matches(const NgramCounts& hyp, const NgramCounts& ref, std::array<int64_t, 4>* correct,
                 std::array<int64_t, 4>* total) {
  for (const auto& kv : hyp) {
    const int n = ngram_order(kv.first) - 1;
    (*total)[n] += kv.second;
    auto it = ref.find(kv.first);
    if (it != ref.end()) (*correct)[n] += std::min(kv.second, it->second);
  }
}

// BLEU._get_closest_ref_len: closest reference length, ties to the shorter.
int64_t closest_ref_len(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t closest_diff = -1, closest_len = -1;
  for (int64_t ref_len : ref_lens) {
    const int64_t diff = hyp_len > ref_len ? hyp_len - ref_len : ref_len - hyp_len;
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = ref_len;
    } else if (diff == closest_diff && ref_len < closest_len) {
      closest_len = ref_len;
    }
  }
  return closest_len;
}

// Throws nmt::Error, naming the function `who`, when opt.tokenize is not a tokenizer's name.
void check_tokenizer(const BleuOptions& opt, const char* who) {
  static const char* const kTokenizers[] = {"13a", "intl", "char", "none"};
  if (std::find(std::begin(kTokenizers), std::end(kTokenizers), opt.tokenize) == std::end(kTokenizers))
    throw Error(std::string(who) + ": unknown tokenizer '" + opt.tokenize + "' (supported: 13a, intl, char, none)");
}

// utils.my_log
double my_log(double num) { return num == 0.0 ? -9999999999.0 : std::log(num); }

// BLEU.compute_bleu with 'exp' smoothing; `effective_order` as sacreBLEU's
// (sentence_bleu's default): the mean of the logs runs over the orders up to
// the last one the hypothesis has n-grams of, not over all four.
BleuScore bleu_of_stats(const std::array<int64_t, 4>& correct, const std::array<int64_t, 4>& total, int64_t sys_len,
                        int64_t ref_len, bool effective_order);

}  // namespace

BleuScore compute_bleu(const std::array<int64_t, 4>& correct,
                       const std::array<int64_t, 4>& total,
                       int64_t sys_len, int64_t ref_len) {
  return bleu_of_stats(correct, total, sys_len, ref_len, /*effective_order=*/false);
}

namespace {

BleuScore bleu_of_stats(const std::array<int64_t, 4>& correct, const std::array<int64_t, 4>& total, int64_t sys_len,
                        int64_t ref_len, bool effective_order) {
  BleuScore r;
  r.counts = correct;
  r.totals = total;
  r.sys_len = static_cast<double>(sys_len);
  r.ref_len = static_cast<double>(ref_len);
  // Brevity penalty.
  if (sys_len < ref_len) {
    r.bp = sys_len > 0
               ? std::exp(1 - static_cast<double>(ref_len) / static_cast<double>(sys_len))
               : 0.0;
  } else {
    r.bp = 1.0;
  }
  r.precisions.fill(0.0);
  // Early stop if there are no matches (sacreBLEU #141).
  if (std::all_of(correct.begin(), correct.end(), [](int64_t c) { return c == 0; })) {
    r.score = 0.0;
    return r;
  }
  double smooth_mteval = 1.0;
  int eff_order = kMaxOrder;
  for (int n = 1; n <= kMaxOrder; ++n) {
    const int64_t t = total[n - 1];
    if (t == 0) break;
    if (effective_order) eff_order = n;
    if (correct[n - 1] == 0) {  // 'exp' smoothing
      smooth_mteval *= 2;
      r.precisions[n - 1] = 100. / (smooth_mteval * static_cast<double>(t));
    } else {
      r.precisions[n - 1] = 100. * static_cast<double>(correct[n - 1]) / static_cast<double>(t);
    }
  }
  double log_sum = 0.0;
  for (int n = 0; n < eff_order; ++n) log_sum += my_log(r.precisions[n]);
  r.score = r.bp * std::exp(log_sum / eff_order);
  return r;
}

}  // namespace

namespace {

// Row layout of bleu_statistics(): matches of orders 1-4, hypothesis
// n-grams of orders 1-4, hypothesis length, closest reference length.
constexpr size_t kBleuRow = 2 * kMaxOrder + 2;

// BLEU._extract_corpus_statistics: one row of kBleuRow counts per segment;
// fills *counts with each segment's number of references.
std::vector<std::vector<int64_t>> bleu_rows(const std::vector<std::string>& hyps,
                                            const std::vector<std::vector<std::string>>& ref_streams,
                                            const BleuOptions& opt, std::vector<size_t>* counts) {
  std::vector<std::vector<int64_t>> rows;
  rows.reserve(hyps.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    // BLEU._extract_reference_info: max count of each n-gram over references.
    NgramCounts ref_ngrams;
    std::vector<int64_t> ref_lens;
    for (const std::string* ref : segment_refs(ref_streams, i, counts)) {
      NgramCounts this_ngrams;
      ref_lens.push_back(extract_word_ngrams(preprocess_bleu(*ref, opt), this_ngrams));
      for (const auto& kv : this_ngrams) {
        int64_t& c = ref_ngrams[kv.first];
        c = std::max(c, kv.second);
      }
    }
    // BLEU._compute_segment_statistics.
    NgramCounts hyp_ngrams;
    const int64_t hyp_len = extract_word_ngrams(preprocess_bleu(hyps[i], opt), hyp_ngrams);
    std::array<int64_t, 4> correct{}, total{};
    add_matches(hyp_ngrams, ref_ngrams, &correct, &total);
    std::vector<int64_t> row(correct.begin(), correct.end());
    row.insert(row.end(), total.begin(), total.end());
    row.push_back(hyp_len);
    row.push_back(closest_ref_len(hyp_len, ref_lens));
    rows.push_back(std::move(row));
  }
  return rows;
}

// BLEU._compute_score_from_stats of summed rows (kBleuRow counts).
BleuScore bleu_of_row(const std::vector<int64_t>& sum) {
  std::array<int64_t, 4> correct{}, total{};
  std::copy(sum.begin(), sum.begin() + kMaxOrder, correct.begin());
  std::copy(sum.begin() + kMaxOrder, sum.begin() + 2 * kMaxOrder, total.begin());
  return compute_bleu(correct, total, sum[2 * kMaxOrder], sum[2 * kMaxOrder + 1]);
}

}  // namespace

SegmentStatistics bleu_statistics(const std::vector<std::string>& hyps,
                                  const std::vector<std::vector<std::string>>& ref_streams, const BleuOptions& opt) {
  check_tokenizer(opt, "bleu_statistics");
  check_streams(hyps, ref_streams, "bleu_statistics");
  std::vector<size_t> counts;
  SegmentStatistics s;
  s.rows = bleu_rows(hyps, ref_streams, opt, &counts);
  s.width = kBleuRow;
  s.score = [](const std::vector<int64_t>& sum) { return bleu_of_row(sum).score; };
  return s;
}

BleuScore corpus_bleu_multiref(const std::vector<std::string>& hyps,
                               const std::vector<std::vector<std::string>>& ref_streams,
                               const BleuOptions& opt) {
  check_tokenizer(opt, "corpus_bleu");
  check_streams(hyps, ref_streams, "corpus_bleu");
  std::vector<size_t> counts;
  std::vector<int64_t> sum(kBleuRow, 0);
  for (const auto& row : bleu_rows(hyps, ref_streams, opt, &counts))
    for (size_t k = 0; k < kBleuRow; ++k) sum[k] += row[k];
  BleuScore r = bleu_of_row(sum);
  r.nrefs = common_count(counts, ref_streams.size());
  r.lowercase = opt.lowercase;
  r.tokenize = opt.tokenize;
  return r;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::string>& refs,
                      const BleuOptions& opt) {
  if (hyps.size() != refs.size()) {
    throw Error("corpus_bleu: " + std::to_string(hyps.size()) +
                                " hypotheses but " + std::to_string(refs.size()) +
                                " references; they must be parallel");
  }
  return corpus_bleu_multiref(hyps, std::vector<std::vector<std::string>>{refs}, opt);
}

std::vector<std::vector<double>> pairwise_sentence_bleu(const std::vector<std::string>& segments,
                                                        const BleuOptions& opt) {
  check_tokenizer(opt, "pairwise_sentence_bleu");
  std::vector<NgramCounts> ngrams(segments.size());
  std::vector<int64_t> lens(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) lens[i] = extract_word_ngrams(preprocess_bleu(segments[i], opt), ngrams[i]);
  std::vector<std::vector<double>> out(segments.size(), std::vector<double>(segments.size()));
  for (size_t i = 0; i < segments.size(); ++i) {
    for (size_t j = 0; j < segments.size(); ++j) {
      std::array<int64_t, 4> correct{}, total{};
      add_matches(ngrams[i], ngrams[j], &correct, &total);
      out[i][j] = bleu_of_stats(correct, total, lens[i], lens[j], /*effective_order=*/true).score;
    }
  }
  return out;
}

std::string BleuScore::signature() const {
  return "nrefs:" + nrefs_text(nrefs) + bootstrap_fields(confidence) + "|case:" + (lowercase ? "lc" : "mixed") +
         "|eff:no|tok:" + tokenize + "|smooth:exp|version:" + metrics_version();
}

std::string BleuScore::verbose() const {
  const double ratio = ref_len != 0.0 ? sys_len / ref_len : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)",
                precisions[0], precisions[1], precisions[2], precisions[3], bp, ratio,
                static_cast<long long>(sys_len), static_cast<long long>(ref_len));
  return buf;
}

std::string BleuScore::to_string() const {
  return format("BLEU = %.2f", score) + confidence_text(confidence) + " " + verbose();
}

std::string BleuScore::to_json() const { return score_json("BLEU", score, signature(), verbose(), confidence); }

}  // namespace nmt
