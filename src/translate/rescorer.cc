// Rescoring (rescorer.h): forced decoding of each hypothesis left to right,
// right to left, and by the channel models (the source given the
// hypothesis); the mix; the reordering; loading the models.
#include "translate/rescorer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/format.h"
#include "model/checkpoint.h"

namespace nmt {

std::string reverse_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(std::move(w));
  std::string out;
  for (auto it = words.rbegin(); it != words.rend(); ++it) out += (out.empty() ? "" : " ") + *it;
  return out;
}

int64_t count_words(const std::string& text) {
  std::istringstream in(text);
  int64_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

Rescorer::Rescorer(std::optional<Translator> r2l, std::optional<Translator> channel, const RescoreOptions& opt)
    : r2l_(std::move(r2l)), channel_(std::move(channel)), opt_(opt) {
  if (!r2l_ && !channel_) throw UsageError("rescoring needs right-to-left or channel models (--r2l-model, --channel-model)");
  opt_.validate();
}

namespace {

// The distinct pairs one kind of forced decoding scores, in the order first
// seen: within a line, hypotheses of the same key (pieces, words read
// backwards, text) share one pair, so that they tie exactly and keep the
// search's order.
template <class Key>
struct DistinctPairs {
  std::vector<std::string> src, tgt;  // per pair
  std::vector<size_t> of;             // per hypothesis: its pair
  std::map<Key, size_t> seen;         // the current line's keys

  // Hypothesis `key` of the current line, as the pair (s, t); returns
  // whether the pair is new. Throws only what allocation throws.
  bool add(Key key, const std::string& s, const std::string& t) {
    const auto [at, added] = seen.emplace(std::move(key), src.size());
    if (added) {
      src.push_back(s);
      tgt.push_back(t);
    }
    of.push_back(at->second);
    return added;
  }
};

// Orders each line of `hyps` by `mix` (per hypothesis, lines in order) best
// first, ties in the search's order, keeps the first `keep`, and sets each
// kept one's norm_score to its mix and its log-probabilities from `l2r`,
// `r2l` and `channel` (per hypothesis). Throws only what allocation throws.
void reorder(std::vector<std::vector<Hypothesis>>* hyps, const std::vector<double>& mix, size_t keep,
             const std::vector<double>& l2r, const std::vector<double>& r2l, const std::vector<double>& channel) {
  size_t first = 0;  // the line's first hypothesis
  for (auto& list : *hyps) {
    std::vector<size_t> order(list.size());
    std::iota(order.begin(), order.end(), first);
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return mix[x] > mix[y]; });
    std::vector<Hypothesis> sorted;
    for (size_t r = 0; r < std::min(keep, order.size()); ++r) {
      const size_t k = order[r];
      sorted.push_back(std::move(list[k - first]));
      sorted.back().norm_score = mix[k];
      sorted.back().l2r_logprob = l2r[k];
      sorted.back().r2l_logprob = r2l[k];
      sorted.back().channel_logprob = channel[k];
    }
    first += list.size();
    list = std::move(sorted);
  }
}

}  // namespace

