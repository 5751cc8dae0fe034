// Batched translation with input order restored.
#include "translate/translator.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <numeric>

#include <spdlog/spdlog.h>

#include "base/config.h"
#include "base/error.h"
#include "base/validate.h"
#include "model/quantized.h"
#include "search/scorer.h"

namespace nmt {

Translator::Translator(Seq2Seq model, Tokenizer src_tok, Tokenizer tgt_tok)
    : models_{std::move(model)}, src_tok_(std::move(src_tok)), tgt_tok_(std::move(tgt_tok)) {}

Translator::Translator(const std::vector<LoadedModel>& members, const std::vector<std::string>& names,
                       std::vector<double> weights)
    : weights_(std::move(weights)) {
  if (members.empty()) throw Error("no model to translate with");
  normalized_weights(weights_, members.size());  // throws here rather than at the first call
  src_tok_ = members.front().src_tok;
  tgt_tok_ = members.front().tgt_tok;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].src_tok.bytes() != src_tok_.bytes() || members[i].tgt_tok.bytes() != tgt_tok_.bytes())
      throw Error((i < names.size() ? names[i] : "ensemble member " + std::to_string(i + 1)) +
                  ": its tokenizers differ from the first model's; ensemble members must share them "
                  "(train them with --src-spm/--tgt-spm of one run)");
    if (i > 0 && members[i].model->parameters().front().device() != members[0].model->parameters().front().device())
      throw Error("ensemble members must be on one device");
    models_.push_back(members[i].model);
  }
}

std::vector<int64_t> Translator::encode_source(const std::string& line) const {
  auto ids = src_tok_.encode(line);
  ids.push_back(kEosId);
  return ids;
}

std::vector<std::vector<Hypothesis>> Translator::translate(const std::vector<std::string>& lines,
                                                           const TranslateOptions& opt, bool with_attention) {
  opt.validate();
  InferenceScope scope(models_);
  const Precision precision = opt.int8 ? Precision::kInt8 : opt.bf16 ? Precision::kBf16 : Precision::kFloat32;
  if (precision != Precision::kFloat32 && !ReducedLinear::native(precision) && !warned_precision_) {
    spdlog::warn("--{}: this CPU has no instructions for it, so its products are emulated and may be slower than float",
                 opt.int8 ? "int8" : "bf16");
    warned_precision_ = true;
  }
  const auto members = engines(precision);
  const auto device = members.front()->device();
  // Bytes of decoder state per hypothesis and source piece over all members.
  int64_t state_bytes = 0;
  for (const auto& e : members) state_bytes += e->memory_use().search_bytes;
  const auto shortlist = shortlist_for(opt.shortlist);
  auto& kept = kept_search(opt.search, members, shortlist);
  Search& search = *kept.search;
  Scorer& scorer = *kept.scorer;

  std::vector<Example> examples(lines.size());
  std::vector<int64_t> order;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    examples[i].src = encode_source(lines[i]);
    if (opt.max_input_length > 0 && static_cast<int64_t>(examples[i].src.size()) > opt.max_input_length + 1) {
      examples[i].src.resize(opt.max_input_length);
      examples[i].src.push_back(kEosId);
      ++cropped_;
    }
    order.push_back(static_cast<int64_t>(i));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return examples[a].src.size() > examples[b].src.size(); });

  std::vector<std::vector<Hypothesis>> out(lines.size());
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].empty()) out[i].push_back(Hypothesis{});
  // Longest first: the first sentence of a batch fixes its padded length.
  BatchLimits limits{opt.batch_sentences, opt.batch_tokens, kSearchStateBytes, state_bytes * opt.search.beam_size, 0};
  auto batches = cut_batches(examples, order, limits);
  // Fewer batches than CPU workers (a short input, a window cut short by a
  // pause, a call of nmt-serve's batcher): smaller batches, one per worker,
  // side by side on a thread each. One batch over all threads runs its small
  // products far slower (64 Multi30k sentences at a time on 2 cores: 2.5x the time).
  const int64_t free_workers = batch_workers(opt, static_cast<int64_t>(order.size()), device);
  if (static_cast<int64_t>(batches.size()) < free_workers) {
    const auto n = static_cast<int64_t>(order.size());
    limits.max_sentences = std::min(limits.max_sentences, (n + free_workers - 1) / free_workers);
    batches = cut_batches(examples, order, limits);
  }
  auto run_batch = [&](Search& s, Scorer& sc, size_t i) {
    const auto& idx = batches[i];
    auto batch = make_batch(examples, idx, /*with_target=*/false).to(device);
    auto hyps = s.run(sc, batch, with_attention);
    for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = std::move(hyps[k]);
  };
  const int64_t workers = batch_workers(opt, static_cast<int64_t>(batches.size()), device);
  if (workers <= 1) {
    for (size_t i = 0; i < batches.size(); ++i) run_batch(search, scorer, i);
    return out;
  }
  // Each worker takes the next batch until none is left, on one thread:
  // inside at::parallel_for's region LibTorch's own loops and OpenBLAS run
  // single-threaded. Each has its own search and scorer (their per-batch
  // state); the models are only read. An exception in a worker is rethrown
  // here once the others have stopped.
  std::atomic<size_t> next{0};
  at::parallel_for(0, workers, 1, [&](int64_t begin, int64_t end) {
    c10::InferenceMode mode;  // thread-local: the workers do not inherit the caller's
    for (int64_t w = begin; w < end; ++w) {
      auto own_search = make_search(opt.search, device);
      Scorer own_scorer(members, weights_);
      own_scorer.set_shortlist(shortlist);
      for (size_t i; (i = next.fetch_add(1)) < batches.size();) run_batch(*own_search, own_scorer, i);
    }
  });
  return out;
}

