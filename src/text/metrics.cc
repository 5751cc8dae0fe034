// Implementation of corpus BLEU and chrF matching sacreBLEU 2.x; see metrics.h.
// Each function mirrors a piece of sacreBLEU's Python source (named in its
// comment) and keeps the same floating-point operation order.
#include "text/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "base/error.h"
#include "base/format.h"
#include "base/json.h"
#include "base/utf8.h"
#include "text/python_text.h"

namespace nmt {
namespace {

constexpr int kMaxOrder = 4;      // sacreBLEU MAX_NGRAM_ORDER
constexpr int kChrfOrder = 6;     // CHRF.CHAR_ORDER

// ---------------------------------------------------------------------------
// Tokenizer13a / TokenizerRegexp helpers. The regexes only involve ASCII
// characters and UTF-8 multi-byte sequences contain no ASCII bytes, so running
// them on bytes gives the same result as Python running them on code points.

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Python str.replace(from, to): all non-overlapping occurrences, left to right.
void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

// re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])').sub(r' \1 ', s)
bool is_13a_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// re.sub for a two-character pattern (first, second) with replacement
// `pre` + \1 + `mid` + \2 + `post`: scans left to right, non-overlapping,
// exactly like Python's re.sub for a fixed-width pattern.
template <typename F1, typename F2>
std::string sub_pairs(const std::string& s, F1 first, F2 second,
                      const char* pre, const char* mid, const char* post) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    if (i + 1 < n && first(s[i]) && second(s[i + 1])) {
      out += pre;
      out.push_back(s[i]);
      out += mid;
      out.push_back(s[i + 1]);
      out += post;
      i += 2;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

// TokenizerRegexp.__call__ (sacrebleu/tokenizers/tokenizer_re.py).
std::string tokenize_regexp(const std::string& line) {
  std::string s;
  s.reserve(line.size() * 2);
  for (char c : line) {
    if (is_13a_symbol(c)) {
      s.push_back(' ');
      s.push_back(c);
      s.push_back(' ');
    } else {
      s.push_back(c);
    }
  }
  auto not_digit = [](char c) { return !is_digit(c); };
  auto period_comma = [](char c) { return c == '.' || c == ','; };
  // tokenize period and comma unless preceded by a digit: r'([^0-9])([\.,])' -> r'\1 \2 '
  s = sub_pairs(s, not_digit, period_comma, "", " ", " ");
  // tokenize period and comma unless followed by a digit: r'([\.,])([^0-9])' -> r' \1 \2'
  s = sub_pairs(s, period_comma, not_digit, " ", " ", "");
  // tokenize dash when preceded by a digit: r'([0-9])(-)' -> r'\1 \2 '
  s = sub_pairs(s, is_digit, [](char c) { return c == '-'; }, "", " ", " ");
  // ' '.join(line.strip().split())
  std::string out;
  for (const auto& tok : py_split(s)) {
    if (!out.empty()) out.push_back(' ');
    out += tok;
  }
  return out;
}

// ---------------------------------------------------------------------------
// BLEU internals (sacrebleu/metrics/bleu.py, helpers.py).

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

// utils.my_log
double my_log(double num) { return num == 0.0 ? -9999999999.0 : std::log(num); }

std::string format(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, a);
  return buf;
}

// ---------------------------------------------------------------------------
// chrF internals (sacrebleu/metrics/chrf.py, helpers.py).

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

// Checks the layout of `ref_streams` against `hyps` (`who` names the caller
// in messages). Throws nmt::Error if there are no streams or one differs in size.
void check_streams(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                   const char* who) {
  if (ref_streams.empty()) throw Error(std::string(who) + ": no reference streams given");
  for (size_t k = 0; k < ref_streams.size(); ++k)
    if (ref_streams[k].size() != hyps.size())
      throw Error(std::string(who) + ": " + std::to_string(hyps.size()) + " hypotheses but reference stream " +
                  std::to_string(k) + " has " + std::to_string(ref_streams[k].size()) + " segments");
}

// The references of segment i, as sacreBLEU's Metric._cache_references keeps
// them: the non-empty ones; when all are empty, one empty reference (nmt
// scores such a segment where sacreBLEU stops). `counts` collects how many
// each segment has, for the signature's nrefs.
std::vector<const std::string*> segment_refs(const std::vector<std::vector<std::string>>& ref_streams, size_t i,
                                             std::vector<size_t>* counts) {
  std::vector<const std::string*> refs;
  for (const auto& stream : ref_streams)
    if (!stream[i].empty()) refs.push_back(&stream[i]);
  if (refs.empty()) refs.push_back(&ref_streams.front()[i]);
  counts->push_back(refs.size());
  return refs;
}

// nrefs of a signature: the count every segment has, or -1 ("var") when they differ.
int common_count(const std::vector<size_t>& counts, size_t streams) {
  if (counts.empty()) return static_cast<int>(streams);
  for (size_t c : counts)
    if (c != counts.front()) return -1;
  return static_cast<int>(counts.front());
}

std::string nrefs_text(int nrefs) { return nrefs < 0 ? "var" : std::to_string(nrefs); }

// Python's repr of float(f'{score:.2f}'), as json.dumps writes it: "35.2", "100.0", "0.0".
std::string json_score(double score) {
  std::string text = shortest_decimal(std::strtod(format("%.2f", score).c_str(), nullptr));
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

// sacreBLEU's Score.format(is_json=True): json.dumps(d, indent=1, ensure_ascii=False)
// of name, score, signature, verbose_score (when there is one) and the
// signature's fields as strings.
std::string score_json(const std::string& name, double score, const std::string& signature,
                       const std::string& verbose) {
  std::string out = "{\n \"name\": " + json_string(name) + ",\n \"score\": " + json_score(score) +
                    ",\n \"signature\": " + json_string(signature);
  if (!verbose.empty()) out += ",\n \"verbose_score\": " + json_string(verbose);
  size_t start = 0;
  while (start <= signature.size()) {
    const size_t bar = std::min(signature.find('|', start), signature.size());
    const std::string field = signature.substr(start, bar - start);
    const size_t colon = field.find(':');
    out += ",\n " + json_string(field.substr(0, colon)) + ": " + json_string(field.substr(colon + 1));
    start = bar + 1;
  }
  return out + "\n}";
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API.

std::string tokenize_13a(const std::string& input) {
  std::string line = input;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  return tokenize_regexp(" " + line + " ");
}

std::string tokenize_intl(const std::string& line) {
  auto P = [](char32_t c) { return unicode_major_category(c) == 'P'; };
  auto N = [](char32_t c) { return unicode_major_category(c) == 'N'; };
  // regex.sub of a two-character pattern: non-overlapping matches, left to right.
  auto sub_pairs = [](const std::u32string& in, auto first, auto second, bool space_before) {
    std::u32string out;
    for (size_t i = 0; i < in.size();) {
      if (i + 1 < in.size() && first(in[i]) && second(in[i + 1])) {
        if (space_before) out += U' ';
        out += in[i];
        out += U' ';
        out += in[i + 1];
        if (!space_before) out += U' ';
        i += 2;
      } else {
        out += in[i++];
      }
    }
    return out;
  };
  std::u32string u = decode_utf8(line);
  u = sub_pairs(u, [&](char32_t c) { return !N(c); }, P, false);  // (\P{N})(\p{P}) -> '\1 \2 '
  u = sub_pairs(u, P, [&](char32_t c) { return !N(c); }, true);   // (\p{P})(\P{N}) -> ' \1 \2'
  std::u32string sym;                                              // (\p{S}) -> ' \1 '
  for (char32_t c : u) {
    if (unicode_major_category(c) == 'S') {
      sym += U' ';
      sym += c;
      sym += U' ';
    } else {
      sym += c;
    }
  }
  std::string out;
  for (const auto& w : py_split(sym)) {
    if (!out.empty()) out += ' ';
    out += encode_utf8(w);
  }
  return out;
}

const std::string& metrics_version() {
  static const std::string v = std::string("nmt-") + NMT_VERSION;
  return v;
}

BleuScore compute_bleu(const std::array<int64_t, 4>& correct,
                       const std::array<int64_t, 4>& total,
                       int64_t sys_len, int64_t ref_len) {
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
  for (int n = 1; n <= kMaxOrder; ++n) {
    const int64_t t = total[n - 1];
    if (t == 0) break;
    if (correct[n - 1] == 0) {  // 'exp' smoothing
      smooth_mteval *= 2;
      r.precisions[n - 1] = 100. / (smooth_mteval * static_cast<double>(t));
    } else {
      r.precisions[n - 1] = 100. * static_cast<double>(correct[n - 1]) / static_cast<double>(t);
    }
  }
  double log_sum = 0.0;
  for (double p : r.precisions) log_sum += my_log(p);
  r.score = r.bp * std::exp(log_sum / kMaxOrder);
  return r;
}

BleuScore corpus_bleu_multiref(const std::vector<std::string>& hyps,
                               const std::vector<std::vector<std::string>>& ref_streams,
                               const BleuOptions& opt) {
  static const char* const kTokenizers[] = {"13a", "intl", "char", "none"};
  if (std::find(std::begin(kTokenizers), std::end(kTokenizers), opt.tokenize) == std::end(kTokenizers))
    throw Error("corpus_bleu: unknown tokenizer '" + opt.tokenize + "' (supported: 13a, intl, char, none)");
  check_streams(hyps, ref_streams, "corpus_bleu");
  std::array<int64_t, 4> correct{}, total{};
  int64_t sys_len = 0, ref_len = 0;
  std::vector<size_t> counts;
  for (size_t i = 0; i < hyps.size(); ++i) {
    // BLEU._extract_reference_info: max count of each n-gram over references.
    NgramCounts ref_ngrams;
    std::vector<int64_t> ref_lens;
    for (const std::string* ref : segment_refs(ref_streams, i, &counts)) {
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
    sys_len += hyp_len;
    ref_len += closest_ref_len(hyp_len, ref_lens);
    for (const auto& kv : hyp_ngrams) {
      const int n = ngram_order(kv.first) - 1;
      total[n] += kv.second;
      auto it = ref_ngrams.find(kv.first);
      if (it != ref_ngrams.end()) correct[n] += std::min(kv.second, it->second);
    }
  }
  BleuScore r = compute_bleu(correct, total, sys_len, ref_len);
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

std::string BleuScore::signature() const {
  return "nrefs:" + nrefs_text(nrefs) + "|case:" + (lowercase ? "lc" : "mixed") +
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

std::string BleuScore::to_string() const { return format("BLEU = %.2f ", score) + verbose(); }

std::string BleuScore::to_json() const { return score_json("BLEU", score, signature(), verbose()); }

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

ChrfScore corpus_chrf_multiref(const std::vector<std::string>& hyps,
                               const std::vector<std::vector<std::string>>& ref_streams, const ChrfOptions& opt) {
  if (opt.beta < 1) throw Error("corpus_chrf: beta must be at least 1");
  check_streams(hyps, ref_streams, "corpus_chrf");
  using Stats = std::array<int64_t, 3 * kChrfOrder>;
  Stats stats{};
  std::vector<size_t> counts;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto hyp_ngrams = extract_char_ngrams(hyps[i], opt.whitespace);
    // CHRF._compute_segment_statistics: the reference with the best
    // sentence-level f-score (strictly better than those before it).
    Stats best{};
    double best_f = -1.0;
    for (const std::string* ref : segment_refs(ref_streams, i, &counts)) {
      const auto ref_ngrams = extract_char_ngrams(*ref, opt.whitespace);
      Stats seg{};
      for (int n = 0; n < kChrfOrder; ++n) {
        // CHRF._get_match_statistics
        int64_t hyp_count = 0, match_count = 0, ref_count = 0;
        for (const auto& kv : hyp_ngrams[n]) {
          hyp_count += kv.second;
          auto it = ref_ngrams[n].find(kv.first);
          if (it != ref_ngrams[n].end()) match_count += std::min(kv.second, it->second);
        }
        for (const auto& kv : ref_ngrams[n]) ref_count += kv.second;
        // Don't count hypothesis n-grams if the reference has none of this order.
        seg[3 * n] = ref_ngrams[n].empty() ? 0 : hyp_count;
        seg[3 * n + 1] = ref_count;
        seg[3 * n + 2] = match_count;
      }
      const double f = chrf_f_score(seg, opt);
      if (f > best_f) best_f = f, best = seg;
    }
    for (size_t k = 0; k < stats.size(); ++k) stats[k] += best[k];
  }
  ChrfScore score;
  score.score = chrf_f_score(stats, opt);
  score.options = opt;
  score.nrefs = common_count(counts, ref_streams.size());
  return score;
}

std::string ChrfScore::signature() const {
  return "nrefs:" + nrefs_text(nrefs) + "|case:mixed|eff:" + (options.eps_smoothing ? "no" : "yes") +
         "|nc:6|nw:0|space:" + (options.whitespace ? "yes" : "no") + "|version:" + metrics_version();
}

std::string ChrfScore::to_string() const {
  return "chrF" + std::to_string(options.beta) + format(" = %.2f", score);
}

std::string ChrfScore::to_json() const {
  return score_json("chrF" + std::to_string(options.beta), score, signature(), "");
}

std::string sacrebleu_json(const std::vector<std::string>& objects) {
  if (objects.size() == 1) return objects.front();
  std::string out = "[\n";
  for (size_t i = 0; i < objects.size(); ++i) out += (i > 0 ? ",\n" : "") + objects[i];
  return out + "\n]";
}

double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  if (hyps.size() != refs.size())
    throw Error(std::to_string(hyps.size()) + " hypotheses but " + std::to_string(refs.size()) +
                                " references");
  if (hyps.empty()) return 0.0;
  size_t same = 0;
  for (size_t i = 0; i < hyps.size(); ++i) same += hyps[i] == refs[i];
  return 100.0 * static_cast<double>(same) / static_cast<double>(hyps.size());
}

double exact_match_multiref(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams) {
  check_streams(hyps, ref_streams, "exact_match");
  if (hyps.empty()) return 0.0;
  size_t same = 0;
  for (size_t i = 0; i < hyps.size(); ++i)
    same += std::any_of(ref_streams.begin(), ref_streams.end(), [&](const auto& s) { return s[i] == hyps[i]; });
  return 100.0 * static_cast<double>(same) / static_cast<double>(hyps.size());
}

}  // namespace nmt

