// The options of nmt-translate with their field lists (fields.h) and ranges:
// the search (SearchOptions), a lexical shortlist (ShortlistOptions),
// batching and precision (TranslateOptions) and what the tool does with its
// input and output (StreamOptions).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/fields.h"
#include "base/option_enums.h"
#include "base/runtime_options.h"

namespace nmt {

// Widest beam any search accepts (memory grows with it; see TranslateOptions).
constexpr int64_t kMaxBeamSize = 256;

struct SearchOptions {
  int64_t beam_size = 1;
  double length_penalty = 0.6;    // GNMT alpha: score / ((5 + len) / 6)^alpha; 0 disables
  double max_length_ratio = 2.0;  // stop a hypothesis at ratio * source length + 5 tokens
  int64_t max_length = 256;
  int64_t n_best = 1;             // hypotheses returned per sentence (<= beam_size)
  bool no_cuda_graphs = false;    // CUDA: run search steps (greedy and beam) eagerly instead of replaying each as a CUDA graph

  // Throws nmt::Error naming the first option out of its range.
  void validate() const;
  // Applies the default that depends on what was given: --n-best N without
  // --beam-size (not named in `given`) searches with a beam of N. Never throws.
  void resolve_beam(const GivenOptions& given);
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Search";
    v(Field{"beam-size", "Beam size (1: greedy)", g, "-b"}.within(1, kMaxBeamSize), s.beam_size);
    v(Field{"length-penalty", "GNMT length penalty alpha", g}.within(0.0, 10.0), s.length_penalty);
    v(Field{"max-length-ratio", "Output length cap: ratio * source + 5", g}.within(0.0, 1000.0, End::kOpen),
      s.max_length_ratio);
    v(Field{"max-length", "Output length cap in pieces", g}.within(1, 1 << 20), s.max_length);
    v(Field{"n-best", "Keep the N best hypotheses of each sentence: nmt-translate prints them in Moses' form "
                      "'i ||| hyp ||| features ||| score', nmt-serve answers them to a request that does not ask "
                      "(without -b: beam N)",
            g},
      s.n_best);
    v(Field{"no-cuda-graphs", "CUDA: run search steps (greedy and beam) eagerly instead of replaying each as a CUDA graph", g},
      s.no_cuda_graphs);
  }
};

// A lexical shortlist for search (search/shortlist.h).
struct ShortlistOptions {
  std::string path;        // lexical table (nmt-align --aligner ibm2 --format lex); "": no shortlist
  int64_t best = 50;       // translations kept per source piece
  int64_t frequent = 100;  // the vocabulary's first (most frequent) pieces, always candidates

  bool operator==(const ShortlistOptions& o) const { return path == o.path && best == o.best && frequent == o.frequent; }
  // Throws nmt::UsageError naming the first option out of its range.
  void validate() const;
  // Throws nmt::UsageError for --shortlist-best or --shortlist-frequent set
  // by the user (named in `given`) without --shortlist.
  void validate_given(const GivenOptions& given) const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Shortlist";
    v(Field{"shortlist", "Lexical table (nmt-align --aligner ibm2 --format lex): search only the target pieces it "
                         "lists for the batch's source pieces, and the most frequent ones; faster, translations "
                         "may change slightly (check BLEU on a dev set)", g}, s.path);
    v(Field{"shortlist-best", "Translations per source piece taken from the table", g}.within(1, 1 << 20), s.best);
    v(Field{"shortlist-frequent", "The vocabulary's first N pieces are always candidates", g}.within(0, 1 << 30),
      s.frequent);
  }
};

struct TranslateOptions {
  SearchOptions search;
  ShortlistOptions shortlist;
  int64_t batch_sentences = 64;
  int64_t batch_tokens = 0;
  int64_t max_input_length = 1000;
  bool int8 = false;  // the decoder step's products in dynamic int8 on the CPU (model/quantized.h): faster, logits ~1% off
  bool bf16 = false;  // the decoder step's products in bfloat16 on the CPU (model/quantized.h): faster, logits ~0.5% off
  // CPU: batches translated at once, each on one thread (0: as many as there
  // are intra-op threads; 1: one batch at a time over all threads). Small
  // batches' products use one core well and two poorly, so the cores go to
  // separate batches when there are several (Marian's --cpu-threads).
  int64_t parallel_batches = 0;

