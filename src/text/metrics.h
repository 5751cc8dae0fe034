// Corpus-level BLEU and chrF, reimplemented in plain C++17 so that they give the
// same numbers as sacreBLEU 2.x (`sacrebleu.corpus_bleu` / `sacrebleu.corpus_chrf`
// with default settings). Every step that affects the score (13a tokenization,
// Python str.lower()/str.split() semantics, n-gram clipping, exp smoothing, the
// chrF effective-order average, even the floating-point operation order) follows
// the Python source, so scores agree to the last few ulps.
//
// Text is UTF-8. Bytes that are not valid UTF-8 never cause an error: each one is
// carried through as a single opaque character (like Python's "surrogateescape"),
// so it counts as one character in chrF and is never treated as whitespace.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "text/python_text.h"

namespace nmt {

// Options for corpus BLEU, mirroring sacreBLEU's defaults (13a tokenizer, cased,
// exp smoothing). Smoothing is fixed to sacreBLEU's default 'exp' (mteval-v13a
// style: the k-th n-gram order with zero matches gets precision 1/(2^k * total)),
// the maximum n-gram order is fixed to 4 and effective order is off, exactly as
// in `sacrebleu.corpus_bleu(hyps, [refs])`.
struct BleuOptions {
  bool lowercase = false;        // sacreBLEU -lc: Python str.lower() before tokenizing
  std::string tokenize = "13a";  // sacreBLEU's names: "13a" (mteval-v13a), "intl" (mteval-v14
                                 // international), "char" (every character) or "none" (whitespace only)
};

// The version field of the signatures: "nmt-" and nmt's version. The scores
// equal sacreBLEU 2.x's (2.0 through 2.5 compute BLEU and chrF alike; the
// values of its test suite are reproduced in tests/metrics_test.cc and
// metrics_chrf_test.cc), but they come from nmt's own code, and the
// signature says so.
const std::string& metrics_version();

// A bootstrap estimate attached to a score (text/significance.h; sacreBLEU's
// Score._mean and _ci after --confidence or --paired-bs). With samples > 0
// the signature names them (bs, seed), to_string() adds "(μ = MEAN ± CI)"
// and, against a baseline, "(p = P)", and to_json() the same fields.
struct ScoreConfidence {
  int64_t samples = 0;  // resampled corpora; 0: no estimate
  uint64_t seed = 0;    // the draws' seed
  double mean = 0;      // the mean of the resampled scores
  double ci = 0;        // half the width of their 95% interval
  double p_value = -1;  // of the paired test against a baseline; below 0: none
};

// Result of corpus BLEU, with the same fields sacreBLEU's BLEUScore prints.
struct BleuScore {
  double score = 0.0;                  // 0..100
  std::array<double, 4> precisions{};  // n-gram precisions in percent (smoothed), as sacreBLEU prints them
  double bp = 0.0;                     // brevity penalty
  double sys_len = 0.0;                // total hypothesis length in tokens
  double ref_len = 0.0;                // total (closest) reference length in tokens
  std::array<int64_t, 4> counts{};     // clipped n-gram matches per order (sacreBLEU .counts)
  std::array<int64_t, 4> totals{};     // hypothesis n-grams per order (sacreBLEU .totals)
  // Settings that produced the score; used only by signature().
  int nrefs = 1;  // references per segment; -1: not the same for every segment ("var")
  bool lowercase = false;
  std::string tokenize = "13a";
  ScoreConfidence confidence;  // none unless attached

  // sacreBLEU 2.x style signature, fields in sacreBLEU's order, e.g.
  // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:nmt-0.1.0". `case` is
  // "lc" with lowercasing, `tok` the tokenizer name, `version` metrics_version().
  std::string signature() const;
  // sacreBLEU's score line, e.g.
  // "BLEU = 34.21 65.2/41.0/28.3/19.7 (BP = 1.000 ratio = 1.012 hyp_len = 1234 ref_len = 1219)",
  // with an estimate "BLEU = 34.21 (μ = 34.25 ± 1.10) (p = 0.0310) 65.2/...".
  std::string to_string() const;
  // What follows the score on that line (sacreBLEU's verbose_score):
  // "65.2/41.0/28.3/19.7 (BP = 1.000 ratio = 1.012 hyp_len = 1234 ref_len = 1219)".
  std::string verbose() const;
  // The JSON object `sacrebleu -f json` prints for BLEU (Score.format with
  // is_json: name, score to 2 decimals, signature, verbose_score, then each
  // signature field as a string; one space of indent, as json.dumps(indent=1)).
  std::string to_json() const;
};

// Corpus BLEU of `hyps` against one reference per segment (refs[i] is the
// reference of hyps[i]); same value as sacrebleu.corpus_bleu(hyps, [refs], ...).
// Empty strings are valid segments. An empty corpus gives score 0.
// Throws nmt::Error if the sizes differ or opt.tokenize is not one of
// the names above.
BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::string>& refs,
                      const BleuOptions& opt = {});

