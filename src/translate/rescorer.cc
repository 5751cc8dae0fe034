// Right-to-left rescoring (rescorer.h): forced decoding of each hypothesis in
// both directions, the mix, and the reordering.
#include "translate/rescorer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
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
  // Each line's hypotheses as texts, and the distinct forced decodings they
  // need: hypotheses whose texts encode to the same pieces (or read backwards
  // are the same words) share one log-probability, so that they tie exactly
  // and keep the search's order. log P_l2r comes from the search where it is
  // the forced decoding's (see rescorer.h), else from one forced decoding.
  std::vector<std::string> text;
  std::vector<size_t> forward_of, backward_of;  // per hypothesis: its entry below
  std::vector<double> forward;                  // per distinct (line, pieces); NaN: to decode
  std::vector<std::string> forward_src, forward_text, backward_src, backward_text;
  for (size_t i = 0; i < hyps->size(); ++i) {
    std::map<std::vector<int64_t>, size_t> pieces_seen;
    std::map<std::string, size_t> reversed_seen;
    for (const auto& h : (*hyps)[i]) {
      text.push_back(l2r.detokenize(h, sources[i], replace_unk));
      auto pieces = l2r.tgt_tokenizer().encode(text.back());
      // (an empty line's one hypothesis never ran the model: decoded again)
      const bool exact = search_scores_exact && !sources[i].empty() && pieces == h.ids;
      const auto [f, new_pieces] = pieces_seen.emplace(std::move(pieces), forward.size());
      if (new_pieces) {
        forward.push_back(std::numeric_limits<double>::quiet_NaN());
        forward_src.push_back(sources[i]);
        forward_text.push_back(text.back());
      }
      if (exact) forward[f->second] = h.score;  // at most one hypothesis has exactly the pieces
      forward_of.push_back(f->second);
      const auto [b, new_words] = reversed_seen.emplace(reverse_words(text.back()), backward_src.size());
      if (new_words) {
        backward_src.push_back(sources[i]);
        backward_text.push_back(b->first);
      }
      backward_of.push_back(b->second);
    }
  }
  std::vector<size_t> again;  // the distinct texts forced decoding scores left to right
  std::vector<std::string> again_src, again_text;
  for (size_t k = 0; k < forward.size(); ++k)
    if (std::isnan(forward[k])) {
      again.push_back(k);
      again_src.push_back(forward_src[k]);
      again_text.push_back(forward_text[k]);
    }
  if (!again.empty()) {
    const std::vector<double> decoded = l2r.score(again_src, again_text, batch_sentences);
    for (size_t j = 0; j < again.size(); ++j) forward[again[j]] = decoded[j];
  }
  const std::vector<double> backward = r2l_.score(backward_src, backward_text, batch_sentences);
  const double w = opt_.r2l_weight, a = opt_.length_exponent;
  size_t k = 0;
  for (auto& list : *hyps) {
    std::vector<double> mix(list.size());
    for (size_t r = 0; r < list.size(); ++r, ++k) {
      const double words = static_cast<double>(count_words(text[k]));
      mix[r] = ((1 - w) * forward[forward_of[k]] + w * backward[backward_of[k]]) / std::pow((5.0 + words + 1.0) / 6.0, a);
    }
    std::vector<size_t> order(list.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return mix[x] > mix[y]; });
    std::vector<Hypothesis> sorted;
    for (size_t r = 0; r < std::min(keep, order.size()); ++r) {
      sorted.push_back(std::move(list[order[r]]));
      sorted.back().norm_score = mix[order[r]];
      sorted.back().l2r_logprob = forward[forward_of[k - list.size() + order[r]]];
      sorted.back().r2l_logprob = backward[backward_of[k - list.size() + order[r]]];
    }
    list = std::move(sorted);
  }
}

}  // namespace nmt