  // Throws nmt::Error naming the first option out of its range (search included).
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    SearchOptions::fields(s.search, v);
    const char* g = "Batching";
    v(Field{"batch-sentences", "Sentences per batch at most", g, nullptr, 0, "batch-size"}.within(1, 1 << 20), s.batch_sentences);
    v(Field{"batch-tokens", "Padded tokens per batch, sentences x the longest source, as nmt-train counts them "
                            "(the target is not known yet) (0: no budget)", g}.at_least(0), s.batch_tokens);
    v(Field{"max-input-length", "Crop longer inputs to this many pieces (0: never)", g}.within(0, 1 << 20),
      s.max_input_length);
    v(Field{"parallel-batches", "CPU: translate this many batches at once, one thread each (0: one per thread; "
                                "1: a batch at a time over all threads)", g}.within(0, 1024), s.parallel_batches);
    v(Field{"int8", "CPU: the decoder step's matrix products in int8 (dynamic quantization): faster, translations may change "
                    "slightly (check BLEU on a dev set)", "Search"}, s.int8);
    v(Field{"bf16", "CPU: the decoder step's matrix products in bfloat16 (fast with AVX512-BF16): faster, translations may "
                    "change slightly (check BLEU on a dev set)", "Search"}, s.bf16);
    ShortlistOptions::fields(s.shortlist, v);
  }
};

// Rescoring of the beam's hypotheses (translate/rescorer.h): right-to-left
// models (trained on targets with each line's words reversed) score every
// hypothesis read backwards, channel models (trained in the other direction,
// target to source) score the source given it, and the mix picks the
// translation. Off without either.
struct RescoreOptions {
  std::vector<std::string> r2l_models;      // checkpoints of right-to-left models (several: an ensemble)
  std::vector<std::string> channel_models;  // checkpoints of target-to-source models (several: an ensemble)
  double r2l_weight = 0.5;                  // w: the mix is (1 - w) * log P_l2r + w * log P_r2l (0 without r2l_models)
  double channel_weight = 0.5;              // c: plus c * log P_channel(source | hypothesis)
  double length_exponent = 1.0;             // a: the mix is divided by ((5 + words + 1) / 6)^a

  bool enabled() const { return !r2l_models.empty() || !channel_models.empty(); }
  // Throws nmt::UsageError naming the first option out of its range.
  void validate() const;
  // Throws nmt::UsageError for a weight or the exponent set by the user
  // (named in `given`) without the models it applies to.
  void validate_given(const GivenOptions& given) const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Rescoring";
    v(Field{"r2l-model", "Right-to-left model (trained on targets with each line's words reversed; repeat for an "
                         "ensemble): rescores the beam's hypotheses, read backwards, and picks each translation by "
                         "the mix of both directions", g, nullptr, kMultiple},
      s.r2l_models);
    v(Field{"channel-model", "Channel model (trained from target to source: de-en for en-de; repeat for an "
                             "ensemble): adds log P(source | hypothesis) to the mix that picks each translation "
                             "from the beam (noisy-channel reranking)", g, nullptr, kMultiple},
      s.channel_models);
    v(Field{"r2l-weight", "With --r2l-model: weight w of the right-to-left log-probability; the mix is "
                          "(1 - w) log P(left-to-right) + w log P(right-to-left)", g}.within(0.0, 1.0),
      s.r2l_weight);
    v(Field{"channel-weight", "With --channel-model: weight c of log P(source | hypothesis), added to the mix",
            g}.within(0.0, 10.0),
      s.channel_weight);
    v(Field{"r2l-length-exponent", "With --r2l-model or --channel-model: the mix is divided by "
                                   "((5 + words + 1) / 6)^a, a this exponent (0: not normalized)", g}.within(0.0, 10.0),
      s.length_exponent);
  }
};

