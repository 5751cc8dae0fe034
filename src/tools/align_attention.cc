// nmt-align's attention matrices: what a model attends to (or its alignment
// head gives) while it reads a given target (forced) or makes its own
// translation (free), and a side cut to whole words (see align.h).
#include <algorithm>
#include <climits>

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

// The model's alignment (alignment head, else attention) of target ids `tgt`
// (no EOS) read as the translation of source ids `src`: [T + 1, S + 1],
// EOS rows and columns included.
torch::Tensor forced_weights(Translator& tr, std::vector<int64_t> src, std::vector<int64_t> tgt) {
  auto& model = tr.model();
  InferenceScope scope({model});
  const auto device = model->parameters().front().device();
  std::vector<Example> ex(1);
  ex[0].src = std::move(src);
  ex[0].tgt = std::move(tgt);
  auto batch = make_batch(ex, {0}).to(device);
  return model->forward_aligned(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out).second[0];  // [T, S]
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
  if (src.empty() || tgt.empty()) throw Error("forced alignment needs a non-empty source and target");
  std::vector<int64_t> src_ids, tgt_ids;
  std::vector<std::string> src_pieces, tgt_pieces;
  encode_cropped(tr.src_tokenizer(), src, max_pieces, &src_ids, &src_pieces);
  encode_cropped(tr.tgt_tokenizer(), tgt, max_pieces, &tgt_ids, &tgt_pieces);
  src_ids.push_back(kEosId);
  auto alpha = forced_weights(tr, std::move(src_ids), std::move(tgt_ids));
  return to_matrix(alpha, with_eos(std::move(src_pieces)), with_eos(std::move(tgt_pieces)));
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
  if (tr.model()->decoder->has_alignment_head())
    return to_matrix(forced_weights(tr, std::move(src_ids), hyp.ids), with_eos(std::move(src_pieces)), tgt);
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
