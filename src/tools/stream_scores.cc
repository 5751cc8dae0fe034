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

ScoringInputs read_scoring_inputs(const StreamOptions& opt) {
  ScoringInputs in;
  for (const auto& path : opt.references) in.refs.push_back(read_lines(path));
  if (!opt.baseline.empty()) in.baseline = read_lines(opt.baseline);
  return in;
}

void check_line_counts(const StreamOptions& opt, const ScoringInputs& in, int64_t lines) {
  const auto check = [&](const std::string& path, size_t have, const char* what) {
    if (static_cast<int64_t>(have) != lines)
      throw Error(located(path, 0, std::to_string(have) + " " + what + " lines for " + std::to_string(lines) +
                                       " input lines"));
  };
  for (size_t k = 0; k < in.refs.size(); ++k) check(opt.references[k], in.refs[k].size(), "reference");
  if (!opt.baseline.empty()) check(opt.baseline, in.baseline.size(), "baseline");
}

namespace {

// The output's chosen BLEU and chrF, and with a baseline the baseline's.
struct Chosen {
  BleuScore bleu, baseline_bleu;
  ChrfScore chrf, baseline_chrf;
  bool paired = false;
};

// Attaches to c's scores (of `outputs` against in.refs, BLEU with
// `bleu_opt`) their bootstrap estimates, and with a baseline the paired
// test against it, whose own scores and estimates fill c's baseline
// fields. Every estimate is over the same draws (opt.bootstrap_samples,
// BootstrapOptions' seed). Throws nmt::Error as bootstrap resampling does.
void attach_confidence(const std::vector<std::string>& outputs, const ScoringInputs& in, const BleuOptions& bleu_opt,
                       const StreamOptions& opt, Chosen* c) {
  const BootstrapOptions boot{opt.bootstrap_samples, BootstrapOptions{}.seed};
  const auto with = [&](ScoreConfidence* conf, const BootstrapEstimate& e, double p) {
    *conf = ScoreConfidence{boot.samples, boot.seed, e.mean, e.ci, p};
  };
  const SegmentStatistics bleu = bleu_statistics(outputs, in.refs, bleu_opt), chrf = chrf_statistics(outputs, in.refs);
  if (!c->paired) {
    with(&c->bleu.confidence, estimate_of(resampled_scores(bleu, boot)), -1);
    with(&c->chrf.confidence, estimate_of(resampled_scores(chrf, boot)), -1);
    return;
  }
  c->baseline_bleu = corpus_bleu_multiref(in.baseline, in.refs, bleu_opt);
  c->baseline_chrf = corpus_chrf_multiref(in.baseline, in.refs);
  const PairedBootstrap b = paired_bootstrap(bleu, bleu_statistics(in.baseline, in.refs, bleu_opt), boot);
  const PairedBootstrap f = paired_bootstrap(chrf, chrf_statistics(in.baseline, in.refs), boot);
  with(&c->bleu.confidence, b.system_estimate, b.p_value);
  with(&c->chrf.confidence, f.system_estimate, f.p_value);
  with(&c->baseline_bleu.confidence, b.baseline_estimate, -1);
  with(&c->baseline_chrf.confidence, f.baseline_estimate, -1);
}

// Prints c's scores on `out` in opt.score_format. Throws only what the stream throws.
void print_scores(const Chosen& c, const StreamOptions& opt, OutputFile* out) {
  std::ostream& o = out->stream();
  if (opt.score_format == ScoreFormat::kJson && c.paired)
    o << "{\"system\": " << sacrebleu_json({c.bleu.to_json(), c.chrf.to_json()}) << ",\n\"baseline\": "
      << sacrebleu_json({c.baseline_bleu.to_json(), c.baseline_chrf.to_json()}) << "}\n";
  else if (opt.score_format == ScoreFormat::kJson)
    o << sacrebleu_json({c.bleu.to_json(), c.chrf.to_json()}) << '\n';
  else if (c.paired)
    o << c.bleu.to_string() << '\n' << c.chrf.to_string() << "\nbaseline: " << c.baseline_bleu.to_string()
      << "\nbaseline: " << c.baseline_chrf.to_string() << '\n';
  else
    o << c.bleu.to_string() << '\n' << c.chrf.to_string() << '\n';
}

// Writes the scores to opt.scores_json (atomically): each BLEU figure with
// its signature and line, chrF, exact match, and where estimated the
// bootstrap means and half-intervals, the p-values and the baseline's
// scores. Throws nmt::Error if the file cannot be written.
void write_scores_json(const std::vector<std::pair<const char*, const BleuScore*>>& bleus, const Chosen& c,
                       const StreamOptions& opt, const StreamSummary& sum) {
  JsonObject json;
  json.add("sentences", sum.sentences);
  for (const auto& [name, b] : bleus)
    json.add(name, b->score, 10)
        .add(std::string(name) + "_signature", b->signature())
        .add(std::string(name) + "_detail", b->to_string());
  json.add("chrf", c.chrf.score, 10).add("chrf_signature", c.chrf.signature()).add("exact_match", sum.exact_match, 10);
  for (const auto& [name, conf] : {std::pair<const char*, const ScoreConfidence*>{"bleu", &c.bleu.confidence},
                                   {"chrf", &c.chrf.confidence}}) {
    if (conf->samples == 0) continue;
    json.add(std::string(name) + "_bootstrap_mean", conf->mean, 10)
        .add(std::string(name) + "_bootstrap_ci", conf->ci, 10);
    if (c.paired) json.add(std::string(name) + "_p_value", conf->p_value, 10);
  }
  if (c.paired)
    json.add("baseline", opt.baseline)
        .add("baseline_bleu", c.baseline_bleu.score, 10)
        .add("baseline_chrf", c.baseline_chrf.score, 10);
  write_file_atomic(opt.scores_json, json.str() + "\n");
}

}  // namespace

