// Minimum Bayes-risk selection over a beam's list (Kumar & Byrne 2004; on
// n-best lists of NMT, Freitag et al. 2022, "High quality rather than high
// model probability"): the translation is not the hypothesis the model scores
// highest but the one that agrees most with the others, each weighed by its
// probability. For a line's hypotheses h_1..h_N with scores s_j (the
// search's length-normalized score, or the rescoring's mix),
//   p_j = exp(s_j / T) / sum_k exp(s_k / T)
//   U_i = sum_j p_j u(h_i, h_j)
// u sentence BLEU or sentence chrF2 (sacreBLEU's, 0..100) of h_i with h_j as
// its reference, T = --mbr-temperature (MbrOptions). The list is reordered by
// U, highest first.
#pragma once
#include <string>
#include <vector>

#include "base/translate_options.h"
#include "search/search.h"
#include "translate/translator.h"

namespace nmt {

// The expected utilities U_i of `texts` (one line's hypotheses as written)
// under the evidence of `scores` (their scores, the same order), as above.
// A score of -inf weighs 0 (all of them: the same weights). Needs
// opt.enabled(). Throws nmt::Error when the sizes differ, a score is NaN or
// +inf, or the list is empty.
std::vector<double> expected_utilities(const std::vector<std::string>& texts, const std::vector<double>& scores,
                                       const MbrOptions& opt);

// Reorders `hyps` (one line's list, whose texts as written are `texts`, the
// same order) by expected utility, highest first (ties keep the list's
// order), sets each one's mbr_utility, and keeps the first `keep`. The
// scores are the hypotheses' norm_score. Throws as expected_utilities().
void mbr_reorder(const std::vector<std::string>& texts, std::vector<Hypothesis>* hyps, const MbrOptions& opt,
                 size_t keep);

// mbr_reorder() over each line's list in `hyps`, of the lines `lines`
// (translated by `tr`), whose texts are tr.detokenize()'s with `replace_unk`
// as the output writes them. Throws as expected_utilities().
void mbr_select(const Translator& tr, const std::vector<std::string>& lines, bool replace_unk, const MbrOptions& opt,
                size_t keep, std::vector<std::vector<Hypothesis>>* hyps);

}  // namespace nmt
