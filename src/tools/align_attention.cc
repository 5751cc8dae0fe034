// nmt-align's attention matrices: what a model attends to (or its alignment
// head gives) while it reads a given target (forced) or makes its own
// translation (free), and a side cut to whole words (see align.h).
#include <algorithm>
#include <climits>
#include <numeric>
#include <utility>

#include "base/error.h"
#include "tools/align.h"

namespace nmt {
namespace {

const std::string kEos = "</s>";

std::vector<std::string> with_eos(std::vector<std::string> pieces) {
  pieces.push_back(kEos);
  return pieces;
}

AttentionMatrix to_matrix(const torch::Tensor& alpha, std::vector<std::string> src, std::vector<std::string> tgt) {
  AttentionMatrix m;
  m.src_tokens = std::move(src);
  m.tgt_tokens = std::move(tgt);
  auto a = alpha.to(torch::kFloat).cpu().contiguous();  // [T, S]
  auto acc = a.accessor<float, 2>();
  for (int64_t t = 0; t < a.size(0); ++t) {
    m.weights.emplace_back(a.size(1));
    for (int64_t j = 0; j < a.size(1); ++j) m.weights.back()[j] = acc[t][j];
  }
  return m;
}

}  // namespace

namespace {

// The model's alignment (alignment head, else attention) of examples `rows`
// of `ex`, each target (no EOS) read as the translation of its source (EOS
// included), in one padded batch: per row, [T + 1, S] on the CPU, EOS rows
// and columns included, padding left out.
std::vector<torch::Tensor> forced_weights(Translator& tr, const std::vector<Example>& ex,
                                          const std::vector<int64_t>& rows) {
  auto& model = tr.model();
  InferenceScope scope({model});
  const auto device = model->parameters().front().device();
  auto batch = make_batch(ex, rows).to(device);
  const auto alpha = model->alignment(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out)
                         .to(torch::kFloat)
                         .cpu();  // [B, T, S]
  std::vector<torch::Tensor> out;
  for (size_t r = 0; r < rows.size(); ++r) {
    const Example& e = ex[static_cast<size_t>(rows[r])];
    out.push_back(alpha[static_cast<int64_t>(r)]
                      .narrow(0, 0, static_cast<int64_t>(e.tgt.size()) + 1)
                      .narrow(1, 0, static_cast<int64_t>(e.src.size())));
  }
  return out;
}

}  // namespace

namespace {

// The first `max_pieces` pieces (0: all) of `text` by `tok`, as ids and as strings.
void encode_cropped(const Tokenizer& tok, const std::string& text, int64_t max_pieces, std::vector<int64_t>* ids,
                    std::vector<std::string>* pieces) {
  *ids = tok.encode(text);
  *pieces = tok.pieces(text);
  if (max_pieces > 0 && static_cast<int64_t>(ids->size()) > max_pieces) ids->resize(max_pieces);
  if (max_pieces > 0 && static_cast<int64_t>(pieces->size()) > max_pieces) pieces->resize(max_pieces);
}

}  // namespace

AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt, int64_t max_pieces) {
  return forced_attention(tr, std::vector<std::string>{src}, std::vector<std::string>{tgt}, max_pieces)[0];
}

