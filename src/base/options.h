// Every option of nmt, with its default, in one place. Each struct names its
// fields once, in fields() (see fields.h): that list gives the command-line
// flags and their help (apps/cli.h), the text form stored in checkpoints and
// lookup by name. The layers read typed fields, never string-keyed bags.
// Torch-free: validate() only checks ranges and combinations.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/fields.h"
#include "base/option_enums.h"

namespace nmt {

// --- shared by every tool -------------------------------------------------------

// Most CPU threads any option accepts.
constexpr int kMaxThreads = 1024;

// Where the work runs.
struct RuntimeOptions {
  std::string device = "auto";  // "cpu", "cuda", "cuda:N" or "auto" (CUDA when available); see device.h
  int threads = 0;              // intra-op CPU threads; 0: NMT_THREADS or all cores

  void validate() const;  // throws nmt::Error for a thread count out of range
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v(Field{"device", "cpu, cuda, cuda:N or auto", "Hardware"}, s.device);
    v(Field{"threads", "CPU threads (0: NMT_THREADS or all cores)", "Hardware"}, s.threads);
  }
};

// --- nmt-train ------------------------------------------------------------------

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
    v(Field{"vocab-size", "Pieces per vocabulary (a soft limit on tiny corpora)", g}, s.vocab_size);
    v(Field{"character-coverage", "Share of characters the vocabulary covers", g}, s.character_coverage);
    v(Field{"shared-vocab", "One vocabulary for source and target", g}, s.shared);
    v(Field{"spm-sentences", "Sentences sampled to train SentencePiece", g}, s.input_sentence_size);
    v(Field{"src-spm", "Use this SentencePiece .model for the source instead of training one", g, nullptr, kPath},
      s.src_model);
    v(Field{"tgt-spm", "Use this SentencePiece .model for the target", g, nullptr, kPath}, s.tgt_model);
  }
};

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
  bool tie_embeddings = false;
  int64_t alignment_head = 0;  // size of the alignment head (AlignmentHeadImpl); 0: none

  // Throws nmt::Error naming the first field out of its range or
  // inconsistent with another.
  void validate() const;
  // Serializes as "key=value" lines (keys are the field names with '_');
  // parse() rejects unknown keys with a hint and lacking ones by name.
  std::string serialize() const;
  static ModelOptions parse(const std::string& text, const std::string& origin);
  // The value of `field` (a key of serialize()) as text; throws nmt::Error for an unknown field.
  std::string field(const std::string& field) const;

  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Model";
    v(Field{"src-vocab", "Source vocabulary size, from the tokenizer", g, nullptr, kInternal}, s.src_vocab);
    v(Field{"tgt-vocab", "Target vocabulary size, from the tokenizer", g, nullptr, kInternal}, s.tgt_vocab);
    v(Field{"emb-dim", "Embedding size (also the deep-output size)", g}, s.emb_dim);
    v(Field{"enc-hidden", "Encoder GRU size per direction", g}, s.enc_hidden);
    v(Field{"enc-layers", "Bidirectional encoder layers", g}, s.enc_layers);
    v(Field{"dec-hidden", "Decoder GRU size", g}, s.dec_hidden);
    v(Field{"attn-dim", "Additive/concat attention size", g}, s.attn_dim);
    v(Field{"attention", "Score function", g}, s.attention);
    v(Field{"decoder", "Recurrence: bahdanau, or cgru (conditional GRU, as Nematus)", g, nullptr, kMayBeAbsent},
      s.decoder);
    v(Field{"dropout", "Dropout on embeddings, annotations and the deep output", g}, s.dropout);
    v(Field{"word-dropout", "Dropout of whole words: each source and target input embedding zeroed with this probability",
            g, nullptr, kMayBeAbsent},
      s.word_dropout);
    v(Field{"tie-embeddings", "Tie target embeddings and output projection", g}, s.tie_embeddings);
    v(Field{"alignment-head",
            "Size of an alignment head (0: none): an attention whose query also sees the target piece it aligns, "
            "trained only by --guided-alignment and read by nmt-align's forced mode",
            g, nullptr, kMayBeAbsent},
      s.alignment_head);
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

  // Throws nmt::Error naming the first option out of its range (a rank
  // outside 0..world_size-1 included).
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Distributed (data-parallel; scripts/train-distributed.sh)";
    v(Field{"rank", "This process's rank (RANK); rank 0 logs, validates and saves", g}, s.rank);
    v(Field{"world-size", "Number of processes (WORLD_SIZE); 1: not distributed", g}, s.world_size);
    v(Field{"local-rank", "Rank on this machine: uses cuda:N (LOCAL_RANK)", g}, s.local_rank);
    v(Field{"master-addr", "Host of rank 0, which serves the rendezvous (MASTER_ADDR)", g}, s.master_addr);
    v(Field{"master-port", "Rendezvous port on rank 0's host (MASTER_PORT)", g}, s.master_port);
    v(Field{"dist-timeout", "Minutes a rank waits for the others (rank 0 validating counts)", g}, s.timeout_minutes);
    v(Field{"bucket-mb", "Gradients are all-reduced in flat buckets of about this many MB", g}, s.bucket_mb);
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
  int64_t max_batch_sentences = 256;

  OptimizerType optimizer = OptimizerType::kAdam;
  double learning_rate = 1e-3;
  double adam_beta1 = 0.9, adam_beta2 = 0.999;
  double weight_decay = 0.0;
  double clip_norm = 1.0;
  double label_smoothing = 0.1;
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
  // Model fields the user set explicitly (e.g. "emb_dim"); on resume each
  // must match the checkpoint's architecture, or training stops with a hint.
  std::vector<std::string> explicit_model_fields;
  // Tokenizer options the user set explicitly (e.g. "vocab-size"); on resume
  // --vocab-size, --spm-type and --shared-vocab must match the checkpoint's
  // vocabularies, or training stops with a hint.
  std::vector<std::string> explicit_tokenizer_fields;
  // The command line that started the run, quoted for a shell (the app
  // fills it; "" through the library): recorded in the run folder's
  // config.toml and train.log, and in each checkpoint.
  std::string command_line;

  RuntimeOptions runtime;
  DistributedOptions dist;

  // Throws nmt::UsageError naming the first option out of its range, in
  // conflict with another, or required and missing (the training data:
  // --train-src and --train-tgt, or --train-tsv), before any work; checks
  // `runtime` and `dist` too.
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v);
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

