// The checks of nmt-translate's options (translate_options.h) that are not
// plain ranges: the ranges come from the field lists, through check_ranges().
#include "base/translate_options.h"

#include <string>

#include "base/check_ranges.h"
#include "base/error.h"
#include "base/format.h"

namespace nmt {

void SearchOptions::validate() const {
  check_ranges(*this);
  if (n_best < 1 || n_best > beam_size)
    throw UsageError("--n-best must be between 1 and the beam size (" + std::to_string(beam_size) + "), got " +
                std::to_string(n_best));
}

void SearchOptions::resolve_beam(const GivenOptions& given) {
  if (given.count("beam-size") == 0 && n_best > beam_size) beam_size = n_best;
}

void ShortlistOptions::validate() const { check_ranges(*this); }

void ShortlistOptions::validate_given(const GivenOptions& given) const {
  if (path.empty() && (given.count("shortlist-best") > 0 || given.count("shortlist-frequent") > 0))
    throw UsageError("--shortlist-best and --shortlist-frequent shape the candidates of --shortlist: give --shortlist");
}

void TranslateOptions::validate() const {
  check_ranges(*this);  // search's and shortlist's fields included
  if (int8 && bf16) throw UsageError("--int8 and --bf16 exclude each other: pick one precision for the decoder's products");
  search.validate();
  shortlist.validate();
}

void RescoreOptions::validate() const { check_ranges(*this); }

void RescoreOptions::validate_given(const GivenOptions& given) const {
  if (r2l_models.empty() && given.count("r2l-weight") > 0)
    throw UsageError("--r2l-weight weighs the scores of --r2l-model: give --r2l-model");
  if (channel_models.empty() && given.count("channel-weight") > 0)
    throw UsageError("--channel-weight weighs the scores of --channel-model: give --channel-model");
  if (!enabled() && given.count("r2l-length-exponent") > 0)
    throw UsageError("--r2l-length-exponent normalizes the mix of --r2l-model and --channel-model: give one of them");
}

void MbrOptions::validate(int64_t beam_size, const GivenOptions& given) const {
  if (!enabled() && given.count("mbr-temperature") > 0)
    throw UsageError("--mbr-temperature weighs the hypotheses of --mbr: give --mbr bleu or --mbr chrf");
  if (enabled() && beam_size < 2)
    throw UsageError("--mbr picks each translation from the beam's list: give --beam-size 2 or more");
}

void validate_ensemble_weights(const std::vector<double>& weights, const std::vector<std::string>& paths) {
  if (weights.empty()) return;
  if (weights.size() != paths.size())
    throw UsageError("--ensemble-weights gives " + counted(static_cast<int64_t>(weights.size()), "weight") + " for " +
                     counted(static_cast<int64_t>(paths.size()), "model") + " (-m): give one per model, in their order");
  if (paths.size() == 1)
    throw UsageError("--ensemble-weights weighs the models of an ensemble, and -m names one model (" + paths[0] +
                     "): drop --ensemble-weights");
  for (size_t i = 0; i < weights.size(); ++i)
    if (!(weights[i] > 0 && weights[i] <= 1e6))
      throw UsageError("--ensemble-weights: the weight of model " + std::to_string(i + 1) + " (" + paths[i] +
                       ") must be above 0 and at most 1e6, got " + shortest_decimal(weights[i]) +
                       " (leave a model out rather than weigh it 0)");
}

StreamOptions StreamOptions::resolved() const {
  StreamOptions r = *this;
  if (!score_mode) r.translate.search.resolve_beam(given);  // --score-pairs searches nothing
  return r;
}

namespace {

// Throws nmt::UsageError when an option of T's field list other than
// `used` was typed on the command line for `mode`, which never reads it
// (`why` says what the mode does).
template <class T>
void refuse_typed(const GivenOptions& typed, const char* mode, const char* why, const GivenOptions& used = {}) {
  T t;
  std::string first;
  T::fields(t, [&](const Field& f, const auto&) {
    if (first.empty() && typed.count(f.name) > 0 && used.count(f.name) == 0) first = std::string("--") + f.name;
  });
  if (!first.empty()) throw UsageError(first + " does nothing with " + mode + " (" + why + "): drop it");
}

}  // namespace

void StreamOptions::validate() const {
  check_ranges(*this);  // translate's and runtime's fields included
  runtime.validate();
  translate.validate();
  const bool reference = !references.empty();
  for (const auto& r : references)
    if (r.empty()) throw UsageError("--reference must name a file");
  if (!scores_json.empty() && !reference) throw UsageError("--scores-json needs --reference");
  if (!reference && (bleu_lowercase || bleu_tokenize != BleuTokenizer::k13a))
    throw UsageError("--tokenize and --lowercase choose how --reference is scored: give --reference");
  if (baseline.empty() && given.count("baseline") > 0) throw UsageError("--baseline must name a file");
  if ((confidence || !baseline.empty()) && !reference)
    throw UsageError("--confidence and --baseline estimate how far the scores against --reference can be trusted: "
                     "give --reference");
  if (!confidence && baseline.empty() && given.count("bootstrap-samples") > 0)
    throw UsageError("--bootstrap-samples sets the resamples of --confidence and --baseline: give one of them");
  if (score_format != ScoreFormat::kText && !evaluate)
    throw UsageError("--score-format chooses how --evaluate prints its scores; while translating, the output holds "
                     "the translations and the scores go to stderr (and --scores-json)");
  if (info && (score_mode || reference || !input.empty()))
    throw UsageError("--info prints what the checkpoints hold and exits: drop --score-pairs, --reference and --input");
  rescore.validate_given(given);
  translate.shortlist.validate_given(given);
  if (scores && translate.search.n_best > 1)
    throw UsageError("--with-scores does nothing with --n-best: each n-best line carries its score");
  if (rescore.enabled() && (score_mode || evaluate || info))
    throw UsageError(std::string(rescore.r2l_models.empty()       ? "--channel-model rescores"
                                 : rescore.channel_models.empty() ? "--r2l-model rescores"
                                                                  : "--r2l-model and --channel-model rescore") +
                     " translations: drop --score-pairs, --evaluate and --info");
  if (mbr.enabled() && (score_mode || evaluate || info))
    throw UsageError("--mbr picks translations from the beam: drop --score-pairs, --evaluate and --info");
  mbr.validate(translate.search.beam_size, given);
  if (evaluate) {  // scores the input as it is: nothing to translate with
    if (!reference) throw UsageError("--evaluate scores the input against --reference: give --reference");
    if (!model_paths.empty() || score_mode || info)
      throw UsageError("--evaluate scores given translations: drop -m, --score-pairs and --info");
  } else if (model_paths.empty()) {
    throw UsageError("option --model (-m) is required: the checkpoint to translate with (repeat it for an ensemble)");
  }
  if (evaluate) refuse_typed<TranslateOptions>(typed, "--evaluate", "it scores given translations; no model runs");
  if (info) refuse_typed<TranslateOptions>(typed, "--info", "it prints what the checkpoints hold");
  if (score_mode)  // forced decoding in float32 over the whole vocabulary, batched by --batch-sentences alone
    refuse_typed<TranslateOptions>(typed, "--score-pairs", "it scores given pairs by forced decoding in float32",
                                   {"batch-sentences"});
  if (!ensemble_weights.empty() && (evaluate || info))
    throw UsageError("--ensemble-weights weighs the models of an ensemble: drop --evaluate and --info");
  validate_ensemble_weights(ensemble_weights, model_paths);
  if (score_mode) {  // options that would do nothing there (the search's: refuse_typed above)
    if (scores || replace_unk) throw UsageError("--with-scores and --replace-unk do nothing with --score-pairs");
    if (reference) throw UsageError("--reference does nothing with --score-pairs");
    if (src.empty() != tgt.empty())
      throw UsageError(std::string("option ") + (src.empty() ? "--src" : "--tgt") + " is required with " +
                       (src.empty() ? "--tgt" : "--src") + " (--score-pairs reads both, or one TSV input)");
    if (!src.empty() && !input.empty())
      throw UsageError("--score-pairs reads --src and --tgt, or a TSV input (-i), not both");
  } else if (!src.empty() || !tgt.empty()) {
    throw UsageError("--src and --tgt are the pairs of --score-pairs; to translate, give -i (or stdin)");
  }
}

}  // namespace nmt