std::vector<AttentionMatrix> forced_attention(Translator& tr, const std::vector<std::string>& src,
                                              const std::vector<std::string>& tgt, int64_t max_pieces) {
  if (src.size() != tgt.size())
    throw Error("forced alignment: " + std::to_string(src.size()) + " sources but " + std::to_string(tgt.size()) +
                " targets");
  const size_t n = src.size();
  std::vector<Example> ex(n);
  std::vector<std::vector<std::string>> src_pieces(n), tgt_pieces(n);
  for (size_t i = 0; i < n; ++i) {
    if (src[i].empty() || tgt[i].empty()) throw Error("forced alignment needs a non-empty source and target");
    encode_cropped(tr.src_tokenizer(), src[i], max_pieces, &ex[i].src, &src_pieces[i]);
    encode_cropped(tr.tgt_tokenizer(), tgt[i], max_pieces, &ex[i].tgt, &tgt_pieces[i]);
    ex[i].src.push_back(kEosId);
  }
  // Pairs of similar lengths share a batch (little padding): by source, then target length.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const Example &x = ex[static_cast<size_t>(a)], &y = ex[static_cast<size_t>(b)];
    return std::make_pair(x.src.size(), x.tgt.size()) < std::make_pair(y.src.size(), y.tgt.size());
  });
  std::vector<AttentionMatrix> out(n);
  // Floats a pass keeps per pair and target position besides its weights: the
  // decoder's states, gates, contexts, embeddings and head queries.
  const auto& o = tr.model()->options();
  const int64_t width = 4 * o.dec_hidden + 2 * o.enc_hidden + o.emb_dim + std::max(o.attn_dim, o.alignment_head);
  for (size_t first = 0; first < n;) {
    // As many pairs as fit kForcedAlignFloats ([rows, T, width] activations and [rows, T, S] weights), at least one.
    std::vector<int64_t> rows;
    int64_t S = 0, T = 0;
    for (size_t k = first; k < n && rows.size() < kForcedAlignBatch; ++k) {
      const Example& e = ex[static_cast<size_t>(order[k])];
      const int64_t s = std::max<int64_t>(S, static_cast<int64_t>(e.src.size()));
      const int64_t t = std::max<int64_t>(T, static_cast<int64_t>(e.tgt.size()) + 1);
      if (!rows.empty() && static_cast<int64_t>(rows.size() + 1) * t * (width + s) > kForcedAlignFloats) break;
      rows.push_back(order[k]);
      S = s;
      T = t;
    }
    first += rows.size();
    const auto alpha = forced_weights(tr, ex, rows);
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto i = static_cast<size_t>(rows[r]);
      out[i] = to_matrix(alpha[r], with_eos(std::move(src_pieces[i])), with_eos(std::move(tgt_pieces[i])));
    }
  }
  return out;
}

AttentionMatrix free_attention(Translator& tr, const std::string& src, const SearchOptions& search,
                               std::string* translation, int64_t max_pieces) {
  if (src.empty()) throw Error("alignment needs a non-empty source");
  TranslateOptions opt;
  opt.search = search;
  opt.search.n_best = 1;
  opt.max_input_length = max_pieces;  // the translator crops the source as encode_cropped() does
  auto hyp = tr.translate({src}, opt, /*with_attention=*/true)[0][0];
  if (translation != nullptr) *translation = tr.detokenize(hyp, src, /*replace_unk=*/false);
  return hypothesis_attention(tr, src, hyp, max_pieces);
}

AttentionMatrix hypothesis_attention(Translator& tr, const std::string& src, const Hypothesis& hyp,
                                     int64_t max_pieces) {
  std::vector<int64_t> src_ids;
  std::vector<std::string> src_pieces;
  encode_cropped(tr.src_tokenizer(), src, max_pieces, &src_ids, &src_pieces);
  src_ids.push_back(kEosId);
  std::vector<std::string> tgt;
  for (int64_t id : hyp.ids) tgt.push_back(tr.tgt_tokenizer().piece(id));
  tgt.push_back(kEos);
  // A model with an alignment head aligns its own translation as it would a given one.
  if (tr.model()->decoder->has_alignment_head()) {
    std::vector<Example> ex(1);
    ex[0].src = std::move(src_ids);
    ex[0].tgt = hyp.ids;
    return to_matrix(forced_weights(tr, ex, {0})[0], with_eos(std::move(src_pieces)), tgt);
  }
  auto alpha = hyp.attention.narrow(0, 0, std::min<int64_t>(hyp.attention.size(0), tgt.size()));
  tgt.resize(alpha.size(0));
  return to_matrix(alpha, with_eos(std::move(src_pieces)), tgt);
}

bool crop_to_whole_words(std::string* text, const std::vector<const Tokenizer*>& tokenizers, int64_t max_pieces) {
  if (max_pieces <= 0) return false;
  int64_t words = INT64_MAX;  // whole words that fit every tokenizer's limit
  for (const Tokenizer* tok : tokenizers) {
    const auto pieces = tok->pieces(*text);
    if (static_cast<int64_t>(pieces.size()) <= max_pieces) continue;
    // Piece max_pieces (0-based) is the first one left out: the words before its word are whole.
    words = std::min<int64_t>(words, piece_words(pieces)[static_cast<size_t>(max_pieces)]);
  }
  if (words == INT64_MAX) return false;
  words = std::max<int64_t>(words, 1);  // a first word longer than the limit: its first pieces
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  size_t i = 0;
  for (int64_t w = 0; w < words && i < text->size(); ++w) {
    while (i < text->size() && space((*text)[i])) ++i;
    while (i < text->size() && !space((*text)[i])) ++i;
  }
  text->resize(i);
  return true;
}

}  // namespace nmt
