// Right-to-left rescoring (rescorer.h): forced decoding of each hypothesis in
// both directions, the mix, and the reordering.
#include "translate/rescorer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

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

Rescorer::Rescorer(Translator r2l, const RescoreOptions& opt) : r2l_(std::move(r2l)), opt_(opt) { opt_.validate(); }

void Rescorer::rescore(Translator& l2r, const std::vector<std::string>& sources,
                       std::vector<std::vector<Hypothesis>>* hyps, bool replace_unk, int64_t batch_sentences,
                       size_t keep, bool search_scores_exact) {
  // Every hypothesis of every line as one list of pairs: src, text, text read
  // backwards; log P_l2r from the search where it is the forced decoding's
  // (NaN until decoded again otherwise).
  std::vector<std::string> src, text, reversed;
  std::vector<double> forward;
  std::vector<size_t> again;  // indices whose log P_l2r forced decoding gives
  for (size_t i = 0; i < hyps->size(); ++i)
    for (const auto& h : (*hyps)[i]) {
      src.push_back(sources[i]);
      text.push_back(l2r.detokenize(h, sources[i], replace_unk));
      reversed.push_back(reverse_words(text.back()));
      // (an empty line's one hypothesis never ran the model: decoded again)
      const bool kept = search_scores_exact && !sources[i].empty() && l2r.tgt_tokenizer().encode(text.back()) == h.ids;
      forward.push_back(kept ? h.score : std::numeric_limits<double>::quiet_NaN());
      if (!kept) again.push_back(forward.size() - 1);
    }
  if (!again.empty()) {
    std::vector<std::string> again_src, again_text;
    for (const size_t k : again) {
      again_src.push_back(src[k]);
      again_text.push_back(text[k]);
    }
    const std::vector<double> decoded = l2r.score(again_src, again_text, batch_sentences);
    for (size_t j = 0; j < again.size(); ++j) forward[again[j]] = decoded[j];
  }
  const std::vector<double> backward = r2l_.score(src, reversed, batch_sentences);
  const double w = opt_.r2l_weight, a = opt_.length_exponent;
  size_t k = 0;
  for (auto& list : *hyps) {
    std::vector<double> mix(list.size());
    for (size_t r = 0; r < list.size(); ++r, ++k) {
      const double words = static_cast<double>(count_words(text[k]));
      mix[r] = ((1 - w) * forward[k] + w * backward[k]) / std::pow((5.0 + words + 1.0) / 6.0, a);
    }
    std::vector<size_t> order(list.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return mix[x] > mix[y]; });
    std::vector<Hypothesis> sorted;
    for (size_t r = 0; r < std::min(keep, order.size()); ++r) {
      sorted.push_back(std::move(list[order[r]]));
      sorted.back().norm_score = mix[order[r]];
      sorted.back().l2r_logprob = forward[k - list.size() + order[r]];
      sorted.back().r2l_logprob = backward[k - list.size() + order[r]];
    }
    list = std::move(sorted);
  }
}

}  // namespace nmt
