// nmt-align's operations: the attention of a model reading a given target
// (forced) or producing its own translation (free), and the tool's run over
// a file of pairs. The matrices and their formats are in alignment.h.
#pragma once
#include <string>

#include "alignment.h"
#include "word_aligner.h"
#include "translator.h"

namespace nmt {

// Attention of the model while it reads `tgt` as the translation of `src`
// (teacher forcing). Row t holds the weights the model used to emit target
// token t (they are computed from the state before t, so no offset is
// needed). Throws nmt::Error for an empty side.
AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt);

// Attention while the model translates `src` with `search` (greedy or beam).
AttentionMatrix free_attention(Translator& tr, const std::string& src, const SearchOptions& search = {});

// What nmt-align does.
struct AlignRunOptions {
  std::string aligner = "attention";  // "attention" (a model's) or "ibm2" (statistical, word_aligner.h)
  std::string model_path;           // checkpoint (attention)
  std::string src, tgt;             // two files (tgt empty: free mode)
  std::string tsv;                  // or pairs as TSV ("-": stdin)
  std::string output;               // "" or "-": stdout; a file is replaced whole at the end (io.h)
  std::string format = "csv";       // "csv", "pharaoh" or "svg"
  std::string level = "subword";    // "subword" or "word" (csv, svg); pharaoh is always word level
  std::string output_dir;           // one NNNN.csv / NNNN.svg per pair instead of one stream
  std::string heatmap_dir;          // also write NNNN.svg heatmaps here
  HardMethod method = HardMethod::kArgmax;  // hard alignments (pharaoh, eval)
  double threshold = 0.5;           // for HardMethod::kThreshold
  int shift = 0;                    // target token t takes attention row t + shift (see shift_rows)
  std::string reverse_model;        // target->source checkpoint for symmetrization (forced mode)
  Symmetrization symmetrize = Symmetrization::kNone;  // how forward and reverse links combine
  std::string eval_gold;            // gold links file: print precision, recall, AER
  bool gold_one_based = false;      // gold indices start at 1 (NAACL 2003 .talp files)
  WordAlignerOptions ibm;           // ibm2: model options
  std::string ibm_train_src, ibm_train_tgt;  // ibm2: more pairs to learn from (not aligned or written)
  SearchOptions search;             // free mode
  int64_t max_pairs = 0;            // 0: all
  std::string device = "auto";
  int threads = 0;

  // Throws nmt::Error naming the first option out of its range or in
  // conflict with another.
  void validate() const;
};

// Longest input line nmt-align reads, in bytes (longer: an error at file:line).
constexpr size_t kAlignMaxLineBytes = size_t{1} << 20;

// Aligns every pair and writes the chosen format; with eval_gold, logs
// precision, recall and AER. Throws nmt::Error for bad options (before any
// work), bad files (named with the line; a gold link outside its sentence
// pair included), or a bad model; output files are then left as they were.
AerScore run_alignment(const AlignRunOptions& opt);

}  // namespace nmt