int64_t Translator::batch_workers(const TranslateOptions& opt, int64_t batches, const torch::Device& device) {
  if (!device.is_cpu() || batches < 2) return 1;
  const int64_t threads = at::get_num_threads();
  const int64_t want = opt.parallel_batches > 0 ? opt.parallel_batches : threads;
  return std::min({want, threads, batches});
}

std::vector<std::shared_ptr<Engine>> Translator::engines(Precision precision) {
  bool fresh = !engines_.empty() && engines_.front()->options().precision == precision;
  for (const auto& e : engines_) fresh = fresh && e->current();
  if (!fresh) {
    engines_.clear();
    EngineOptions opt;
    opt.precision = precision;
    for (const auto& m : models_) engines_.push_back(std::make_shared<RnnEngine>(m, opt));
  }
  return {engines_.begin(), engines_.end()};
}

namespace {

// Whether every field of SearchOptions (base/translate_options.h) is the same
// in a and b: compared through the field list, so a field added there counts
// here too (each double written in the shortest form that reads back to it,
// so unequal values never print alike).
bool same_search(const SearchOptions& a, const SearchOptions& b) {
  return ConfigWriter().add(a).str() == ConfigWriter().add(b).str();
}

}  // namespace

Translator::KeptSearch& Translator::kept_search(const SearchOptions& opt,
                                                const std::vector<std::shared_ptr<Engine>>& members,
                                                const std::shared_ptr<const Shortlist>& shortlist) {
  const bool inference_mode = c10::InferenceMode::is_enabled();
  if (kept_.search && same_search(kept_.options, opt) && kept_.inference_mode == inference_mode &&
      kept_.engines == members && kept_.shortlist == shortlist)
    return kept_;
  kept_ = {};  // the old search (and its step graphs) goes before the new one is made
  kept_.search = make_search(opt, members.front()->device());
  kept_.scorer = std::make_unique<Scorer>(members, weights_);
  kept_.scorer->set_shortlist(shortlist);
  kept_.options = opt;
  kept_.inference_mode = inference_mode;
  kept_.engines = members;
  kept_.shortlist = shortlist;
  return kept_;
}

