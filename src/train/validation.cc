// Validation during training.
#include "train/validation.h"

#include <cmath>

#include "translate/translator.h"
#include "train/losses.h"

namespace nmt {

ValidResult validate(Seq2Seq& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok, const ValidationSet& set,
                     const BatchPlanOptions& plan, int64_t batch_sentences, const BleuOptions& bleu,
                     const torch::Device& device) {
  ValidResult r;
  torch::NoGradGuard no_grad;
  model->eval();
  double nll = 0;
  int64_t tokens = 0;
  for (const auto& idx : plan_batches(set.examples, plan, 0)) {
    auto b = make_batch(set.examples, idx).to(device);
    auto logits = model->forward(b.src, b.src_len, b.tgt_in);  // [B, T, V]
    nll += sequence_loss(logits, b.tgt_out, 0.0).item<double>();
    tokens += b.tgt_tokens;
  }
  r.loss = nll / std::max<int64_t>(tokens, 1);
  r.perplexity = std::exp(r.loss);
  Translator tr(model, src_tok, tgt_tok);
  TranslateOptions to;
  to.batch_sentences = batch_sentences;
  const auto hyps = tr.translate_text(set.source, to);
  r.bleu = corpus_bleu(hyps, set.reference, bleu).score;
  r.chrf = corpus_chrf(hyps, set.reference).score;
  r.exact_match = exact_match(hyps, set.reference);
  model->train();
  return r;
}

double higher_is_better(StopMetric m, const ValidResult& v) {
  switch (m) {
    case StopMetric::kLoss: return -v.loss;
    case StopMetric::kPerplexity: return -v.perplexity;
    case StopMetric::kBleu: return v.bleu;
    case StopMetric::kChrf: return v.chrf;
  }
  return 0;
}

double reported(StopMetric m, double hib) {
  return (m == StopMetric::kLoss || m == StopMetric::kPerplexity) ? -hib : hib;
}

}  // namespace nmt
