// The scores of nmt-translate's output (or --evaluate's input) against
// --reference: sacreBLEU's BLEU figures and chrF, exact match, and their
// bootstrap estimates (--confidence; --baseline, a paired test against
// another system's output), logged, printed and written as JSON.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/translate_options.h"
#include "io/io.h"
#include "tools/translate_stream.h"

namespace nmt {

// What the output is scored against, each file read whole.
struct ScoringInputs {
  std::vector<std::vector<std::string>> refs;  // one stream per --reference file
  std::vector<std::string> baseline;           // --baseline's lines (none without it)
};

// Reads opt.references and opt.baseline. Throws nmt::Error naming a file
// that cannot be read or holds a bad line (file and line).
ScoringInputs read_scoring_inputs(const StreamOptions& opt);

// Throws nmt::Error naming the first reference file, or the baseline, whose
// line count is not `lines` (the output's).
void check_line_counts(const StreamOptions& opt, const ScoringInputs& in, int64_t lines);

// Scores `outputs` against in.refs: BLEU as opt.bleu_tokenize and
// opt.bleu_lowercase say, and besides it the ways papers report BLEU
// (sacreBLEU's -lc, and --tokenize none, i.e. multi-bleu on tokenized
// text), plus chrF2 and exact match; logs each with its signature, fills
// `sum`, writes the same as one JSON object to opt.scores_json when set
// (atomically), and, given `out`, prints the chosen BLEU and chrF there in
// opt.score_format (sacreBLEU's lines or its JSON). With opt.confidence or
// a baseline the chosen BLEU and chrF carry their bootstrap estimates
// (text/significance.h), and the baseline's scores, tested against theirs,
// follow: "baseline: " lines, or in JSON {"system": [...], "baseline":
// [...]}. `in` has the outputs' line count (check_line_counts). Throws
// nmt::Error if the JSON file cannot be written.
void write_scores(const std::vector<std::string>& outputs, const ScoringInputs& in, const StreamOptions& opt,
                  StreamSummary* sum, OutputFile* out = nullptr);

}  // namespace nmt
