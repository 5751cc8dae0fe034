// Every option of nmt, with its default, in one place. The command-line apps
// bind their flags to these fields and print these defaults; the layers read
// typed fields, never string-keyed bags.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

// How decoder queries are scored against encoder annotations h_j.
enum class AttentionType {
  kAdditive,  // Bahdanau: v^T tanh(W s + U h_j)
  kDot,       // Luong: s^T h_j (needs decoder hidden == 2 * encoder hidden)
  kGeneral,   // Luong: s^T W h_j
  kConcat,    // Luong: v^T tanh(W_a [s; h_j]) (W_a split in two blocks, keys precomputed)
  kNone,      // no attention: c_t is the mean annotation (RNNencdec baseline)
};
const char* to_string(AttentionType t);
// Parses "additive|dot|general|concat|none"; throws nmt::Error otherwise.
AttentionType parse_attention(const std::string& s);

// The decoder's recurrence.
enum class DecoderType {
  kBahdanau,  // s_t = GRU([E y_{t-1}; c_t], s_{t-1}), c_t attending with s_{t-1} (Bahdanau et al. 2015)
  kCgru,      // conditional GRU (Nematus, nmtpy): s'_t = GRU1(E y_{t-1}, s_{t-1}); c_t attends
              // with s'_t; s_t = GRU2(c_t, s'_t)
};
const char* to_string(DecoderType t);
// Parses "bahdanau|cgru"; throws nmt::Error otherwise.
DecoderType parse_decoder(const std::string& s);

// SentencePiece front end.
struct TokenizerOptions {
  std::string model_type = "unigram";  // "unigram" or "bpe"
  int vocab_size = 8000;               // pieces per vocabulary (a soft limit on tiny corpora)
  double character_coverage = 1.0;     // share of characters covered by the vocabulary
  bool shared = false;                 // one vocabulary for source and target
  std::string src_model;               // existing .model file to load instead of training
  std::string tgt_model;               // existing .model file for the target side
  int64_t input_sentence_size = 1000000;  // sentences sampled to train SentencePiece

  // Throws nmt::Error naming the first option out of its range.
  void validate() const;
};

// Architecture. Travels inside every checkpoint.
struct ModelOptions {
  int64_t src_vocab = 0;        // filled from the source tokenizer
  int64_t tgt_vocab = 0;        // filled from the target tokenizer
  int64_t emb_dim = 256;        // embedding size (also the deep-output size)
  int64_t enc_hidden = 512;     // encoder GRU size per direction
  int64_t enc_layers = 1;       // stacked bidirectional encoder layers
  int64_t dec_hidden = 512;     // decoder GRU size
  int64_t attn_dim = 512;       // additive/concat attention inner size
  AttentionType attention = AttentionType::kAdditive;  // score function
  DecoderType decoder = DecoderType::kBahdanau;        // recurrence (checkpoints without it: bahdanau)
  double dropout = 0.2;         // on embeddings, annotations and the deep output
  bool tie_embeddings = false;  // share target embedding and output projection

  // Throws nmt::Error naming the first field out of its range or
  // inconsistent with another.
  void validate() const;
  // Serializes as "key=value" lines; parse() rejects unknown keys with a hint.
  std::string serialize() const;
  static ModelOptions parse(const std::string& text, const std::string& origin);
  // The value of `field` (a key of serialize()) as text; throws nmt::Error for an unknown field.
  std::string field(const std::string& field) const;
};

// How gradients update the weights.
enum class OptimizerType {
  kAdam,  // Adam (Kingma & Ba 2015) with --adam-beta1/2
  kSgd,   // plain SGD: w -= lr * (gradient + weight_decay * w)
};
const char* to_string(OptimizerType t);
// Parses "adam|sgd"; throws nmt::Error otherwise.
OptimizerType parse_optimizer(const std::string& s);

// Which validation figure decides "best" and early stopping.
enum class StopMetric { kLoss, kPerplexity, kBleu, kChrf };
const char* to_string(StopMetric m);
StopMetric parse_stop_metric(const std::string& s);

