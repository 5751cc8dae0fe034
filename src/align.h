// Attention matrices as alignments: the weights alpha_tj of a model reading
// a given target (forced) or producing its own translation (free), and their
// CSV form.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "translator.h"

namespace nmt {

struct AttentionMatrix {
  std::vector<std::string> src_tokens;  // source pieces, then "</s>"
  std::vector<std::string> tgt_tokens;  // target pieces emitted, then "</s>"
  std::vector<std::vector<float>> weights;  // [tgt_tokens][src_tokens]; each row sums to 1
};

// Attention of the model while it reads `tgt` as the translation of `src`
// (teacher forcing). Row t holds the weights used to emit target token t.
// Throws nmt::Error for an empty side.
AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt);

// Attention while the model translates `src` greedily.
AttentionMatrix free_attention(Translator& tr, const std::string& src);

// Writes one CSV block: a header row of source tokens (first cell empty),
// then one row per target token. Every token is quoted, with '"' doubled.
void write_csv(std::ostream& out, const AttentionMatrix& m);

// Quotes a CSV field: "a""b" for a"b.
std::string csv_quote(const std::string& s);

// What nmt-align does.
struct AlignRunOptions {
  std::string model_path;      // checkpoint
  std::string src, tgt;        // two files (tgt empty: free mode)
  std::string tsv;             // or pairs as TSV ("-": stdin)
  std::string output;          // "" or "-": stdout
  int64_t max_pairs = 0;       // 0: all
  std::string device = "auto";
  int threads = 0;
};

// Writes one CSV block per pair, blocks separated by an empty line. Throws
// nmt::Error for bad files (named with the line) or a bad model.
void run_alignment(const AlignRunOptions& opt);

}  // namespace nmt