// --- nmt-translate --------------------------------------------------------------

// Widest beam any search accepts (memory grows with it; see TranslateOptions).
constexpr int64_t kMaxBeamSize = 256;

struct SearchOptions {
  int64_t beam_size = 1;
  double length_penalty = 0.6;    // GNMT alpha: score / ((5 + len) / 6)^alpha; 0 disables
  double max_length_ratio = 2.0;  // stop a hypothesis at ratio * source length + 5 tokens
  int64_t max_length = 256;
  int64_t n_best = 1;             // hypotheses returned per sentence (<= beam_size)
  bool no_cuda_graphs = false;    // CUDA: run greedy steps eagerly instead of replaying each as a CUDA graph

  // Throws nmt::Error naming the first option out of its range.
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Search";
    v(Field{"beam-size", "Beam size (1: greedy)", g, "-b"}, s.beam_size);
    v(Field{"length-penalty", "GNMT length penalty alpha", g}, s.length_penalty);
    v(Field{"max-length-ratio", "Output length cap: ratio * source + 5", g}, s.max_length_ratio);
    v(Field{"max-length", "Output length cap in pieces", g}, s.max_length);
    v(Field{"n-best", "Print the N best hypotheses in Moses' form 'i ||| hyp ||| features ||| score' (without -b: beam N)",
            g},
      s.n_best);
    v(Field{"no-cuda-graphs", "CUDA: run greedy steps eagerly instead of replaying each as a CUDA graph", g},
      s.no_cuda_graphs);
  }
};

// A lexical shortlist for search (search/shortlist.h).
struct ShortlistOptions {
  std::string path;        // lexical table (nmt-align --aligner ibm2 --format lex); "": no shortlist
  int64_t best = 50;       // translations kept per source piece
  int64_t frequent = 100;  // the vocabulary's first (most frequent) pieces, always candidates

  bool operator==(const ShortlistOptions& o) const { return path == o.path && best == o.best && frequent == o.frequent; }
  // Throws nmt::UsageError naming the first option out of its range.
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "Shortlist";
    v(Field{"shortlist", "Lexical table (nmt-align --aligner ibm2 --format lex): search only the target pieces it "
                         "lists for the batch's source pieces, and the most frequent ones; faster, translations "
                         "may change slightly (check BLEU on a dev set)", g}, s.path);
    v(Field{"shortlist-best", "Translations per source piece taken from the table", g}, s.best);
    v(Field{"shortlist-frequent", "The vocabulary's first N pieces are always candidates", g}, s.frequent);
  }
};

struct TranslateOptions {
  SearchOptions search;
  ShortlistOptions shortlist;
  int64_t batch_sentences = 64;
  int64_t batch_tokens = 0;
  int64_t max_input_length = 1000;
  bool int8 = false;  // the decoder step's products in dynamic int8 on the CPU (model/quantized.h): faster, logits ~1% off
  bool bf16 = false;  // the decoder step's products in bfloat16 on the CPU (model/quantized.h): faster, logits ~0.5% off
  // CPU: batches translated at once, each on one thread (0: as many as there
  // are intra-op threads; 1: one batch at a time over all threads). Small
  // batches' products use one core well and two poorly, so the cores go to
  // separate batches when there are several (Marian's --cpu-threads).
  int64_t parallel_batches = 0;