// Data-parallel training: one process per GPU or CPU worker, joined through
// LibTorch's c10d (see distributed.h). The environment variables torchrun
// sets fill these (distributed_from_env); flags override them.
struct DistributedOptions {
  int rank = 0;                        // this process, 0 .. world_size-1 (RANK); rank 0 logs, validates and saves
  int world_size = 1;                  // processes in all (WORLD_SIZE); 1: not distributed
  int local_rank = 0;                  // process on this machine (LOCAL_RANK): picks cuda:LOCAL_RANK
  std::string master_addr = "127.0.0.1";  // host of rank 0, which serves the rendezvous store (MASTER_ADDR)
  int master_port = 29500;             // its port (MASTER_PORT)
  double timeout_minutes = 30;         // a collective waiting longer than this fails (rank 0 validating counts)
  int64_t bucket_mb = 25;              // gradients are all-reduced in flat buckets of about this size

  // Throws nmt::Error naming the first option out of its range (a rank
  // outside 0..world_size-1 included).
  void validate() const;
};

// Training run. Everything here can come from the command line or a TOML file.
struct TrainOptions {
  // data
  std::string train_src, train_tgt;  // two plain-text files, one sentence per line
  std::string train_tsv;             // or one TSV file: source<TAB>target
  std::string valid_src, valid_tgt;  // validation pair (or valid_tsv)
  std::string valid_tsv;
  std::string output_dir = "model";  // checkpoints, tokenizer and metrics go here
  int64_t max_src_tokens = 100;      // longer pairs (in pieces) are skipped, with a count
  int64_t max_tgt_tokens = 100;
  // Guided alignment (Chen et al. 2016; Marian's --guided-alignment): one
  // line of Pharaoh word links "i-j" (source-target, 0-based) per training
  // pair, e.g. from nmt-align --aligner ibm2. Attention is trained towards
  // them with a cross-entropy term of this weight.
  std::string guided_alignment;
  double guided_alignment_weight = 0.5;
  // Subword regularization (Kudo 2018): with spm_alpha > 0 every epoch
  // segments each training pair anew, drawing from its spm_nbest most
  // probable segmentations with probability proportional to P^spm_alpha
  // (unigram models only; not with guided alignment). 0: off.
  double spm_alpha = 0.0;
  int64_t spm_nbest = 64;

  // batching
  int64_t batch_tokens = 4096;  // token budget per batch (source or target, larger side)
  int64_t max_batch_sentences = 256;  // cap on sentences per batch

  // optimisation
  OptimizerType optimizer = OptimizerType::kAdam;
  double learning_rate = 1e-3;
  double adam_beta1 = 0.9, adam_beta2 = 0.999;
  double weight_decay = 0.0;
  double clip_norm = 1.0;         // global gradient-norm clip; 0 disables
  double label_smoothing = 0.1;
  double lr_decay = 0.5;          // multiply the learning rate on a plateau
  int64_t lr_patience = 2;        // validations without improvement before decaying
  double min_lr = 1e-5;           // never decay below this
  int64_t max_epochs = 20;
  int64_t max_steps = 0;          // 0: no step limit
  double max_minutes = 0;         // 0: no wall-clock limit
  int64_t early_stopping = 5;     // stop after this many validations without improvement; 0 disables
  int64_t max_bad_steps = 10;     // consecutive steps with a NaN/Inf loss or gradient before giving up
  StopMetric stop_metric = StopMetric::kBleu;

  // bookkeeping
  int64_t log_every = 100;        // progress line every N steps
  int64_t valid_every = 1000;     // validate (and checkpoint) every N steps and at each epoch end; 0: epoch ends only
  int64_t keep_checkpoints = 3;   // step-N.ckpt files kept besides last/best
  int64_t average = 0;            // at the end, average.ckpt: the mean of the newest N step-N.ckpt
                                  // (needs keep_checkpoints >= N), validated like the others; 0: off
  int64_t valid_max_sentences = 0;   // translate at most N validation sentences (0: all)
  int64_t valid_batch_sentences = 64;  // validation decoding batch size
  bool resume = false;            // continue from output_dir/last.ckpt
  // Model fields the user set explicitly (e.g. "emb_dim"); on resume each
  // must match the checkpoint's architecture, or training stops with a hint.
  std::vector<std::string> explicit_model_fields;
  uint64_t seed = 1;              // one seed for weights, dropout and data order

  // hardware
  std::string device = "auto";    // "cpu", "cuda" or "auto"
  int threads = 0;                // intra-op threads; 0: from NMT_THREADS or the machine
  DistributedOptions dist;        // data-parallel processes (world_size 1: one process)

  // Throws nmt::Error naming the first option out of its range, before any
  // work; checks `dist` too.
  void validate() const;
};

// Most CPU threads any option accepts.
constexpr int kMaxThreads = 1024;

}  // namespace nmt