void write_scores(const std::vector<std::string>& outputs, const ScoringInputs& in, const StreamOptions& opt,
                  StreamSummary* sum, OutputFile* out) {
  const BleuOptions chosen{opt.bleu_lowercase, to_string(opt.bleu_tokenize)};
  Chosen c;
  c.bleu = corpus_bleu_multiref(outputs, in.refs, chosen);
  c.chrf = corpus_chrf_multiref(outputs, in.refs);
  c.paired = !opt.baseline.empty();
  const BleuScore bleu_lc = corpus_bleu_multiref(outputs, in.refs, BleuOptions{true, "13a"});
  const BleuScore bleu_none = corpus_bleu_multiref(outputs, in.refs, BleuOptions{false, "none"});
  if (opt.confidence || c.paired) attach_confidence(outputs, in, chosen, opt, &c);
  sum->bleu = c.bleu.score;
  sum->bleu_lc = bleu_lc.score;
  sum->bleu_none = bleu_none.score;
  sum->chrf = c.chrf.score;
  sum->exact_match = exact_match_multiref(outputs, in.refs);
  spdlog::info("{} | {}", c.bleu.to_string(), c.bleu.signature());
  for (const BleuScore* b : {&bleu_lc, &bleu_none})  // the paper figures, unless that was the chosen one
    if (b->lowercase != c.bleu.lowercase || b->tokenize != c.bleu.tokenize)
      spdlog::info("{} | {}", b->to_string(), b->signature());
  spdlog::info("{} | {}", c.chrf.to_string(), c.chrf.signature());
  if (c.paired) {
    spdlog::info("baseline {}: {} | {}", opt.baseline, c.baseline_bleu.to_string(), c.baseline_bleu.signature());
    spdlog::info("baseline {}: {} | {}", opt.baseline, c.baseline_chrf.to_string(), c.baseline_chrf.signature());
  }
  spdlog::info("exact match = {:.2f}%", sum->exact_match);
  if (out != nullptr) print_scores(c, opt, out);
  StreamSummary counted = *sum;
  counted.sentences = static_cast<int64_t>(outputs.size());
  if (!opt.scores_json.empty())
    write_scores_json({{"bleu", &c.bleu}, {"bleu_lc", &bleu_lc}, {"bleu_none", &bleu_none}}, c, opt, counted);
}

}  // namespace nmt