// Minimum Bayes-risk selection over the beam's list (translate/mbr.h): each
// hypothesis h_i is scored by its expected utility against the others,
// sum_j p_j u(h_i, h_j), with p_j = softmax(score_j / T) over the list (score
// the search's length-normalized one, or the rescoring's mix), and the list
// is reordered by it. Off with utility none.
struct MbrOptions {
  MbrUtility utility = MbrUtility::kNone;  // u: sentence BLEU, sentence chrF2, or none (off)
  double temperature = 1.0;                // T: higher spreads the evidence over more of the list

  bool enabled() const { return utility != MbrUtility::kNone; }
  // Throws nmt::UsageError for --mbr-temperature set by the user (named in
  // `given`) without --mbr, or --mbr with a default beam (`beam_size`) of 1.
  void validate(int64_t beam_size, const GivenOptions& given) const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Minimum Bayes risk";
    v(Field{"mbr", "Pick each translation from the beam's list by minimum Bayes risk: the hypothesis of the highest "
                   "expected utility against the others, weighted by their probabilities (bleu: sentence BLEU, chrf: "
                   "sentence chrF2; none: off)", g},
      s.utility);
    v(Field{"mbr-temperature", "With --mbr: the hypotheses' weights are softmax(score / T) over the list, T this "
                               "temperature (score: the length-normalized score, or the rescoring's mix)",
            g}.within(1e-3, 1e3),
      s.temperature);
  }
};

// Throws nmt::UsageError unless `weights` is empty (all equal) or holds one
// weight per checkpoint of `paths`, each above 0 and at most 1e6, for two or
// more checkpoints (one model has nothing to weigh), naming the first problem.
void validate_ensemble_weights(const std::vector<double>& weights, const std::vector<std::string>& paths);

// What nmt-translate does: streaming translation, or scoring given pairs.
struct StreamOptions {
  std::vector<std::string> model_paths;  // several: an ensemble (log-probabilities averaged per step)
  std::vector<double> ensemble_weights;  // one per model_paths entry: a weighted mean (empty: all equal)
  std::string input;          // "" or "-": stdin. In score mode: TSV source<TAB>target
  std::string output;         // "" or "-": stdout; a file is replaced whole at the end (io.h: OutputFile)
  TranslateOptions translate;
  RescoreOptions rescore;
  MbrOptions mbr;
  int64_t window = 1000;
  int64_t max_line_bytes = 1 << 16;
  bool scores = false;
  bool replace_unk = false;
  bool score_mode = false;
  bool info = false;          // print what each -m checkpoint holds and stop
  bool evaluate = false;      // score the input (translations made elsewhere) against reference; no model
  std::string src, tgt;
  std::vector<std::string> references;  // one file per reference translation (several: multi-reference BLEU, chrF)
  std::string scores_json;
  ScoreFormat score_format = ScoreFormat::kText;  // how --evaluate prints its scores on its output
  bool bleu_lowercase = false;        // --lowercase: the main BLEU lowercases first (sacreBLEU -lc)
  BleuTokenizer bleu_tokenize = BleuTokenizer::k13a;  // --tokenize: the main BLEU's tokenizer
  bool confidence = false;            // the BLEU and chrF of --reference with their bootstrap estimates
  std::string baseline;               // another system's output of the same input: a paired bootstrap test
  int64_t bootstrap_samples = 1000;   // resampled test sets of --confidence and --baseline
  RuntimeOptions runtime;
  GivenOptions given;  // the options the user set (the app fills it): resolved() reads it
  GivenOptions typed;  // those set on the command line, not in a config file (the app fills it)

  // These options with the defaults that depend on which were given filled
  // in (SearchOptions::resolve_beam, except with --score-pairs, which
  // searches nothing). Never throws.
  StreamOptions resolved() const;
  // Throws nmt::UsageError naming the first option out of its range
  // (translate options included), in conflict with another, required and
  // missing (-m, except with --evaluate), or typed on the command line for a
  // mode that never reads it: a translation option (search, shortlist,
  // batching, precision) with --evaluate or --info, and one other than
  // --batch-sentences with --score-pairs. A config file may hold them (a
  // system file: -c system.toml --info).
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v);
};

