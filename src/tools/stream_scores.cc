// The scores of an output against its references (stream_scores.h).
#include "tools/stream_scores.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "base/error.h"
#include "base/json.h"
#include "text/corpus.h"
#include "text/metrics.h"
#include "text/significance.h"

namespace nmt {

std::vector<std::vector<std::string>> read_references(const StreamOptions& opt) {
  std::vector<std::vector<std::string>> refs;
  for (const auto& path : opt.references) refs.push_back(read_lines(path));
  return refs;
}

void check_reference_lines(const StreamOptions& opt, const std::vector<std::vector<std::string>>& refs,
                           int64_t lines) {
  for (size_t k = 0; k < refs.size(); ++k)
    if (static_cast<int64_t>(refs[k].size()) != lines)
      throw Error(located(opt.references[k], 0, std::to_string(refs[k].size()) + " reference lines for " +
                                                    std::to_string(lines) + " input lines"));
}

namespace {

// The bootstrap estimates of `bleu` and `chrf`, the scores of `outputs`
// against `refs` with `bleu_opt` (opt.confidence, or a baseline), attached
// to them; with opt.baseline, the paired test against that file's lines,
// whose own scores (with their estimates) fill *baseline_bleu and
// *baseline_chrf. One set of draws serves all. Throws nmt::Error naming the
// baseline file when it cannot be read, holds a bad line, or has another
// line count than the outputs.
void attach_confidence(const std::vector<std::string>& outputs, const std::vector<std::vector<std::string>>& refs,
                       const BleuOptions& bleu_opt, const StreamOptions& opt, BleuScore* bleu, ChrfScore* chrf,
                       BleuScore* baseline_bleu, ChrfScore* baseline_chrf) {
  const BootstrapOptions boot{opt.bootstrap_samples, BootstrapOptions{}.seed};
  const auto draws = bootstrap_draws(outputs.size(), boot);
  const auto with = [&](ScoreConfidence* c, const BootstrapEstimate& e, double p) {
    *c = ScoreConfidence{boot.samples, boot.seed, e.mean, e.ci, p};
  };
  const SegmentStatistics bleu_stats = bleu_statistics(outputs, refs, bleu_opt), chrf_stats = chrf_statistics(outputs, refs);
  if (opt.baseline.empty()) {
    with(&bleu->confidence, estimate_of(resampled_scores(bleu_stats, draws)), -1);
    with(&chrf->confidence, estimate_of(resampled_scores(chrf_stats, draws)), -1);
    return;
  }
  std::vector<std::string> base = read_lines(opt.baseline);
  if (base.size() != outputs.size())
    throw Error(located(opt.baseline, 0, std::to_string(base.size()) + " baseline lines for " +
                                             std::to_string(outputs.size()) + " input lines"));
  *baseline_bleu = corpus_bleu_multiref(base, refs, bleu_opt);
  *baseline_chrf = corpus_chrf_multiref(base, refs);
  const PairedBootstrap b = paired_bootstrap(bleu_stats, bleu_statistics(base, refs, bleu_opt), draws);
  const PairedBootstrap c = paired_bootstrap(chrf_stats, chrf_statistics(base, refs), draws);
  with(&bleu->confidence, b.system_estimate, b.p_value);
  with(&chrf->confidence, c.system_estimate, c.p_value);
  with(&baseline_bleu->confidence, b.baseline_estimate, -1);
  with(&baseline_chrf->confidence, c.baseline_estimate, -1);
}

}  // namespace

void write_scores(const std::vector<std::string>& outputs, const std::vector<std::vector<std::string>>& refs,
                  const StreamOptions& opt, StreamSummary* sum, OutputFile* out) {
  const BleuOptions chosen{opt.bleu_lowercase, to_string(opt.bleu_tokenize)};
  BleuScore bleu = corpus_bleu_multiref(outputs, refs, chosen);
  const BleuScore bleu_lc = corpus_bleu_multiref(outputs, refs, BleuOptions{true, "13a"});
  const BleuScore bleu_none = corpus_bleu_multiref(outputs, refs, BleuOptions{false, "none"});
  ChrfScore chrf = corpus_chrf_multiref(outputs, refs);
  BleuScore baseline_bleu;
  ChrfScore baseline_chrf;
  const bool paired = !opt.baseline.empty();
  if (opt.confidence || paired)
    attach_confidence(outputs, refs, chosen, opt, &bleu, &chrf, &baseline_bleu, &baseline_chrf);
  sum->bleu = bleu.score;
  sum->bleu_lc = bleu_lc.score;
  sum->bleu_none = bleu_none.score;
  sum->chrf = chrf.score;
  sum->exact_match = exact_match_multiref(outputs, refs);
  spdlog::info("{} | {}", bleu.to_string(), bleu.signature());
  for (const BleuScore* b : {&bleu_lc, &bleu_none})  // the paper figures, unless that was the chosen one
    if (b->lowercase != bleu.lowercase || b->tokenize != bleu.tokenize)
      spdlog::info("{} | {}", b->to_string(), b->signature());
  spdlog::info("{} | {}", chrf.to_string(), chrf.signature());
  if (paired) {
    spdlog::info("baseline {}: {} | {}", opt.baseline, baseline_bleu.to_string(), baseline_bleu.signature());
    spdlog::info("baseline {}: {} | {}", opt.baseline, baseline_chrf.to_string(), baseline_chrf.signature());
  }
  spdlog::info("exact match = {:.2f}%", sum->exact_match);
  if (out != nullptr) {
    if (opt.score_format == ScoreFormat::kJson && paired)
      out->stream() << "{\"system\": " << sacrebleu_json({bleu.to_json(), chrf.to_json()}) << ",\n\"baseline\": "
                    << sacrebleu_json({baseline_bleu.to_json(), baseline_chrf.to_json()}) << "}\n";
    else if (opt.score_format == ScoreFormat::kJson)
      out->stream() << sacrebleu_json({bleu.to_json(), chrf.to_json()}) << '\n';
    else if (paired)
      out->stream() << bleu.to_string() << '\n' << chrf.to_string() << "\nbaseline: " << baseline_bleu.to_string()
                    << "\nbaseline: " << baseline_chrf.to_string() << '\n';
    else
      out->stream() << bleu.to_string() << '\n' << chrf.to_string() << '\n';
  }
  if (opt.scores_json.empty()) return;
  JsonObject json;
  json.add("sentences", static_cast<int64_t>(outputs.size()));
  const std::pair<const char*, const BleuScore*> bleus[] = {{"bleu", &bleu}, {"bleu_lc", &bleu_lc}, {"bleu_none", &bleu_none}};
  for (const auto& [name, b] : bleus)
    json.add(name, b->score, 10)
        .add(std::string(name) + "_signature", b->signature())
        .add(std::string(name) + "_detail", b->to_string());
  json.add("chrf", chrf.score, 10).add("chrf_signature", chrf.signature()).add("exact_match", sum->exact_match, 10);
  const std::pair<const char*, const ScoreConfidence*> estimates[] = {{"bleu", &bleu.confidence},
                                                                      {"chrf", &chrf.confidence}};
  for (const auto& [name, c] : estimates) {
    if (c->samples == 0) continue;
    json.add(std::string(name) + "_bootstrap_mean", c->mean, 10).add(std::string(name) + "_bootstrap_ci", c->ci, 10);
    if (paired) json.add(std::string(name) + "_p_value", c->p_value, 10);
  }
  if (paired)
    json.add("baseline", opt.baseline)
        .add("baseline_bleu", baseline_bleu.score, 10)
        .add("baseline_chrf", baseline_chrf.score, 10);
  write_file_atomic(opt.scores_json, json.str() + "\n");
}

}  // namespace nmt
