// The scores of nmt-translate's output (or --evaluate's input) against
// --reference: sacreBLEU's BLEU figures and chrF, exact match, their
// bootstrap estimates (--confidence, --baseline), logged, printed and
// written as JSON.
#pragma once
#include <string>
#include <vector>

#include "base/translate_options.h"
#include "io/io.h"
#include "tools/translate_stream.h"

namespace nmt {

// The reference files, each read whole. Throws nmt::Error naming a file
// that cannot be read or holds a bad line.
std::vector<std::vector<std::string>> read_references(const StreamOptions& opt);

// Throws nmt::Error naming the first reference file whose line count is not `lines`.
void check_reference_lines(const StreamOptions& opt, const std::vector<std::vector<std::string>>& refs,
                           int64_t lines);

// Scores `outputs` against `refs` (one stream per reference file): BLEU as
// opt.bleu_tokenize and opt.bleu_lowercase say, and besides it the ways
// papers report BLEU (sacreBLEU's -lc, and --tokenize none, i.e. multi-bleu
// on tokenized text), plus chrF2 and exact match; logs each with its
// signature, fills `sum`, writes the same as one JSON object to
// opt.scores_json when set (atomically), and, given `out`, prints the chosen
// BLEU and chrF there in opt.score_format (sacreBLEU's lines or its JSON).
// With opt.confidence or opt.baseline the chosen BLEU and chrF carry their
// bootstrap estimates (text/significance.h, one set of draws for all), and
// a baseline's scores, tested against theirs, follow: "baseline: " lines,
// or in JSON {"system": [...], "baseline": [...]}. Throws nmt::Error if the
// JSON file cannot be written, or naming opt.baseline when it cannot be
// read, holds a bad line or has another line count than `outputs`.
void write_scores(const std::vector<std::string>& outputs, const std::vector<std::vector<std::string>>& refs,
                  const StreamOptions& opt, StreamSummary* sum, OutputFile* out = nullptr);

}  // namespace nmt