// Multi-reference corpus BLEU, sacreBLEU layout: ref_streams[k][i] is the k-th
// reference of hyps[i] (n-gram counts are clipped by the max over references,
// the reference length is the closest one, ties to the shorter). As in
// sacreBLEU, an empty reference of a segment that has others is left out
// (nrefs becomes -1, "var", when segments end up with different counts); a
// segment whose references are all empty is scored against one empty
// reference, where sacreBLEU refuses the corpus.
// Throws nmt::Error if ref_streams is empty, any stream's size
// differs from hyps.size(), or opt.tokenize is unknown.
BleuScore corpus_bleu_multiref(const std::vector<std::string>& hyps,
                               const std::vector<std::vector<std::string>>& ref_streams,
                               const BleuOptions& opt = {});

// BLEU from already aggregated sufficient statistics (sacreBLEU's
// BLEU.compute_bleu with 'exp' smoothing, max order 4): correct[n-1]/total[n-1]
// are the clipped matches / hypothesis n-grams of order n. Useful to combine
// statistics of several shards. Never throws; returns score 0 if there are no
// matches at all. The returned BleuScore has nrefs=1, tokenize "13a".
BleuScore compute_bleu(const std::array<int64_t, 4>& correct,
                       const std::array<int64_t, 4>& total,
                       int64_t sys_len, int64_t ref_len);

// sacreBLEU's sentence_bleu(segments[i], [segments[j]]) ('exp' smoothing,
// effective order) for every ordered pair: out[i][j] (0..100) scores segment
// i with segment j as its reference. Each segment's n-grams are counted once.
// Minimum Bayes-risk selection weighs these (translate/mbr.h). Throws
// nmt::Error if opt.tokenize is not one of the names above.
std::vector<std::vector<double>> pairwise_sentence_bleu(const std::vector<std::string>& segments,
                                                        const BleuOptions& opt = {});

// Per-segment sufficient statistics of a corpus score (sacreBLEU's
// Metric._extract_corpus_statistics): the corpus score is a function of
// their sum (_compute_score_from_stats), so resampled corpora are scored by
// summing rows again (text/significance.h).
struct SegmentStatistics {
  std::vector<std::vector<int64_t>> rows;  // per segment, in the hypotheses' order, `width` counts each
  size_t width = 0;
  std::function<double(const std::vector<int64_t>&)> score;  // the corpus score (0..100) of a sum of rows
};

// The statistics behind corpus_bleu_multiref(hyps, ref_streams, opt): its
// score is score(sum of rows), bit for bit. Throws as corpus_bleu_multiref.
SegmentStatistics bleu_statistics(const std::vector<std::string>& hyps,
                                  const std::vector<std::vector<std::string>>& ref_streams,
                                  const BleuOptions& opt = {});

// Settings of chrF that sacreBLEU's CHRF exposes (character order is fixed
// at 6 and word order at 0: chrF, not chrF++). The defaults are sacreBLEU's.
struct ChrfOptions {
  int beta = 2;                // recall weighs beta times precision (chrF2)
  bool eps_smoothing = false;  // average per-order F-scores with epsilon for empty
                               // orders (chrF++.py, Moses, NLTK) instead of
                               // sacreBLEU's effective-order averaging
  bool whitespace = false;     // keep whitespace in character n-grams
};

