// Streaming translation for nmt-translate: reads a window of lines, translates
// it in sorted batches, writes the window in input order and flushes, so the
// tool can sit in a pipe. Also forced-decoding scores (--score).
#pragma once
#include <string>
#include <vector>

#include "translator.h"

namespace nmt {

struct StreamOptions {
  std::vector<std::string> model_paths;  // checkpoints to load; several: an ensemble (log-probabilities averaged per step)
  std::string input;          // "" or "-": stdin. In score mode: TSV source<TAB>target
  std::string output;         // "" or "-": stdout; a file is replaced whole at the end (io.h: OutputFile)
  TranslateOptions translate; // search and batching
  int64_t window = 1000;      // lines read, sorted and translated together
  int64_t max_line_bytes = 1 << 16;  // longer input lines are cropped (at a character boundary) and counted;
                                     // in score mode they are an error
  bool scores = false;        // append " ||| score" (the normalized score) to each line
  bool replace_unk = false;   // replace generated <unk> by the most attended source piece
  bool score_mode = false;    // print log P(target | source) per pair instead of translating
  std::string src, tgt;       // score mode: two files instead of a TSV input
  std::string device = "auto";
  int threads = 0;            // 0: NMT_THREADS or all cores
  std::string reference;      // when set, score the output against it (BLEU, chrF, exact match)
  std::string scores_json;    // with a reference: also write the scores and signatures here as JSON

  // Throws nmt::Error naming the first option out of its range
  // (translate options included).
  void validate() const;
};

struct StreamSummary {
  int64_t sentences = 0;
  int64_t output_tokens = 0;
  double seconds = 0;
  // With a reference (else -1): sacreBLEU's cased 13a BLEU, its -lc BLEU,
  // BLEU with --tokenize none (multi-bleu on tokenized text), chrF2, exact match.
  double bleu = -1, bleu_lc = -1, bleu_none = -1, chrf = -1, exact_match = -1;
};

// Translates (or scores) input to output as `opt` says and logs a summary
// line, plus the scores against opt.reference when given (and writes them
// to opt.scores_json). Output: one line
// per input line; with n_best > 1, n lines "i ||| hypothesis ||| score" per
// input (i 0-based, best first). Memory stays bounded whatever the input
// (max_line_bytes, window). Throws nmt::Error for bad options (before any
// work), a bad model, unreadable input (file and line named), unwritable
// output, or a reference whose line count differs from the input's; an
// output file is then left as it was.
StreamSummary translate_stream(const StreamOptions& opt);

}  // namespace nmt
