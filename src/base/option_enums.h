// The options whose values are names (--attention additive, --format
// pharaoh, ...): each enum lists its names once, in an EnumNames
// specialization (fields.h), which gives parsing, printing and --help's
// list of choices. Included by options.h.
#pragma once
#include <array>
#include <string>
#include <utility>

#include "base/fields.h"

namespace nmt {

// How decoder queries are scored against encoder annotations h_j.
enum class AttentionType {
  kAdditive,  // Bahdanau: v^T tanh(W s + U h_j)
  kDot,       // Luong: s^T h_j (needs decoder hidden == 2 * encoder hidden)
  kGeneral,   // Luong: s^T W h_j
  kConcat,    // Luong: v^T tanh(W_a [s; h_j]) (W_a split in two blocks, keys precomputed)
  kNone,      // no attention: c_t is the mean annotation (RNNencdec baseline)
};
template <>
struct EnumNames<AttentionType> {
  static constexpr const char* what = "attention";
  static constexpr std::array<std::pair<AttentionType, const char*>, 5> values = {{
      {AttentionType::kAdditive, "additive"}, {AttentionType::kDot, "dot"}, {AttentionType::kGeneral, "general"},
      {AttentionType::kConcat, "concat"}, {AttentionType::kNone, "none"}}};
};

// The decoder's recurrence.
enum class DecoderType {
  kBahdanau,  // s_t = GRU([E y_{t-1}; c_t], s_{t-1}), c_t attending with s_{t-1} (Bahdanau et al. 2015)
  kCgru,      // conditional GRU (Nematus, nmtpy): s'_t = GRU1(E y_{t-1}, s_{t-1}); c_t attends
              // with s'_t; s_t = GRU2(c_t, s'_t)
};
template <>
struct EnumNames<DecoderType> {
  static constexpr const char* what = "decoder";
  static constexpr std::array<std::pair<DecoderType, const char*>, 2> values = {{
      {DecoderType::kBahdanau, "bahdanau"}, {DecoderType::kCgru, "cgru"}}};
};

// How gradients update the weights.
enum class OptimizerType {
  kAdam,  // Adam (Kingma & Ba 2015) with --adam-beta1/2
  kSgd,   // plain SGD: w -= lr * (gradient + weight_decay * w)
};
template <>
struct EnumNames<OptimizerType> {
  static constexpr const char* what = "optimizer";
  static constexpr std::array<std::pair<OptimizerType, const char*>, 2> values = {{
      {OptimizerType::kAdam, "adam"}, {OptimizerType::kSgd, "sgd"}}};
};

// Which validation figure decides "best" and early stopping.
enum class StopMetric { kLoss, kPerplexity, kBleu, kChrf };
template <>
struct EnumNames<StopMetric> {
  static constexpr const char* what = "metric";
  static constexpr std::array<std::pair<StopMetric, const char*>, 4> values = {{
      {StopMetric::kLoss, "loss"}, {StopMetric::kPerplexity, "perplexity"}, {StopMetric::kBleu, "bleu"},
      {StopMetric::kChrf, "chrf"}}};
};

// The names of these enums, and their parsers (nmt::Error for an unknown name).
// sacreBLEU's tokenizers for BLEU (text/metrics.h, BleuOptions::tokenize).
enum class BleuTokenizer { k13a, kIntl, kChar, kNone };
template <>
struct EnumNames<BleuTokenizer> {
  static constexpr const char* what = "BLEU tokenizer";
  static constexpr std::array<std::pair<BleuTokenizer, const char*>, 4> values = {{
      {BleuTokenizer::k13a, "13a"}, {BleuTokenizer::kIntl, "intl"}, {BleuTokenizer::kChar, "char"},
      {BleuTokenizer::kNone, "none"}}};
};

// How nmt-translate --evaluate prints its scores: sacreBLEU's score lines
// ("BLEU = 35.21 66.1/41.3/... (BP = ...)", "chrF2 = 56.78"), or the list of
// JSON objects `sacrebleu -f json` prints for several metrics.
enum class ScoreFormat { kText, kJson };
template <>
struct EnumNames<ScoreFormat> {
  static constexpr const char* what = "score format";
  static constexpr std::array<std::pair<ScoreFormat, const char*>, 2> values = {{
      {ScoreFormat::kText, "text"}, {ScoreFormat::kJson, "json"}}};
};

// The utility minimum Bayes-risk selection maximizes in expectation
// (translate/mbr.h): none (the search's or rescoring's best is the
// translation), sacreBLEU's sentence BLEU, or sentence chrF2.
enum class MbrUtility { kNone, kBleu, kChrf };
template <>
struct EnumNames<MbrUtility> {
  static constexpr const char* what = "utility";
  static constexpr std::array<std::pair<MbrUtility, const char*>, 3> values = {{
      {MbrUtility::kNone, "none"}, {MbrUtility::kBleu, "bleu"}, {MbrUtility::kChrf, "chrf"}}};
};

inline const char* to_string(AttentionType t) { return enum_name(t); }
inline const char* to_string(BleuTokenizer t) { return enum_name(t); }
inline const char* to_string(DecoderType t) { return enum_name(t); }
inline const char* to_string(OptimizerType t) { return enum_name(t); }
inline const char* to_string(StopMetric m) { return enum_name(m); }
inline AttentionType parse_attention(const std::string& s) { return parse_enum<AttentionType>(s); }
inline DecoderType parse_decoder(const std::string& s) { return parse_enum<DecoderType>(s); }
inline OptimizerType parse_optimizer(const std::string& s) { return parse_enum<OptimizerType>(s); }
inline StopMetric parse_stop_metric(const std::string& s) { return parse_enum<StopMetric>(s); }

// Which aligner nmt-align runs.
enum class Aligner {
  kAttention,  // a model's attention
  kIbm2,       // statistical, fast_align-style (word_aligner.h); needs no model
  kHmm,        // statistical: IBM model 2, then the HMM alignment model (word_aligner.h)
};
template <>
struct EnumNames<Aligner> {
  static constexpr const char* what = "aligner";
  static constexpr std::array<std::pair<Aligner, const char*>, 3> values = {{
      {Aligner::kAttention, "attention"}, {Aligner::kIbm2, "ibm2"}, {Aligner::kHmm, "hmm"}}};
};

// What nmt-align writes.
enum class AlignFormat {
  kCsv,      // attention matrices, one CSV block per pair
  kTidy,     // attention as one long CSV table: a row per cell
  kPharaoh,  // word links i-j
  kSvg,      // heatmaps
  kLex,      // a statistical aligner's lexical table over a model's pieces, for nmt-translate --shortlist
};
template <>
struct EnumNames<AlignFormat> {
  static constexpr const char* what = "format";
  static constexpr std::array<std::pair<AlignFormat, const char*>, 5> values = {{
      {AlignFormat::kCsv, "csv"}, {AlignFormat::kTidy, "tidy"}, {AlignFormat::kPharaoh, "pharaoh"},
      {AlignFormat::kSvg, "svg"}, {AlignFormat::kLex, "lex"}}};
};

// The units of the matrices written.
enum class AlignLevel { kSubword, kWord };
template <>
struct EnumNames<AlignLevel> {
  static constexpr const char* what = "level";
  static constexpr std::array<std::pair<AlignLevel, const char*>, 2> values = {{
      {AlignLevel::kSubword, "subword"}, {AlignLevel::kWord, "word"}}};
};

// How a matrix becomes hard links.
enum class HardMethod {
  kArgmax,     // each target word links to its most attended source word
  kThreshold,  // every (i, j) whose weight is at least the threshold
};
template <>
struct EnumNames<HardMethod> {
  static constexpr const char* what = "alignment method";
  static constexpr std::array<std::pair<HardMethod, const char*>, 2> values = {{
      {HardMethod::kArgmax, "argmax"}, {HardMethod::kThreshold, "threshold"}}};
};
inline HardMethod parse_hard_method(const std::string& s) { return parse_enum<HardMethod>(s); }

// How the links of two directions combine.
enum class Symmetrization {
  kNone,              // forward links only
  kIntersection,      // links both directions agree on: high precision
  kUnion,             // links of either direction: high recall
  kGrowDiag,          // intersection grown into neighbouring union links
  kGrowDiagFinal,     // grow-diag, then union links with an unaligned word
  kGrowDiagFinalAnd,  // grow-diag, then union links whose two words are unaligned
  kAverage,           // hard links of the mean of both word-level matrices
};
template <>
struct EnumNames<Symmetrization> {
  static constexpr const char* what = "symmetrization";
  static constexpr std::array<std::pair<Symmetrization, const char*>, 7> values = {{
      {Symmetrization::kNone, "none"}, {Symmetrization::kIntersection, "intersection"},
      {Symmetrization::kUnion, "union"}, {Symmetrization::kGrowDiag, "grow-diag"},
      {Symmetrization::kGrowDiagFinal, "grow-diag-final"}, {Symmetrization::kGrowDiagFinalAnd, "grow-diag-final-and"},
      {Symmetrization::kAverage, "average"}}};
};
inline Symmetrization parse_symmetrization(const std::string& s) { return parse_enum<Symmetrization>(s); }

}  // namespace nmt