// Result of corpus chrF.
struct ChrfScore {
  double score = 0.0;   // 0..100
  ChrfOptions options;  // the settings that produced it
  int nrefs = 1;        // references per segment; -1: not the same for every segment ("var")
  ScoreConfidence confidence;  // none unless attached
  // sacreBLEU 2.x chrF signature, for the defaults
  // "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:nmt-0.1.0".
  std::string signature() const;
  // sacreBLEU's score line, e.g. "chrF2 = 56.78", with an estimate
  // "chrF2 = 56.78 (μ = 56.80 ± 0.90)" (and "(p = P)" against a baseline).
  std::string to_string() const;
  // The JSON object `sacrebleu -f json` prints for chrF (as BleuScore::to_json, without verbose_score).
  std::string to_json() const;
};

// Corpus chrF as sacreBLEU 2.x computes it (sacrebleu.corpus_chrf(hyps,
// [refs]) with the defaults): character n-grams of order 1..6 over Unicode
// code points, word order 0, beta 2, whitespace removed, case-sensitive,
// effective-order averaging; `opt` changes beta, smoothing and whitespace.
// Statistics are summed over the corpus first. Throws nmt::Error
// if the sizes differ or beta < 1.
ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::string>& refs, const ChrfOptions& opt = {});

// Multi-reference corpus chrF as sacreBLEU 2.x computes it
// (CHRF._compute_segment_statistics): each segment takes the statistics of
// the reference whose sentence-level chrF is highest (the first of equal
// ones), and those are summed over the corpus. ref_streams[k][i] is the k-th
// reference of hyps[i]; empty references are left out as corpus_bleu_multiref
// leaves them. Throws nmt::Error if ref_streams is empty, any stream's size
// differs from hyps.size(), or beta < 1.
ChrfScore corpus_chrf_multiref(const std::vector<std::string>& hyps,
                               const std::vector<std::vector<std::string>>& ref_streams, const ChrfOptions& opt = {});

// The statistics behind corpus_chrf_multiref(hyps, ref_streams, opt) (each
// segment's best reference's): its score is score(sum of rows), bit for
// bit. Throws as corpus_chrf_multiref.
SegmentStatistics chrf_statistics(const std::vector<std::string>& hyps,
                                  const std::vector<std::vector<std::string>>& ref_streams,
                                  const ChrfOptions& opt = {});

// sacreBLEU's sentence_chrf(segments[i], [segments[j]]) for every ordered
// pair: out[i][j] (0..100) scores segment i with segment j as its reference,
// equal to corpus_chrf({segments[i]}, {segments[j]}, opt). Each segment's
// character n-grams are counted once. Throws nmt::Error if opt.beta < 1.
std::vector<std::vector<double>> pairwise_sentence_chrf(const std::vector<std::string>& segments,
                                                        const ChrfOptions& opt = {});

// What `sacrebleu -f json` prints for the objects of to_json(): one object
// as it is, several as a JSON list, "[\n" + the objects joined by ",\n" +
// "\n]". Never throws (beyond std::bad_alloc).
std::string sacrebleu_json(const std::vector<std::string>& objects);

// sacreBLEU's Tokenizer13a applied to one line (exposed for tests): removes
// "<skipped>", joins "-\n", turns newlines into spaces, unescapes &quot; &amp;
// &lt; &gt;, splits off punctuation and symbols, splits '.' and ',' unless
// between digits, splits '-' after a digit, and joins tokens with single
// spaces. Note corpus_bleu() right-strips the line (Python str.rstrip())
// before calling this, as sacreBLEU does. Never throws.
std::string tokenize_13a(const std::string& line);

// sacreBLEU's TokenizerV14International on one line (exposed for tests): a
// punctuation character (Unicode category P) is split from a preceding
// non-number, then from a following non-number, then every symbol (category
// S) is split off, and tokens are joined with single spaces. As in mteval-v14
// and sacreBLEU, "in 2019." keeps its final dot on the number. Never throws.
std::string tokenize_intl(const std::string& line);

// Percentage (0..100) of hypotheses equal to their reference, byte for byte.
// Throws nmt::Error when the sizes differ; 0 for an empty corpus.
double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

// The same with several references: a hypothesis equal to any of its
// references counts. Throws nmt::Error when ref_streams is empty or a
// stream's size differs from hyps.size(); 0 for an empty corpus.
double exact_match_multiref(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams);

// lowercase() (Python str.lower()) is declared in python_text.h, included here.

}  // namespace nmt
