// What BLEU and chrF share (see metrics.h): the signatures' version, the
// reference layout, sacreBLEU's JSON output, and exact match. BLEU is in
// metrics_bleu.cc, chrF in metrics_chrf.cc, the tokenizers in
// metrics_tokenize.cc.
#include "text/metrics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "base/format.h"
#include "base/json.h"
#include "text/metrics_internal.h"

namespace nmt {
namespace metrics_detail {

std::string format(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, a);
  return buf;
}

// Checks the layout of `ref_streams` against `hyps` (`who` names the caller
// in messages). Throws nmt::Error if there are no streams or one differs in size.
void check_streams(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                   const char* who) {
  if (ref_streams.empty()) throw Error(std::string(who) + ": no reference streams given");
  for (size_t k = 0; k < ref_streams.size(); ++k)
    if (ref_streams[k].size() != hyps.size())
      throw Error(std::string(who) + ": " + std::to_string(hyps.size()) + " hypotheses but reference stream " +
                  std::to_string(k) + " has " + std::to_string(ref_streams[k].size()) + " segments");
}

// The references of segment i, as sacreBLEU's Metric._cache_references keeps
// them: the non-empty ones; when all are empty, one empty reference (nmt
// scores such a segment where sacreBLEU stops). `counts` collects how many
// each segment has, for the signature's nrefs.
std::vector<const std::string*> segment_refs(const std::vector<std::vector<std::string>>& ref_streams, size_t i,
                                             std::vector<size_t>* counts) {
  std::vector<const std::string*> refs;
  for (const auto& stream : ref_streams)
    if (!stream[i].empty()) refs.push_back(&stream[i]);
  if (refs.empty()) refs.push_back(&ref_streams.front()[i]);
  counts->push_back(refs.size());
  return refs;
}

// nrefs of a signature: the count every segment has, or -1 ("var") when they differ.
int common_count(const std::vector<size_t>& counts, size_t streams) {
  if (counts.empty()) return static_cast<int>(streams);
  for (size_t c : counts)
    if (c != counts.front()) return -1;
  return static_cast<int>(counts.front());
}

std::string nrefs_text(int nrefs) { return nrefs < 0 ? "var" : std::to_string(nrefs); }

namespace {

// Python's repr of float(f'{score:.2f}'), as json.dumps writes it: "35.2", "100.0", "0.0".
std::string json_score(double score) {
  std::string text = shortest_decimal(std::strtod(format("%.2f", score).c_str(), nullptr));
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

// sacreBLEU's Score.format(is_json=True): json.dumps(d, indent=1, ensure_ascii=False)
// of name, score, signature, with an estimate confidence_mean,
// confidence_var and confidence (and p_value against a baseline),
// verbose_score (when there is one) and the signature's fields as strings.
std::string score_json(const std::string& name, double score, const std::string& signature,
                       const std::string& verbose, const ScoreConfidence& confidence) {
  std::string out = "{\n \"name\": " + json_string(name) + ",\n \"score\": " + json_score(score) +
                    ",\n \"signature\": " + json_string(signature);
  if (confidence.samples > 0) {
    out += ",\n \"confidence_mean\": " + json_score(confidence.mean) + ",\n \"confidence_var\": " +
           json_score(confidence.ci) + ",\n \"confidence\": " +
           json_string(format("\u03bc = %.2f", confidence.mean) + format(" \u00b1 %.2f", confidence.ci));
    if (confidence.p_value >= 0) out += ",\n \"p_value\": " + format("%.4f", confidence.p_value);
  }
  if (!verbose.empty()) out += ",\n \"verbose_score\": " + json_string(verbose);
  size_t start = 0;
  while (start <= signature.size()) {
    const size_t bar = std::min(signature.find('|', start), signature.size());
    const std::string field = signature.substr(start, bar - start);
    const size_t colon = field.find(':');
    out += ",\n " + json_string(field.substr(0, colon)) + ": " + json_string(field.substr(colon + 1));
    start = bar + 1;
  }
  return out + "\n}";
}

std::string bootstrap_fields(const ScoreConfidence& confidence) {
  if (confidence.samples <= 0) return "";
  return "|bs:" + std::to_string(confidence.samples) + "|seed:" + std::to_string(confidence.seed);
}

std::string confidence_text(const ScoreConfidence& confidence) {
  if (confidence.samples <= 0) return "";
  std::string out = format(" (\u03bc = %.2f", confidence.mean) + format(" \u00b1 %.2f)", confidence.ci);
  if (confidence.p_value >= 0) out += format(" (p = %.4f)", confidence.p_value);
  return out;
}

}  // namespace metrics_detail

using metrics_detail::check_streams;

const std::string& metrics_version() {
  static const std::string v = std::string("nmt-") + NMT_VERSION;
  return v;
}

std::string sacrebleu_json(const std::vector<std::string>& objects) {
  if (objects.size() == 1) return objects.front();
  std::string out = "[\n";
  for (size_t i = 0; i < objects.size(); ++i) out += (i > 0 ? ",\n" : "") + objects[i];
  return out + "\n]";
}

double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  if (hyps.size() != refs.size())
    throw Error(std::to_string(hyps.size()) + " hypotheses but " + std::to_string(refs.size()) +
                                " references");
  if (hyps.empty()) return 0.0;
  size_t same = 0;
  for (size_t i = 0; i < hyps.size(); ++i) same += hyps[i] == refs[i];
  return 100.0 * static_cast<double>(same) / static_cast<double>(hyps.size());
}

double exact_match_multiref(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams) {
  check_streams(hyps, ref_streams, "exact_match");
  if (hyps.empty()) return 0.0;
  size_t same = 0;
  for (size_t i = 0; i < hyps.size(); ++i)
    same += std::any_of(ref_streams.begin(), ref_streams.end(), [&](const auto& s) { return s[i] == hyps[i]; });
  return 100.0 * static_cast<double>(same) / static_cast<double>(hyps.size());
}

}  // namespace nmt
