// The options of nmt-train with their field lists (fields.h) and ranges: the
// tokenizer (TokenizerOptions), data-parallel training (DistributedOptions),
// the run itself (TrainOptions) and --release/--convert (ReleaseOptions).
// The model's architecture is in model_options.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/fields.h"
#include "base/option_enums.h"
#include "base/runtime_options.h"

namespace nmt {

// SentencePiece front end.
struct TokenizerOptions {
  std::string model_type = "unigram";
  int vocab_size = 8000;
  double character_coverage = 1.0;
  bool shared = false;
  std::string src_model;
  std::string tgt_model;
  int64_t input_sentence_size = 1000000;

  // Throws nmt::UsageError naming the first option out of its range (or
  // --tgt-spm without --src-spm).
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Tokenizer";
    v(Field{"spm-type", "SentencePiece model type: unigram or bpe", g}, s.model_type);
    v(Field{"vocab-size", "Pieces per vocabulary (a soft limit on tiny corpora)", g}.within(8, 1 << 22), s.vocab_size);
    v(Field{"character-coverage", "Share of characters the vocabulary covers", g}.within(0.0, 1.0, End::kOpen),
      s.character_coverage);
    v(Field{"shared-vocab", "One vocabulary for source and target", g}, s.shared);
    v(Field{"spm-sentences", "Sentences sampled to train SentencePiece", g}.at_least(1), s.input_sentence_size);
    v(Field{"src-spm", "Use this SentencePiece .model for the source instead of training one", g, nullptr, kPath},
      s.src_model);
    v(Field{"tgt-spm", "Use this SentencePiece .model for the target", g, nullptr, kPath}, s.tgt_model);
  }
};

// Data-parallel training: one process per GPU or CPU worker, joined through
// LibTorch's c10d (see distributed.h). The environment variables torchrun
// sets fill these (distributed_from_env); flags override them.
struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  double timeout_minutes = 30;
  int64_t bucket_mb = 25;

  // Throws nmt::UsageError naming the first option out of its range (a rank
  // outside 0..world_size-1 included).
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Distributed (data-parallel; scripts/train-distributed.sh)";
    v(Field{"rank", "This process's rank (RANK); rank 0 logs, validates and saves", g}, s.rank);  // below --world-size
    v(Field{"world-size", "Number of processes (WORLD_SIZE); 1: not distributed", g}.within(1, 1 << 16), s.world_size);
    v(Field{"local-rank", "Rank on this machine: uses cuda:N (LOCAL_RANK)", g}.within(0, 1 << 16), s.local_rank);
    v(Field{"master-addr", "Host of rank 0, which serves the rendezvous (MASTER_ADDR)", g}, s.master_addr);
    v(Field{"master-port", "Rendezvous port on rank 0's host (MASTER_PORT)", g}.within(1, 65535), s.master_port);
    v(Field{"dist-timeout", "Minutes a rank waits for the others (rank 0 validating counts)", g}
          .within(0.0, 7 * 24 * 60.0, End::kOpen),
      s.timeout_minutes);
    v(Field{"bucket-mb", "Gradients are all-reduced in flat buckets of about this many MB", g}.within(1, 1 << 14),
      s.bucket_mb);
  }
};

// Training run. Everything here can come from the command line or a config file.
struct TrainOptions {
  std::string train_src, train_tgt, train_tsv;
  std::string valid_src, valid_tgt, valid_tsv;
  std::string output_dir = "model";
  int64_t max_src_tokens = 100;
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

  int64_t batch_tokens = 4096;
  int64_t batch_sentences = 256;