  // Throws nmt::Error naming the first option out of its range (search included).
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    SearchOptions::fields(s.search, v);
    const char* g = "Batching";
    v(Field{"batch-size", "Sentences per batch", g}, s.batch_sentences);
    v(Field{"batch-tokens", "Source tokens per batch (0: no budget)", g}, s.batch_tokens);
    v(Field{"max-input-length", "Crop longer inputs to this many pieces (0: never)", g}, s.max_input_length);
    v(Field{"parallel-batches", "CPU: translate this many batches at once, one thread each (0: one per thread; "
                                "1: a batch at a time over all threads)", g}, s.parallel_batches);
    v(Field{"int8", "CPU: the decoder step's matrix products in int8 (dynamic quantization): faster, translations may change "
                    "slightly (check BLEU on a dev set)", "Search"}, s.int8);
    v(Field{"bf16", "CPU: the decoder step's matrix products in bfloat16 (fast with AVX512-BF16): faster, translations may "
                    "change slightly (check BLEU on a dev set)", "Search"}, s.bf16);
    ShortlistOptions::fields(s.shortlist, v);
  }
};

// What nmt-translate does: streaming translation, or scoring given pairs.
struct StreamOptions {
  std::vector<std::string> model_paths;  // several: an ensemble (log-probabilities averaged per step)
  std::string input;          // "" or "-": stdin. In score mode: TSV source<TAB>target
  std::string output;         // "" or "-": stdout; a file is replaced whole at the end (io.h: OutputFile)
  TranslateOptions translate;
  int64_t window = 1000;
  int64_t max_line_bytes = 1 << 16;
  bool scores = false;
  bool replace_unk = false;
  bool score_mode = false;
  bool info = false;          // print what each -m checkpoint holds and stop
  bool evaluate = false;      // score the input (translations made elsewhere) against reference; no model
  std::string src, tgt;
  std::vector<std::string> references;  // one file per reference translation (several: multi-reference BLEU, chrF)
  std::string scores_json;
  ScoreFormat score_format = ScoreFormat::kText;  // how --evaluate prints its scores on its output
  bool bleu_lowercase = false;        // --lowercase: the main BLEU lowercases first (sacreBLEU -lc)
  BleuTokenizer bleu_tokenize = BleuTokenizer::k13a;  // --tokenize: the main BLEU's tokenizer
  RuntimeOptions runtime;

  // Throws nmt::UsageError naming the first option out of its range
  // (translate options included), in conflict with another, or required
  // and missing (-m, except with --evaluate).
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v);
};

// --- nmt-align ------------------------------------------------------------------

// The statistical word aligner (IBM model 2 with a diagonal prior).
struct WordAlignerOptions {
  int iterations = 5;
  double null_prob = 0.08;        // p0: prior probability that a target word links to no source word
  double diagonal_tension = 4.0;  // lambda in exp(-lambda |i/n - j/m|)
  double alpha = 0.01;            // Dirichlet prior of variational Bayes on t(f|e); 0: plain maximum likelihood

  // Throws nmt::Error naming the first option out of its range.
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    const char* g = "ibm2 aligner";
    v(Field{"ibm-iterations", "EM iterations", g}, s.iterations);
    v(Field{"ibm-tension", "Preference for links near the diagonal", g}, s.diagonal_tension);
    v(Field{"ibm-null-prob", "Prior probability that a target word links to no source word", g}, s.null_prob);
    v(Field{"ibm-alpha", "Dirichlet prior on t(f|e) (variational Bayes; 0: maximum likelihood)", g}, s.alpha);
  }
};

// What nmt-align does.
struct AlignRunOptions {
  Aligner aligner = Aligner::kAttention;
  std::string model_path;
  std::string src, tgt;             // two files (tgt empty: free mode)
  std::string tsv;                  // or pairs as TSV ("-": stdin)
  std::string pairs;                // or pairs as fast_align's "source ||| target" lines ("-": stdin)
  std::string output;               // "" or "-": stdout; a file is replaced whole at the end (io.h)
  AlignFormat format = AlignFormat::kCsv;
  AlignLevel level = AlignLevel::kSubword;  // csv, svg; pharaoh is always word level
  std::string output_dir;
  std::string heatmap_dir;
  HardMethod method = HardMethod::kArgmax;  // hard alignments (pharaoh, eval)
  double threshold = 0.5;
  int shift = 0;                    // target token t takes attention row t + shift (see shift_rows)
  std::string reverse_model;
  Symmetrization symmetrize = Symmetrization::kNone;
  std::string eval_gold;
  bool gold_one_based = false;
  WordAlignerOptions ibm;
  std::string ibm_train_src, ibm_train_tgt;  // ibm2: more pairs to learn from (not aligned or written)
  int64_t lex_best = 100;           // --format lex: translations written per source piece
  SearchOptions search;             // free mode
  int64_t max_pairs = 0;
  // Each side of a pair is cropped to this many pieces (0: never): the
  // attention matrices grow with the product of the two sides' lengths.
  int64_t max_input_length = 1000;
  RuntimeOptions runtime;

  // Throws nmt::UsageError naming the first option out of its range, in
  // conflict with another, or required and missing (-m for the attention
  // aligner, --tgt where the mode needs the target).
  void validate() const;
  template <class S, class V>
  static void fields(S& s, V&& v);
};

}  // namespace nmt

#include "base/options_fields.h"  // TrainOptions, StreamOptions and AlignRunOptions::fields()
