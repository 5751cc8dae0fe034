// What the metric files share (private to src/text/metrics*.cc): the
// reference layout of sacreBLEU's multi-reference scores, signature and JSON
// formatting.
#pragma once
#include <string>
#include <vector>

#include "text/metrics.h"

namespace nmt::metrics_detail {

// printf's `fmt` (one double conversion) of `a`, as Python's % formats it.
// Never throws (beyond std::bad_alloc).
std::string format(const char* fmt, double a);

// Checks the layout of `ref_streams` against `hyps` (`who` names the caller
// in messages). Throws nmt::Error if there are no streams or one differs in size.
void check_streams(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                   const char* who);

// The references of segment i, as sacreBLEU's Metric._cache_references keeps
// them: the non-empty ones; when all are empty, one empty reference (nmt
// scores such a segment where sacreBLEU stops). `counts` collects how many
// each segment has, for the signature's nrefs. Never throws (beyond std::bad_alloc).
std::vector<const std::string*> segment_refs(const std::vector<std::vector<std::string>>& ref_streams, size_t i,
                                             std::vector<size_t>* counts);

// nrefs of a signature: the count every segment has, or -1 ("var") when they differ.
int common_count(const std::vector<size_t>& counts, size_t streams);

// nrefs as a signature writes it: the number, or "var" for -1.
std::string nrefs_text(int nrefs);

// sacreBLEU's Score.format(is_json=True): json.dumps(d, indent=1, ensure_ascii=False)
// of name, score, signature, with an estimate (confidence.samples > 0)
// confidence_mean, confidence_var and confidence (and p_value against a
// baseline), verbose_score (when there is one) and the signature's fields
// as strings. Never throws (beyond std::bad_alloc).
std::string score_json(const std::string& name, double score, const std::string& signature,
                       const std::string& verbose, const ScoreConfidence& confidence);

// The signature's bootstrap fields, "|bs:N|seed:S" (sacreBLEU's order: after
// nrefs), or "" without an estimate.
std::string bootstrap_fields(const ScoreConfidence& confidence);

// What to_string() adds after the score: " (μ = MEAN ± CI)" and " (p = P)",
// or "" without an estimate.
std::string confidence_text(const ScoreConfidence& confidence);

}  // namespace nmt::metrics_detail
