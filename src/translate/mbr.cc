// Minimum Bayes-risk selection over a beam's list; see mbr.h.
#include "translate/mbr.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.h"
#include "text/metrics.h"

namespace nmt {

std::vector<double> expected_utilities(const std::vector<std::string>& texts, const std::vector<double>& scores,
                                       const MbrOptions& opt) {
  if (!opt.enabled()) throw Error("expected_utilities: no utility chosen (--mbr none)");
  if (texts.size() != scores.size())
    throw Error("expected_utilities: " + std::to_string(texts.size()) + " hypotheses but " +
                std::to_string(scores.size()) + " scores");
  if (texts.empty()) throw Error("expected_utilities: no hypotheses");
  for (double s : scores)
    if (std::isnan(s) || s == std::numeric_limits<double>::infinity())
      throw Error("expected_utilities: a hypothesis' score is NaN or +inf");
  // p = softmax(scores / T), shifted by the highest score so that exp cannot
  // overflow; a score of -inf (a beam wider than the columns it could choose
  // from) weighs 0, and where every score is -inf all weigh the same.
  const double top = *std::max_element(scores.begin(), scores.end());
  std::vector<double> p(scores.size(), 1.0);
  if (std::isfinite(top))
    for (size_t j = 0; j < scores.size(); ++j) p[j] = std::exp((scores[j] - top) / opt.temperature);
  const double z = std::accumulate(p.begin(), p.end(), 0.0);  // >= 1: the top score's term is exp(0)
  for (double& x : p) x /= z;
  const auto u = opt.utility == MbrUtility::kBleu ? pairwise_sentence_bleu(texts) : pairwise_sentence_chrf(texts);
  std::vector<double> out(texts.size(), 0.0);
  for (size_t i = 0; i < texts.size(); ++i)
    for (size_t j = 0; j < texts.size(); ++j) out[i] += p[j] * u[i][j];
  return out;
}

void mbr_reorder(const std::vector<std::string>& texts, std::vector<Hypothesis>* hyps, const MbrOptions& opt,
                 size_t keep) {
  std::vector<double> scores;
  for (const auto& h : *hyps) scores.push_back(h.norm_score);
  const auto utility = expected_utilities(texts, scores, opt);
  for (size_t i = 0; i < hyps->size(); ++i) (*hyps)[i].mbr_utility = utility[i];
  std::stable_sort(hyps->begin(), hyps->end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.mbr_utility > b.mbr_utility; });
  if (hyps->size() > keep) hyps->resize(keep);
}

void mbr_select(const Translator& tr, const std::vector<std::string>& lines, bool replace_unk, const MbrOptions& opt,
                size_t keep, std::vector<std::vector<Hypothesis>>* hyps) {
  for (size_t i = 0; i < hyps->size(); ++i) {
    std::vector<std::string> texts;
    for (const auto& h : (*hyps)[i]) texts.push_back(tr.detokenize(h, lines[i], replace_unk));
    mbr_reorder(texts, &(*hyps)[i], opt, keep);
  }
}

}  // namespace nmt
