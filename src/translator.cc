// Batched translation with input order restored.
#include "translator.h"

#include <algorithm>
#include <numeric>

#include <c10/core/InferenceMode.h>

#include "error.h"

namespace nmt {

Translator::Translator(Seq2Seq model, Tokenizer src_tok, Tokenizer tgt_tok)
    : model_(std::move(model)), src_tok_(std::move(src_tok)), tgt_tok_(std::move(tgt_tok)) {}

std::vector<int64_t> Translator::encode_source(const std::string& line) const {
  auto ids = src_tok_.encode(line);
  ids.push_back(kEosId);
  return ids;
}

std::vector<std::vector<Hypothesis>> Translator::translate(const std::vector<std::string>& lines,
                                                           const TranslateOptions& opt, bool with_attention) {
  if (opt.batch_sentences < 1) throw Error("batch size must be at least 1");
  auto search = make_search(opt.search);
  const bool was_training = model_->is_training();
  model_->eval();
  c10::InferenceMode guard;
  const auto device = model_->parameters().front().device();

  std::vector<Example> examples(lines.size());
  std::vector<int64_t> order;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    examples[i].src = encode_source(lines[i]);
    order.push_back(static_cast<int64_t>(i));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return examples[a].src.size() > examples[b].src.size(); });

  std::vector<std::vector<Hypothesis>> out(lines.size());
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].empty()) out[i].push_back(Hypothesis{});
  size_t pos = 0;
  while (pos < order.size()) {
    // Longest first: the first sentence of a batch fixes its padded length.
    const int64_t width = static_cast<int64_t>(examples[order[pos]].src.size());
    size_t end = pos;
    while (end < order.size() && static_cast<int64_t>(end - pos) < opt.batch_sentences &&
           (opt.batch_tokens <= 0 || end == pos || width * static_cast<int64_t>(end - pos + 1) <= opt.batch_tokens))
      ++end;
    std::vector<int64_t> idx(order.begin() + pos, order.begin() + end);
    auto batch = make_batch(examples, idx, /*with_target=*/false).to(device);
    auto hyps = search->run(model_, batch, with_attention);
    for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = std::move(hyps[k]);
    pos = end;
  }
  if (was_training) model_->train();
  return out;
}

std::vector<std::string> Translator::translate_text(const std::vector<std::string>& lines,
                                                    const TranslateOptions& opt) {
  auto hyps = translate(lines, opt);
  std::vector<std::string> out;
  out.reserve(lines.size());
  for (auto& h : hyps) out.push_back(tgt_tok_.decode(h.front().ids));
  return out;
}

}  // namespace nmt
