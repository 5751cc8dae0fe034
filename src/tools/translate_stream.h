// Streaming translation for nmt-translate: reads a window of lines, translates
// it in sorted batches, writes the window in input order and flushes, so the
// tool can sit in a pipe. Also forced-decoding scores (--score-pairs).
#pragma once
#include <string>
#include <vector>

#include "translate/translator.h"

namespace nmt {

struct StreamSummary {
  int64_t sentences = 0;
  int64_t output_tokens = 0;  // target pieces (SentencePiece), not words
  double seconds = 0;         // translating (or scoring) and writing only: neither loading the models nor
                              // waiting for input (a pipe) counts
  // With a reference (else -1): BLEU as --tokenize and --lowercase chose
  // (default: sacreBLEU's cased 13a), 13a BLEU with -lc, BLEU with --tokenize
  // none (multi-bleu on tokenized text), chrF2, exact match.
  double bleu = -1, bleu_lc = -1, bleu_none = -1, chrf = -1, exact_match = -1;
};

// Translates (or scores) input to output as `opt` says and logs a summary
// line, plus the scores against opt.references when given (logged on
// stderr, and written to opt.scores_json). Output: one line per input line;
// with n_best > 1, n lines in Moses' n-best form "i ||| hypothesis |||
// LogProb= L Length= N LengthPenalty= P ||| score" per input (i 0-based,
// best first, score = L / P; after rescoring the features add
// "L2R= F R2L= B CH= C Words= W", R2L and CH where their models ran, and
// score is their mix; after minimum Bayes-risk selection, opt.mbr, they add
// "MBR= U" and score is U, the expected utility). With opt.evaluate no model runs: the input's
// lines are scored and the output gets sacreBLEU's BLEU and chrF lines (or
// its JSON, opt.score_format). Memory stays bounded whatever the input
// (max_line_bytes, window). Throws nmt::UsageError for bad options (before
// any work), nmt::Error for a bad model, unreadable input (file and line
// named), unwritable output, or a reference or --baseline file whose line
// count differs from the input's; an output file is then left as it was
// (translating commits it before the scores, whose errors keep it).
StreamSummary translate_stream(const StreamOptions& opt);

}  // namespace nmt