// StreamOptions' fields, in the order --help lists them.
template <class S, class V>
void StreamOptions::fields(S& s, V&& v) {
  const char* io = "Input and output";
  v(Field{"model", "Checkpoint (.ckpt) written by nmt-train; repeat for an ensemble", io, "-m", kMultiple},
    s.model_paths);
  v(Field{"ensemble-weights", "With several -m: each model's weight, in -m's order, in the ensemble's mean of "
                              "log-probabilities (sum w_i log p_i / sum w_i; Marian's --weights); default all equal",
          io, nullptr, kMultiple},
    s.ensemble_weights);
  v(Field{"info", "Print what each -m checkpoint holds (format, parameters, vocabularies, step, best validation "
                  "figure, model options) and exit", io},
    s.info);
  v(Field{"input", "Input file (default: stdin)", io, "-i"}, s.input);
  v(Field{"output", "Output file (default: stdout)", io, "-o"}, s.output);
  v(Field{"window", "Lines read and sorted together (fewer when the input pauses)", io}.within(1, 1 << 20), s.window);
  v(Field{"max-line-bytes", "Crop longer input lines to this many bytes (score mode: an error)", io}
        .within(1, int64_t{1} << 30),
    s.max_line_bytes);
  v(Field{"with-scores", "Append ' ||| score' (length-normalized log-probability) to each translation", io,
          nullptr, 0, "scores"},
    s.scores);
  v(Field{"replace-unk", "Replace generated <unk> by the most attended source piece", io}, s.replace_unk);
  TranslateOptions::fields(s.translate, v);
  RescoreOptions::fields(s.rescore, v);
  MbrOptions::fields(s.mbr, v);
  const char* sc = "Scoring";
  v(Field{"score-pairs", "Score given translations: print log P(target | source) per pair (input: TSV, or --src/--tgt)",
          sc, nullptr, 0, "score"},
    s.score_mode);
  v(Field{"evaluate", "Score the input, translations made elsewhere, against --reference (no model; as sacreBLEU)",
          sc},
    s.evaluate);
  v(Field{"src", "Score mode: source file", sc}, s.src);
  v(Field{"tgt", "Score mode: target file", sc}, s.tgt);
  v(Field{"reference", "Score the output against this file (repeat for several references): BLEU as "
                       "--tokenize/--lowercase say, and cased 13a, -lc and --tokenize none besides, chrF, exact "
                       "match; logged on stderr, and with --evaluate printed on the output", sc, nullptr, kMultiple},
    s.references);
  v(Field{"tokenize", "With --reference: BLEU's tokenizer, as sacreBLEU's --tokenize: 13a, intl, char or none", sc},
    s.bleu_tokenize);
  v(Field{"lowercase", "With --reference: BLEU lowercases both sides first (sacreBLEU -lc)", sc}, s.bleu_lowercase);
  v(Field{"scores-json", "With --reference: also write the scores and signatures to this JSON file", sc},
    s.scores_json);
  v(Field{"score-format", "--evaluate prints its scores as sacreBLEU does: text (its BLEU and chrF lines) or json "
                          "(the objects of sacrebleu -f json)", sc},
    s.score_format);
  v(Field{"confidence", "With --reference: BLEU and chrF with the mean and 95% interval of their scores on "
                        "resampled test sets (bootstrap resampling; sacreBLEU's --confidence)", sc},
    s.confidence);
  v(Field{"baseline", "With --reference: another system's output of the same input; paired bootstrap resampling "
                      "(sacreBLEU's --paired-bs) gives the p-value of the two scoring alike, and both systems' "
                      "estimates", sc},
    s.baseline);
  v(Field{"bootstrap-samples", "Resampled test sets of --confidence and --baseline", sc}.within(1, 1000000),
    s.bootstrap_samples);
  RuntimeOptions::fields(s.runtime, v);
}

}  // namespace nmt