  OptimizerType optimizer = OptimizerType::kAdam;
  double learning_rate = 1e-3;
  double adam_beta1 = 0.9, adam_beta2 = 0.999;
  double weight_decay = 0.0;
  double clip_norm = 1.0;
  double label_smoothing = 0.1;
  // R-Drop (Liang et al. 2021): each batch runs twice (its rows repeated,
  // so two dropout masks) and the loss adds this alpha times the symmetric
  // KL divergence between the two runs' output distributions (the paper's
  // weighting; train/losses.h's consistency_loss()). About twice the
  // compute per step. 0: off.
  double r_drop = 0.0;
  // Word-level knowledge distillation (Kim & Rush 2016; train/teachers.h):
  // these checkpoints (the run's SentencePiece models) score every batch,
  // and the loss mixes the cross-entropy against the reference, weighted
  // 1 - kd_weight, with the cross-entropy against the teachers' ensemble's
  // distribution, weighted kd_weight. Each teacher adds about one forward
  // pass per batch. Empty: off.
  std::vector<std::string> kd_teachers;
  double kd_weight = 0.5;
  // Exponential smoothing (Marian's --exponential-smoothing): a moving
  // average of the weights, a += d (w - a) after every step with
  // d = max(this, 9 / (step + 9)), which validation, checkpoints and so
  // translation use; training steps the weights themselves
  // (train/smoothing.h). About 1 / this many steps are averaged. 0: off.
  double exponential_smoothing = 0.0;
  double lr_decay = 0.5;
  int64_t lr_patience = 2;
  int64_t lr_decay_start = 0;  // from the end of this epoch on, decay at every epoch end (0: plateaus only)
  double min_lr = 1e-5;
  int64_t max_epochs = 20;
  int64_t max_steps = 0;
  double max_minutes = 0;
  int64_t early_stopping = 5;
  int64_t max_bad_steps = 10;
  StopMetric stop_metric = StopMetric::kBleu;
  int64_t seed = 1;  // 0 .. INT64_MAX (validate()), what config files and checkpoints hold
  bool resume = false;
  bool fixed_threads = false;  // keep --threads while other processes keep cores busy (else ThreadGovernor)
  // CPU: the matrix products of forward and backward in bfloat16 (LibTorch's
  // autocast; the recurrence rounds its own), weights, optimizer and loss in
  // float (model/mixed_precision.h). Fast with AVX512-BF16 or AMX, emulated
  // and slower without.
  bool bf16 = false;
  // CUDA: each training step replayed from a CUDA graph, one per padded
  // batch shape (train/graphed_step.h); Adam, one process, no guided
  // alignment. Elsewhere the same padded steps run eagerly.
  bool cuda_graphs = false;
  // CPU: each batch is trained as this many parts side by side, each on one
  // thread, handed out as threads come free, their gradients summed in a
  // fixed order (train/batch_parts.h). 0: automatic, kPartsPerThread parts
  // per --threads for batches of at least kMinPartSentences sentences a
  // thread, else whole (README, "--batch-parts"); 1: always the whole batch
  // over all threads; N: N parts.
  int64_t batch_parts = 0;

  int64_t log_every = 100;
  int64_t valid_every = 1000;
  int64_t keep_checkpoints = 3;
  int64_t average = 0;
  int64_t valid_max_sentences = 0;
  int64_t valid_batch_sentences = 64;  // validation decoding batch size
  // The validation BLEU (logged, and --stop-metric bleu) as sacreBLEU's
  // --tokenize and -lc make it: "none" scores text tokenized beforehand as
  // papers do (multi-bleu); the default, cased 13a, suits raw text.
  BleuTokenizer valid_bleu_tokenize = BleuTokenizer::k13a;
  bool valid_bleu_lowercase = false;
  // The options the user set (the app fills it). On resume each model
  // option among them (e.g. "emb-dim") must match the checkpoint's
  // architecture, and --vocab-size, --spm-type, --shared-vocab, --src-spm
  // and --tgt-spm its vocabularies, or training stops with a hint; options
  // not given take the checkpoint's values.
  GivenOptions given;
  // The command line that started the run, quoted for a shell (the app
  // fills it; "" through the library): recorded in the run folder's
  // config.toml and train.log, and in each checkpoint.
  std::string command_line;

  RuntimeOptions runtime;
  DistributedOptions dist;

  // Throws nmt::UsageError naming the first option out of its range, in
  // conflict with another, required and missing (the training data:
  // --train-src and --train-tgt, or --train-tsv), or set apart from its
  // default while the option it tunes is off (--kd-weight without
  // --kd-teachers, --guided-alignment-weight without --guided-alignment,
  // --spm-nbest without --spm-alpha, Adam's betas with --optimizer sgd),
  // before any work; checks `runtime` and `dist` too.
  void validate() const;
  // The options (as "--name") that act only on validations and are set
  // apart from their defaults while no validation data is given (--lr-decay
  // and --min-lr among them without --lr-decay-start): empty with
  // validation data. The trainer warns of them (a recipe's config file
  // may carry them to a run without validation). Never throws but on
  // allocation.
  std::vector<std::string> unused_without_validation() const;
  template <class S, class V>
  static void fields(S& s, V&& v);
  template <class S, class V>
  static void logging_fields(S& s, V&& v);
  template <class S, class V>
  static void loss_fields(S& s, V&& v);
};

// nmt-train --release IN OUT: a model to ship, IN's model without its optimizer
// and training state (model/checkpoint.h, release_checkpoint). An action of the
// command line, not a setting: config files and --dump-config leave it out.
struct ReleaseOptions {
  std::vector<std::string> paths;    // IN OUT; empty: train as usual
  std::vector<std::string> convert;  // IN OUT: a format 1 or 2 checkpoint into the current format

