// Rescoring of the beam's hypotheses by models that read them another way:
// right-to-left models (Liu et al. 2016, "Agreement on target-bidirectional
// neural machine translation"; Sennrich et al.'s WMT16 systems), trained on
// targets with each line's words reversed, score every hypothesis read
// backwards; channel models (the noisy channel of Yee et al. 2019, without
// its language model), trained from target to source, score the source
// given the hypothesis. The mix orders them. For a hypothesis of `words` words,
//   score = ((1 - w) log P_l2r + w log P_r2l + c log P_channel) / ((5 + words + 1) / 6)^a
// where log P_l2r is forced decoding of its text by the left-to-right models
// (the ones that searched), log P_r2l of its words in reverse order by the
// right-to-left ones (w taken as 0 without them), log P_channel of the source
// line by the channel models reading the text (c taken as 0 without them),
// w = --r2l-weight, c = --channel-weight and a = --r2l-length-exponent
// (RescoreOptions), computed in doubles in this order without fused
// multiply-adds (CMakeLists.txt), so that a reranker reading the n-best
// features (exact) computes the same bits.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/translate_options.h"
#include "search/search.h"
#include "translate/translator.h"

namespace nmt {

// `text`'s whitespace-separated words in reverse order, joined by one space:
// what a right-to-left model reads and writes ("a b  c" -> "c b a").
std::string reverse_words(const std::string& text);

// The number of whitespace-separated words of `text`.
int64_t count_words(const std::string& text);

class Rescorer {
 public:
  // `r2l` holds the right-to-left models and `channel` the channel models
  // (each with its own tokenizers); either may be absent, not both. Throws
  // nmt::UsageError when both are absent or `opt` is out of range.
  Rescorer(std::optional<Translator> r2l, std::optional<Translator> channel, const RescoreOptions& opt);

  // Reorders each line's hypotheses (`hyps[i]`, the search's list for
  // `sources[i]`, best first) by the mix above, best first (ties keep the
  // search's order), sets each one's norm_score to its mix and its
  // l2r_logprob, r2l_logprob and channel_logprob to the log-probabilities
  // (the last two NaN without their models, and where their weight is 0: a
  // model of weight 0 is not run, as it cannot change the mix), and keeps
  // the first `keep`.
  // `l2r` is the translator that searched: it detokenizes
  // (with `replace_unk` as the output will) and scores the texts as written.
  // Hypotheses of one line whose texts encode to the same pieces share one
  // log P_l2r, whose words read backwards are the same share one log P_r2l,
  // and whose texts are the same share one log P_channel: they tie exactly,
  // and keep the search's order.
  // With `search_scores_exact` (the search ran in float32 over the whole
  // vocabulary: no --int8, --bf16 or --shortlist), a hypothesis whose text
  // encodes back to its own ids (of a line that is not empty) keeps the search's `score` as log P_l2r
  // (the same sum of the same log-probabilities, EOS included, up to the
  // rounding of other batch shapes), and only the others are decoded again.
  // `batch_sentences`: forced decoding's batch size. Throws nmt::Error as
  // Translator::score does.
  void rescore(Translator& l2r, const std::vector<std::string>& sources, std::vector<std::vector<Hypothesis>>* hyps,
               bool replace_unk, int64_t batch_sentences, size_t keep, bool search_scores_exact);

 private:
  std::optional<Translator> r2l_;
  std::optional<Translator> channel_;
  RescoreOptions opt_;
};

// The rescorer `opt` describes, its models loaded on `device` (the
// right-to-left ones as one ensemble, the channel ones as another), or null
// when it names none; logs which models rescore a beam of `beam_size`.
// Throws nmt::Error as load_checkpoint() and Rescorer's constructor.
std::unique_ptr<Rescorer> load_rescorer(const RescoreOptions& opt, const torch::Device& device, int64_t beam_size);

}  // namespace nmt