std::shared_ptr<const Shortlist> Translator::shortlist_for(const ShortlistOptions& opt) {
  if (opt.path.empty()) return nullptr;
  if (!shortlist_ || !(shortlist_->options() == opt))
    shortlist_ = std::make_shared<const Shortlist>(Shortlist::load(opt, src_tok_, tgt_tok_));
  return shortlist_;
}

std::vector<std::string> Translator::translate_text(const std::vector<std::string>& lines,
                                                    const TranslateOptions& opt) {
  auto hyps = translate(lines, opt);
  std::vector<std::string> out;
  out.reserve(lines.size());
  for (auto& h : hyps) out.push_back(tgt_tok_.decode(h.front().ids));
  return out;
}

std::vector<double> Translator::score(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                                      int64_t batch_sentences, int64_t* target_pieces) {
  if (src.size() != tgt.size())
    throw Error(std::to_string(src.size()) + " sources but " + std::to_string(tgt.size()) + " targets to score");
  check::in_range("--batch-sentences", batch_sentences, 1, 1 << 20);
  InferenceScope scope(models_);
  const auto members = engines(Precision::kFloat32);
  Scorer scorer(members, weights_);
  const auto device = members.front()->device();
  std::vector<Example> ex(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    ex[i].src = encode_source(src[i]);
    ex[i].tgt = tgt_tok_.encode(tgt[i]);
    if (target_pieces != nullptr) *target_pieces += static_cast<int64_t>(ex[i].tgt.size());
  }
  std::vector<int64_t> order(src.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ex[a].src.size() > ex[b].src.size(); });
  // Batches also stay under kSearchStateBytes of logits ([B, T, V], twice) and encoder states.
  int64_t src_bytes = 0, tgt_bytes = 0;
  for (const auto& e : members) {
    src_bytes += e->memory_use().forced_source_bytes;
    tgt_bytes += e->memory_use().forced_target_bytes;
  }
  std::vector<double> out(src.size());
  for (const auto& idx : cut_batches(ex, order, BatchLimits{batch_sentences, 0, kSearchStateBytes, src_bytes, tgt_bytes})) {
    auto b = make_batch(ex, idx).to(device);
    auto logp = scorer.forced_log_probs(b);                                                             // [B, T, V]
    auto tok = logp.gather(2, b.tgt_out.unsqueeze(2)).squeeze(2);                                       // [B, T]
    auto sums = tok.masked_fill(b.tgt_out.eq(kPadId), 0.0).sum(1).to(torch::kDouble).cpu();             // [B]
    for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = sums[k].item<double>();
  }
  return out;
}

std::string Translator::detokenize(const Hypothesis& h, const std::string& src_line, bool replace_unk) const {
  bool has_unk = std::find(h.ids.begin(), h.ids.end(), kUnkId) != h.ids.end();
  if (!replace_unk || !has_unk) return tgt_tok_.decode(h.ids);
  if (!h.attention.defined()) throw Error("--replace-unk needs the attention of the hypothesis");
  const auto src_pieces = src_tok_.pieces(src_line);
  auto best = std::get<1>(h.attention.max(1));  // [len + 1] most attended source position per step
  // Join pieces as SentencePiece does: U+2581 marks a word start.
  std::string text;
  for (size_t i = 0; i < h.ids.size(); ++i) {
    std::string piece = tgt_tok_.piece(h.ids[i]);
    if (h.ids[i] == kUnkId) {
      const int64_t j = best[static_cast<int64_t>(i)].item<int64_t>();
      piece = j < static_cast<int64_t>(src_pieces.size()) ? src_pieces[j] : "";
    }
    text += piece;
  }
  const std::string marker = "\xe2\x96\x81";  // U+2581
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, marker.size(), marker) == 0) {
      if (!out.empty()) out += ' ';
      i += marker.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace nmt

