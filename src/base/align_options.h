// The options of nmt-align with their field lists (fields.h) and ranges: the
// statistical aligner (WordAlignerOptions) and the run (AlignRunOptions).
#pragma once
#include <cstdint>
#include <string>

#include "base/fields.h"
#include "base/option_enums.h"
#include "base/runtime_options.h"
#include "base/translate_options.h"

namespace nmt {

// The statistical word aligner: IBM model 2 with a diagonal prior, then
// optionally the HMM alignment model started from its lexical table.
struct WordAlignerOptions {
  int iterations = 5;             // EM iterations of IBM model 2
  bool hmm = false;               // then train the HMM (nmt-align --aligner hmm sets it)
  int hmm_iterations = 5;         // EM iterations of the HMM
  double null_prob = 0.08;        // p0: prior probability that a target word links to no source word
  double diagonal_tension = 4.0;  // lambda in exp(-lambda |i/n - j/m|)
  double alpha = 0.01;            // Dirichlet prior of variational Bayes on t(f|e); 0: plain maximum likelihood
  bool agreement = false;         // train both directions together (WordAligner::train_in_agreement)

  // Throws nmt::Error naming the first option out of its range.
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "ibm2 and hmm aligners";
    v(Field{"ibm-iterations", "EM iterations of IBM model 2 (hmm: before its own)", g}.within(1, 1000), s.iterations);
    v(Field{"hmm-iterations", "hmm: EM iterations of the HMM, started from IBM model 2's word translations", g}
          .within(1, 1000),
      s.hmm_iterations);
    v(Field{"ibm-tension", "Preference for links near the diagonal", g}.within(0.0, 1000.0), s.diagonal_tension);
    v(Field{"ibm-null-prob", "Prior probability that a target word links to no source word", g}
          .within(0.0, 1.0, End::kOpen, End::kOpen),
      s.null_prob);
    v(Field{"ibm-alpha", "Dirichlet prior on t(f|e) (variational Bayes; 0: maximum likelihood)", g}.at_least(0.0),
      s.alpha);
    v(Field{"ibm-agreement",
            "With --symmetrize: train both directions together, each counting a link by the product of both "
            "directions' posteriors (alignment by agreement)",
            g},
      s.agreement);
  }
};

// What nmt-align does.
struct AlignRunOptions {
  Aligner aligner = Aligner::kAttention;
  std::string model_path;
  std::string src, tgt;             // two files (tgt empty: free mode)
  std::string tsv;                  // or pairs as TSV ("-": stdin)
  std::string pairs;                // or pairs as fast_align's "source ||| target" lines ("-": stdin)
  std::string output;               // "" or "-": stdout; a file is replaced whole at the end (io.h)
  AlignFormat format = AlignFormat::kCsv;
  AlignLevel level = AlignLevel::kSubword;  // csv, svg; pharaoh is always word level
  std::string output_dir;
  std::string heatmap_dir;
  HardMethod method = HardMethod::kArgmax;  // hard alignments (pharaoh, eval)
  double threshold = 0.5;
  int shift = 0;                    // target token t takes attention row t + shift (see shift_rows)
  std::string reverse_model;
  Symmetrization symmetrize = Symmetrization::kNone;
  std::string eval_gold;
  bool gold_one_based = false;
  WordAlignerOptions ibm;
  std::string ibm_train_src, ibm_train_tgt;  // ibm2, hmm: more pairs to learn from (not aligned or written)
  int64_t lex_best = 100;           // --format lex: translations written per source piece
  SearchOptions search;             // free mode
  int64_t max_pairs = 0;
  // Each side of a pair is cropped to this many pieces (0: never): the
  // attention matrices grow with the product of the two sides' lengths.
  int64_t max_input_length = 1000;
  RuntimeOptions runtime;
  GivenOptions given;  // the options the user set (the app fills it): resolved() reads it

  // These options with the defaults that depend on which were given filled
  // in: the statistical aligners, which give links only, write them as Pharaoh
  // lines unless --format was given. Never throws.
  AlignRunOptions resolved() const;
  // Throws nmt::UsageError naming the first option out of its range, in
  // conflict with another, or required and missing (-m for the attention
  // aligner, --tgt where the mode needs the target).
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v);
};

