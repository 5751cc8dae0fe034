// Validation during training: the mean token loss of the validation pairs
// under teacher forcing, and the figures of the model's greedy translations
// against their references (BLEU, chrF, exact match).
#pragma once
#include <string>
#include <vector>

#include "base/options.h"
#include "model/batch.h"
#include "model/model.h"
#include "text/metrics.h"
#include "text/tokenizer.h"

namespace nmt {

struct ValidResult {
  double loss = 0;         // mean token NLL (no label smoothing)
  double perplexity = 0;
  double bleu = 0;         // sacreBLEU (as validate()'s `bleu` says) of greedy translations
  double chrf = 0;
  double exact_match = 0;  // % of sentences translated exactly as the reference
};

// The validation set of a run.
struct ValidationSet {
  std::vector<Example> examples;    // every pair encoded (no length limit), for the loss
  std::vector<std::string> source;  // the text translated for BLEU/chrF (--valid-max-sentences)
  std::vector<std::string> reference;
  bool empty() const { return examples.empty(); }
};

// Scores `model` on `set`: the loss over batches planned as training plans
// them (`plan`), and greedy translations decoded `batch_sentences` at a time,
// their BLEU as `bleu` says (chrF is sacreBLEU's default, cased). Runs
// without gradients in eval mode and leaves the model in train mode. Throws
// nmt::Error from translation, or when bleu.tokenize is unknown.
ValidResult validate(Seq2Seq& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok, const ValidationSet& set,
                     const BatchPlanOptions& plan, int64_t batch_sentences, const BleuOptions& bleu,
                     const torch::Device& device);

// The figure to maximize for `metric`: -loss, -perplexity, BLEU or chrF.
double higher_is_better(StopMetric metric, const ValidResult& v);
// The inverse of higher_is_better: the figure as logs report it.
double reported(StopMetric metric, double higher_is_better);

}  // namespace nmt