void Rescorer::rescore(Translator& l2r, const std::vector<std::string>& sources,
                       std::vector<std::vector<Hypothesis>>* hyps, bool replace_unk, int64_t batch_sentences,
                       size_t keep, bool search_scores_exact) {
  // Each line's hypotheses as texts, and the distinct forced decodings they
  // need. log P_l2r comes from the search where it is the forced decoding's
  // (see rescorer.h), else from one forced decoding.
  std::vector<std::string> text;
  DistinctPairs<std::vector<int64_t>> forward;       // (source, text) by the text's pieces
  DistinctPairs<std::string> backward, channel;      // (source, words reversed), (text, source)
  std::vector<double> forward_score;                 // per forward pair; NaN: to decode
  // A model of weight 0 adds nothing to the mix (0 * log P leaves its bits
  // as they are): it is not run, and its log-probability stays NaN.
  const bool run_r2l = r2l_ && opt_.r2l_weight != 0, run_channel = channel_ && opt_.channel_weight != 0;
  for (size_t i = 0; i < hyps->size(); ++i) {
    forward.seen.clear();
    backward.seen.clear();
    channel.seen.clear();
    for (const auto& h : (*hyps)[i]) {
      text.push_back(l2r.detokenize(h, sources[i], replace_unk));
      auto pieces = l2r.tgt_tokenizer().encode(text.back());
      // (an empty line's one hypothesis never ran the model: decoded again)
      const bool exact = search_scores_exact && !sources[i].empty() && pieces == h.ids;
      if (forward.add(std::move(pieces), sources[i], text.back()))
        forward_score.push_back(std::numeric_limits<double>::quiet_NaN());
      if (exact) forward_score[forward.of.back()] = h.score;  // at most one hypothesis has exactly the pieces
      if (run_r2l) {
        std::string reversed = reverse_words(text.back());
        backward.add(reversed, sources[i], reversed);
      }
      if (run_channel) channel.add(text.back(), text.back(), sources[i]);  // the channel reads the text
    }
  }
  std::vector<size_t> again;  // the distinct texts forced decoding scores left to right
  std::vector<std::string> again_src, again_text;
  for (size_t k = 0; k < forward_score.size(); ++k)
    if (std::isnan(forward_score[k])) {
      again.push_back(k);
      again_src.push_back(forward.src[k]);
      again_text.push_back(forward.tgt[k]);
    }
  if (!again.empty()) {
    const std::vector<double> decoded = l2r.score(again_src, again_text, batch_sentences);
    for (size_t j = 0; j < again.size(); ++j) forward_score[again[j]] = decoded[j];
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> backward_score =
      run_r2l ? r2l_->score(backward.src, backward.tgt, batch_sentences) : std::vector<double>();
  const std::vector<double> channel_score =
      run_channel ? channel_->score(channel.src, channel.tgt, batch_sentences) : std::vector<double>();
  // Per hypothesis: the three log-probabilities (NaN without their models) and the mix.
  const double w = run_r2l ? opt_.r2l_weight : 0.0, c = run_channel ? opt_.channel_weight : 0.0,
               a = opt_.length_exponent;
  std::vector<double> f(text.size()), b(text.size(), nan), ch(text.size(), nan), mix(text.size());
  for (size_t k = 0; k < text.size(); ++k) {
    f[k] = forward_score[forward.of[k]];
    double sum = (1 - w) * f[k];
    if (run_r2l) sum += w * (b[k] = backward_score[backward.of[k]]);
    if (run_channel) sum += c * (ch[k] = channel_score[channel.of[k]]);
    mix[k] = sum / std::pow((5.0 + static_cast<double>(count_words(text[k])) + 1.0) / 6.0, a);
  }
  reorder(hyps, mix, keep, f, b, ch);
}

std::unique_ptr<Rescorer> load_rescorer(const RescoreOptions& opt, const torch::Device& device, int64_t beam_size) {
  if (!opt.enabled()) return nullptr;
  // Each set of models as one Translator (an ensemble), or none when not given.
  const auto load = [&](const std::vector<std::string>& paths) -> std::optional<Translator> {
    if (paths.empty()) return std::nullopt;
    std::vector<LoadedModel> models;
    for (const auto& path : paths) models.push_back(load_checkpoint(path, device));
    return Translator(models, paths);
  };
  auto rescorer = std::make_unique<Rescorer>(load(opt.r2l_models), load(opt.channel_models), opt);
  std::vector<std::string> with;
  if (!opt.r2l_models.empty())
    with.push_back(fmt::format("right-to-left {} (weight {}{})", fmt::join(opt.r2l_models, ", "), opt.r2l_weight,
                               opt.r2l_weight == 0 ? ": not run" : ""));
  if (!opt.channel_models.empty())
    with.push_back(fmt::format("channel {} (weight {}{})", fmt::join(opt.channel_models, ", "), opt.channel_weight,
                               opt.channel_weight == 0 ? ": not run" : ""));
  spdlog::info("rescoring the beam's {} with {}, length exponent {}", counted(beam_size, "hypothesis", "hypotheses"),
               fmt::join(with, " and "), opt.length_exponent);
  return rescorer;
}

}  // namespace nmt