  // Throws nmt::UsageError unless each of `paths` and `convert` is empty or
  // holds two non-empty paths, and at most one of them is given.
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v(Field{"release", "Write OUT: checkpoint IN without its optimizer and training state, a model to ship "
                       "(smaller; translates and aligns as IN does; cannot be resumed); then exit",
            "Release"},
      s.paths);
    v(Field{"convert", "Write OUT: checkpoint IN of an older format (1 or 2) in the current one, read without "
                       "running anything from the file; then exit",
            "Release"},
      s.convert);
  }
};

// TrainOptions' fields, in the order --help lists them.
template <class S, class V>
void TrainOptions::fields(S& s, V&& v) {
  const char* data = "Data";
  v(Field{"train-src", "Training source text, one sentence per line", data, nullptr, kPath}, s.train_src);
  v(Field{"train-tgt", "Training target text, aligned with --train-src", data, nullptr, kPath}, s.train_tgt);
  v(Field{"train-tsv", "Training pairs as source<TAB>target lines", data, nullptr, kPath}, s.train_tsv);
  v(Field{"valid-src", "Validation source text", data, nullptr, kPath}, s.valid_src);
  v(Field{"valid-tgt", "Validation target text", data, nullptr, kPath}, s.valid_tgt);
  v(Field{"valid-tsv", "Validation pairs as TSV", data, nullptr, kPath}, s.valid_tsv);
  v(Field{"output", "Folder for checkpoints, tokenizers and metrics", data, "-o", kPath}, s.output_dir);
  v(Field{"guided-alignment", "Word links (Pharaoh i-j, one line per training pair) that attention is trained towards",
          data, nullptr, kPath},
    s.guided_alignment);
  v(Field{"guided-alignment-weight", "Weight of the guided-alignment cross-entropy", data}.at_least(0.0),
    s.guided_alignment_weight);
  v(Field{"max-src-tokens", "Skip training pairs with a longer source (pieces)", data}.at_least(1), s.max_src_tokens);
  v(Field{"max-tgt-tokens", "Skip training pairs with a longer target (pieces)", data}.at_least(1), s.max_tgt_tokens);
  const char* tok = "Tokenizer";
  v(Field{"spm-alpha", "Subword regularization: sample each epoch's training segmentations with this alpha "
                       "(0: off; unigram only)", tok}.within(0.0, 100.0),
    s.spm_alpha);
  v(Field{"spm-nbest", "With --spm-alpha: sample among this many best segmentations", tok}.within(2, 1000),
    s.spm_nbest);

  const char* tr = "Training";
  v(Field{"batch-tokens", "Padded tokens per batch: sentences x the longer side's longest line", tr}.at_least(1), s.batch_tokens);
  v(Field{"batch-sentences", "Sentences per batch at most", tr, nullptr, 0, "max-batch-sentences"}.at_least(1), s.batch_sentences);
  v(Field{"optimizer", "adam, or sgd (plain gradient descent)", tr}, s.optimizer);
  v(Field{"learning-rate", "Learning rate", tr}.above(0.0), s.learning_rate);
  v(Field{"adam-beta1", "Adam's beta1", tr}.within(0.0, 1.0, End::kClosed, End::kOpen), s.adam_beta1);
  v(Field{"adam-beta2", "Adam's beta2", tr}.within(0.0, 1.0, End::kClosed, End::kOpen), s.adam_beta2);
  v(Field{"weight-decay", "Weight decay (L2, both optimizers)", tr}.at_least(0.0), s.weight_decay);
  v(Field{"clip-norm", "Gradient-norm clipping (0: off)", tr}.at_least(0.0), s.clip_norm);
  loss_fields(s, v);
  v(Field{"exponential-smoothing", "Validate, save and translate with a moving average of the weights, updated "
                                   "each step by this factor (about 1/factor steps averaged; 0: off)", tr}
        .within(0.0, 1.0, End::kClosed, End::kOpen),
    s.exponential_smoothing);
  v(Field{"lr-decay", "Learning-rate factor on a validation plateau", tr}.within(0.0, 1.0, End::kOpen), s.lr_decay);
  v(Field{"lr-patience", "Validations without improvement before decaying", tr}.at_least(1), s.lr_patience);
  v(Field{"lr-decay-start", "Also decay by --lr-decay at the end of this epoch and of every later one (0: off)", tr}
        .at_least(0),
    s.lr_decay_start);
  v(Field{"min-lr", "Lowest learning rate", tr}.at_least(0.0), s.min_lr);
  v(Field{"max-epochs", "Epochs at most", tr}.at_least(1), s.max_epochs);
  v(Field{"max-steps", "Steps at most (0: no limit)", tr}.at_least(0), s.max_steps);
  v(Field{"max-minutes", "Wall-clock minutes at most (0: no limit)", tr}.at_least(0.0), s.max_minutes);
  v(Field{"early-stopping", "Stop after N validations without improvement (0: off)", tr}.at_least(0), s.early_stopping);
  v(Field{"max-bad-steps", "Stop after N batches in a row with a NaN/Inf loss or gradient", tr}.at_least(1), s.max_bad_steps);
  v(Field{"stop-metric", "Validation figure for best model and early stopping", tr}, s.stop_metric);
  v(Field{"seed", "Seed for weights, dropout and data order", tr}.at_least(0), s.seed);
  v(Field{"resume", "Continue the run in --output from last.ckpt (when it is missing, from the newest step-N.ckpt)", tr}, s.resume);
  v(Field{"fixed-threads", "On the CPU, keep --threads even while other processes keep cores busy "
                           "(by default training then runs on the cores they leave free)", "Hardware"},
    s.fixed_threads);
  v(Field{"batch-parts", "On the CPU, train each batch as N parts side by side, one thread each, gradients summed "
                         "(0: one part per thread for batches large enough to gain from it, else whole; 1: always the whole batch over all threads)", "Hardware"}
        .within(0, kMaxThreads),
    s.batch_parts);
  v(Field{"bf16", "On the CPU, matrix products in bfloat16 (weights, optimizer and loss stay float): faster with "
                 "AVX512-BF16 or AMX units, emulated and slower without", "Hardware"},
    s.bf16);
  v(Field{"cuda-graphs", "On CUDA, replay each training step from a CUDA graph, one per padded batch shape (Adam, "
                         "one process, no guided alignment); elsewhere the same padded steps run eagerly", "Hardware"},
    s.cuda_graphs);

  logging_fields(s, v);
  RuntimeOptions::fields(s.runtime, v);
  DistributedOptions::fields(s.dist, v);
}

