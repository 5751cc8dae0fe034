// The architecture of a model (ModelOptions): its fields with their ranges,
// and the "key=value" text form that travels inside every checkpoint.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/fields.h"
#include "base/option_enums.h"

namespace nmt {

// Architecture. Travels inside every checkpoint as serialize()'s text.
struct ModelOptions {
  int64_t src_vocab = 0;
  int64_t tgt_vocab = 0;
  int64_t emb_dim = 256;
  int64_t enc_hidden = 512;
  int64_t enc_layers = 1;
  int64_t dec_hidden = 512;
  int64_t attn_dim = 512;
  AttentionType attention = AttentionType::kAdditive;
  DecoderType decoder = DecoderType::kBahdanau;
  double dropout = 0.2;
  double word_dropout = 0;  // probability of zeroing a whole input embedding, source and target
  double dec_hidden_dropout = 0;  // variational dropout on the decoder's states in its recurrent products
  double enc_hidden_dropout = 0;  // variational dropout on the encoder's states in its recurrent products
  bool layer_norm = false;        // layer normalization of every GRU's gate pre-activations (GateNormImpl)
  bool tie_embeddings = false;
  bool tie_all_embeddings = false;  // the source embeddings are the target's too (needs tie_embeddings, one vocabulary)
  int64_t alignment_head = 0;  // size of the alignment head (AlignmentHeadImpl); 0: none

  // Largest layer size and vocabulary the fields accept.
  static constexpr int64_t kMaxDim = 1 << 16, kMaxVocab = 1 << 22;

  // Throws nmt::UsageError naming the first field out of its range ("model
  // option emb_dim", as checkpoints store it) or inconsistent with another.
  void validate() const;
  // The options (as "--name") set apart from their defaults that this
  // architecture has no layer for: --attn-dim with dot, general or no
  // attention (only additive and concat attention have that layer). The
  // trainer warns of them: a config file may carry them to any attention.
  // Never throws but on allocation.
  std::vector<std::string> unused() const;
  // Serializes as "key=value" lines (keys are the field names with '_');
  // parse() rejects unknown keys with a hint and lacking ones by name.
  std::string serialize() const;
  static ModelOptions parse(const std::string& text, const std::string& origin);
  // The value of `field` (a key of serialize()) as text; throws nmt::Error for an unknown field.
  std::string field(const std::string& field) const;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Model";
    v(Field{"src-vocab", "Source vocabulary size, from the tokenizer", g, nullptr, kInternal}.within(1, kMaxVocab),
      s.src_vocab);
    v(Field{"tgt-vocab", "Target vocabulary size, from the tokenizer", g, nullptr, kInternal}.within(1, kMaxVocab),
      s.tgt_vocab);
    v(Field{"emb-dim", "Embedding size (also the deep-output size)", g}.within(1, kMaxDim), s.emb_dim);
    v(Field{"enc-hidden", "Encoder GRU size per direction", g}.within(1, kMaxDim), s.enc_hidden);
    v(Field{"enc-layers", "Bidirectional encoder layers", g}.within(1, 64), s.enc_layers);
    v(Field{"dec-hidden", "Decoder GRU size", g}.within(1, kMaxDim), s.dec_hidden);
    v(Field{"attn-dim", "Additive/concat attention size", g}.within(1, kMaxDim), s.attn_dim);
    v(Field{"attention", "Score function", g}, s.attention);
    v(Field{"decoder", "Recurrence: bahdanau, or cgru (conditional GRU, as Nematus)", g, nullptr, kMayBeAbsent},
      s.decoder);
    v(Field{"dropout", "Dropout on embeddings, annotations and the deep output", g}.within(0.0, 1.0, End::kClosed,
                                                                                         End::kOpen),
      s.dropout);
    v(Field{"word-dropout", "Dropout of whole words: each source and target input embedding zeroed with this probability",
            g, nullptr, kMayBeAbsent}
          .within(0.0, 1.0, End::kClosed, End::kOpen),
      s.word_dropout);
    v(Field{"dec-hidden-dropout",
            "Variational dropout on the decoder's GRU states where they enter its recurrent products and the "
            "attention query: one mask per sentence for all its steps (Gal & Ghahramani 2016; Nematus's "
            "dropout_hidden); the states the GRUs carry forward are not dropped",
            g, nullptr, kMayBeAbsent}
          .within(0.0, 1.0, End::kClosed, End::kOpen),
      s.dec_hidden_dropout);
    v(Field{"enc-hidden-dropout",
            "Variational dropout on the encoder's GRU states where they enter its recurrent products: one mask "
            "per sentence, layer and direction for all its steps (Gal & Ghahramani 2016; Nematus's "
            "dropout_hidden); the annotations and the states carried forward are not dropped",
            g, nullptr, kMayBeAbsent}
          .within(0.0, 1.0, End::kClosed, End::kOpen),
      s.enc_hidden_dropout);
    v(Field{"layer-norm",
            "Layer normalization of every GRU's gate pre-activations, its input and recurrent products apart "
            "(Ba et al. 2016, as Nematus normalizes them); the encoder then runs step by step",
            g, nullptr, kMayBeAbsent},
      s.layer_norm);
    v(Field{"tie-embeddings", "Tie target embeddings and output projection", g}, s.tie_embeddings);
    v(Field{"tie-all-embeddings",
            "Tie the source embeddings to the target's as well (three-way tying, Press & Wolf 2017; Marian's "
            "--tied-embeddings-all): needs --tie-embeddings and one SentencePiece model for both sides "
            "(--shared-vocab)",
            g, nullptr, kMayBeAbsent},
      s.tie_all_embeddings);
    v(Field{"alignment-head",
            "Size of an alignment head (0: none): an attention whose query also sees the target piece it aligns, "
            "trained only by --guided-alignment and read by nmt-align's forced mode",
            g, nullptr, kMayBeAbsent}
          .within(0, kMaxDim),
      s.alignment_head);
  }
};

}  // namespace nmt