// AlignRunOptions' fields, in the order --help lists them.
template <class S, class V>
void AlignRunOptions::fields(S& s, V&& v) {
  const char* in = "Input";
  v(Field{"model", "Checkpoint (.ckpt) written by nmt-train", in, "-m"}, s.model_path);
  v(Field{"aligner", "attention (the model's), ibm2 (statistical, fast_align-style) or hmm (statistical: IBM model 2, "
                     "then the HMM alignment model); ibm2 and hmm need no model, except for --format lex", in},
    s.aligner);
  v(Field{"src", "Source sentences, one per line", in}, s.src);
  v(Field{"tgt", "Target sentences (forced mode); without it the model translates (free mode)", in}, s.tgt);
  v(Field{"tsv", "Pairs as source<TAB>target lines ('-': stdin)", in}, s.tsv);
  v(Field{"pairs", "Pairs as fast_align's 'source ||| target' lines ('-': stdin, read when no other input is given)",
          in},
    s.pairs);
  v(Field{"max-pairs", "Align at most N pairs (0: all)", in, "-n"}.at_least(0), s.max_pairs);
  v(Field{"max-input-length", "Crop each side of a pair to this many pieces, after its last whole word that fits "
                              "(0: never); the attention aligner only", in}.within(0, 1 << 20),
    s.max_input_length);
  v(Field{"beam-size", "Free mode: beam size (1: greedy)", in, "-b"}, s.search.beam_size);  // range: SearchOptions

  v(Field{"reverse-model", "Target->source checkpoint whose links are combined with --symmetrize (forced mode)", in},
    s.reverse_model);
  v(Field{"ibm-train-src", "ibm2, hmm: more source sentences to learn from (not aligned)", in}, s.ibm_train_src);
  v(Field{"ibm-train-tgt", "ibm2, hmm: their target sentences", in}, s.ibm_train_tgt);
  WordAlignerOptions::fields(s.ibm, v);
  const char* out = "Output";
  v(Field{"output", "Output file (default: stdout)", out, "-o"}, s.output);
  v(Field{"format",
          "csv (a matrix block per pair), tidy (one CSV table, a row per cell: pair,tgt_index,tgt_token,src_index,"
          "src_token,weight), pharaoh (word links i-j; free mode: translation ||| links), svg (heatmaps) or lex "
          "(ibm2, hmm: the lexical table over --model's pieces, for nmt-translate --shortlist); default csv, "
          "pharaoh for ibm2 and hmm",
          out, "-f"},
    s.format);
  v(Field{"lex-best", "--format lex: the N most probable translations of each source piece", out}.within(1, 1 << 20),
    s.lex_best);
  v(Field{"level", "Matrices over subword pieces or words (pieces merged: sum over source, mean over target)", out},
    s.level);
  v(Field{"output-dir", "Write one NNNN.csv (or NNNN.svg) per pair into this folder", out}, s.output_dir);
  v(Field{"heatmap", "Also write an NNNN.svg heatmap per pair into this folder", out}, s.heatmap_dir);
  const char* links = "Links";
  v(Field{"method", "Hard links: argmax (most attended source word per target word; ibm2, hmm: the most probable "
                    "link, NULL included) or threshold", links},
    s.method);
  v(Field{"threshold", "Weight (ibm2, hmm: link posterior) at or above which a word pair links (--method threshold)",
          links}.within(0.0, 1.0),
    s.threshold);
  v(Field{"shift", "Target token t takes the attention row of step t+N (the model reads y_t two steps later)", links}
        .within(0, 4),
    s.shift);
  v(Field{"symmetrize", "Combine with --reverse-model (ibm2, hmm: with the other direction): intersection, union, "
                        "grow-diag, grow-diag-final, grow-diag-final-and, or average (mean of both matrices; ibm2, "
                        "hmm: of both directions' link posteriors)", links},
    s.symmetrize);
  v(Field{"eval-gold", "Gold links (i-j sure, i?j possible): print precision, recall, AER", links}, s.eval_gold);
  v(Field{"gold-one-based", "Gold indices start at 1 (NAACL 2003 .talp files)", links}, s.gold_one_based);
  RuntimeOptions::fields(s.runtime, v);
}

}  // namespace nmt