// TrainOptions' fields of the loss (in --help's Training section, after the
// optimizer's): label smoothing, R-Drop and word-level distillation.
template <class S, class V>
void TrainOptions::loss_fields(S& s, V&& v) {
  const char* g = "Training";
  v(Field{"label-smoothing", "Label smoothing", g}.within(0.0, 1.0, End::kClosed, End::kOpen), s.label_smoothing);
  v(Field{"r-drop", "R-Drop: run each batch twice (two dropout masks) and add this weight times the symmetric KL "
                    "divergence between the runs' outputs (about twice the compute; 0: off)", g}
        .at_least(0.0),
    s.r_drop);
  v(Field{"kd-teachers", "Word-level distillation: checkpoints with this run's SentencePiece models whose ensemble's "
                         "distribution the student learns at every target position beside the reference (repeat or "
                         "list; each about one forward pass per batch)", g, nullptr, kMultiple | kPath},
    s.kd_teachers);
  v(Field{"kd-weight", "With --kd-teachers: the weight of the teachers' term; the reference's is 1 minus it", g,
          nullptr}
        .within(0.0, 1.0),
    s.kd_weight);
}

// TrainOptions' logging and checkpoint fields, which fields() lists after the others.
template <class S, class V>
void TrainOptions::logging_fields(S& s, V&& v) {
  const char* bk = "Logging and checkpoints";
  v(Field{"log-every", "Progress line every N steps", bk}.at_least(0), s.log_every);
  v(Field{"valid-every", "Validate and checkpoint every N steps and at each epoch end (0: epoch ends only)", bk}
        .at_least(0),
    s.valid_every);
  v(Field{"keep-checkpoints", "step-N.ckpt files kept besides last/best", bk}.at_least(0), s.keep_checkpoints);
  v(Field{"average", "At the end, write average.ckpt: the mean of the newest N step-N.ckpt (0: off)", bk}
        .within(0, 1000),
    s.average);
  v(Field{"valid-max-sentences", "Translate at most N validation sentences (0: all)", bk}.at_least(0),
    s.valid_max_sentences);
  v(Field{"valid-batch-sentences", "Sentences per batch when translating the validation set", bk, nullptr, 0,
          "valid-batch-size"}.at_least(1),
    s.valid_batch_sentences);
  v(Field{"valid-bleu-tokenize", "Validation BLEU's tokenizer, as sacreBLEU's --tokenize: 13a, intl, char or none "
                                 "(none: text tokenized beforehand)", bk},
    s.valid_bleu_tokenize);
  v(Field{"valid-bleu-lowercase", "Validation BLEU lowercases both sides first (sacreBLEU -lc)", bk},
    s.valid_bleu_lowercase);
}

}  // namespace nmt
