// The training loop.
#include "trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "alignment.h"
#include "batch.h"
#include "checkpoint.h"
#include "corpus.h"
#include "device.h"
#include "distributed.h"
#include "error.h"
#include "io.h"
#include "json.h"
#include "metrics.h"
#include "schedule.h"
#include "translator.h"

namespace nmt {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// Peak resident set size of this process (VmHWM), in MiB; 0 if unknown.
int64_t peak_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "VmHWM:") {
      in >> kb;
      return kb / 1024;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string hms(double seconds) {
  auto s = static_cast<int64_t>(seconds);
  std::ostringstream o;
  o << s / 3600 << ':' << std::setw(2) << std::setfill('0') << (s / 60) % 60 << ':' << std::setw(2)
    << std::setfill('0') << s % 60;
  return o.str();
}

ParallelCorpus read_corpus(const std::string& src, const std::string& tgt, const std::string& tsv, const char* what) {
  if (!tsv.empty()) {
    if (!src.empty() || !tgt.empty()) throw Error(std::string("give the ") + what + " data as two files or one TSV, not both");
    return read_tsv(tsv);
  }
  if (src.empty() || tgt.empty()) throw Error(std::string("no ") + what + " data: give --" + what + "-src and --" + what + "-tgt, or --" + what + "-tsv");
  return read_parallel(src, tgt);
}

// Guided-alignment links of one pair at piece level: every piece of source
// word i with every piece of target word j, for each word link i-j. Throws
// nmt::Error located at path:line for a link outside the sentence.
std::vector<std::pair<int32_t, int32_t>> guide_links(const std::string& line, const std::string& path, int64_t line_no,
                                                     const std::vector<int>& src_words,
                                                     const std::vector<int>& tgt_words) {
  const auto links = parse_gold_line(line, path, line_no, false).possible;
  const int ns = src_words.empty() ? 0 : src_words.back() + 1, nt = tgt_words.empty() ? 0 : tgt_words.back() + 1;
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const auto& [i, j] : links) {
    if (i < 0 || j < 0 || i >= ns || j >= nt)
      throw Error(located(path, line_no, "link " + std::to_string(i) + "-" + std::to_string(j) + " is outside a pair of " +
                                             std::to_string(ns) + " and " + std::to_string(nt) + " words"));
    for (size_t s = 0; s < src_words.size(); ++s)
      if (src_words[s] == i)
        for (size_t t = 0; t < tgt_words.size(); ++t)
          if (tgt_words[t] == j) out.emplace_back(static_cast<int32_t>(s), static_cast<int32_t>(t));
  }
  return out;
}

// Tokenizes a corpus; pairs over the length limits are counted, not kept.
// With `guide` (one line of word links per input line of the corpus, read
// from `guide_path`), each example also gets its piece-level links. `kept`
// receives the corpus index of each example.
std::vector<Example> encode_corpus(const ParallelCorpus& c, const Tokenizer& st, const Tokenizer& tt,
                                   int64_t max_src, int64_t max_tgt, int64_t* skipped,
                                   const std::vector<std::string>* guide = nullptr, const std::string& guide_path = "",
                                   std::vector<int64_t>* kept = nullptr) {
  std::vector<Example> out;
  out.reserve(c.src.size());
  *skipped = 0;
  for (size_t i = 0; i < c.src.size(); ++i) {
    Example e;
    e.src = st.encode(c.src[i]);
    e.tgt = tt.encode(c.tgt[i]);
    if (static_cast<int64_t>(e.src.size()) > max_src || static_cast<int64_t>(e.tgt.size()) > max_tgt || e.src.empty() ||
        e.tgt.empty()) {
      ++*skipped;
      continue;
    }
    if (guide != nullptr) {
      const int64_t line = c.line[i];
      e.guide = guide_links((*guide)[line - 1], guide_path, line, piece_words(st.pieces(c.src[i])),
                            piece_words(tt.pieces(c.tgt[i])));
    }
    e.src.push_back(kEosId);
    out.push_back(std::move(e));
    if (kept != nullptr) kept->push_back(static_cast<int64_t>(i));
  }
  return out;
}

// Appends JSON lines to metrics.jsonl.
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path) : out_(path, std::ios::app) {
    if (!out_) throw Error(located(path, 0, "cannot open for writing"));
  }
  void write(const JsonObject& record) {
    out_ << record.str() << '\n';
    out_.flush();
  }

 private:
  std::ofstream out_;
};

struct ValidResult {
  double loss = 0;        // mean token NLL (no label smoothing)
  double perplexity = 0;
  double bleu = 0;
  double chrf = 0;
  double exact_match = 0;  // % of sentences translated exactly as the reference
};

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainOptions& opt, const std::vector<torch::Tensor>& params) {
  if (opt.optimizer == OptimizerType::kSgd)
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(opt.learning_rate).weight_decay(opt.weight_decay));
  return std::make_unique<torch::optim::Adam>(
      params, torch::optim::AdamOptions(opt.learning_rate)
                  .betas({opt.adam_beta1, opt.adam_beta2})
                  .weight_decay(opt.weight_decay));
}

// The figure to maximize for `m`.
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

// One step's figures on this rank; all_reduce() makes them the step's.
struct StepStats {
  double loss_sum = 0;    // summed (label-smoothed) token losses; not finite when the loss was not
  int64_t tokens = 0;     // target tokens
  int64_t sentences = 0;
  bool finite = true;     // the loss was finite (after all_reduce: on every rank)

  // Sums the figures over all ranks; a no-op without `comm`.
  void all_reduce(Communicator* comm) {
    if (comm == nullptr) return;
    auto t = torch::tensor({static_cast<double>(tokens), finite ? loss_sum : 0.0, static_cast<double>(sentences),
                            finite ? 0.0 : 1.0}, torch::kDouble);
    comm->all_reduce_sum({t});
    tokens = static_cast<int64_t>(t[0].item<double>());
    loss_sum = t[1].item<double>();
    sentences = static_cast<int64_t>(t[2].item<double>());
    finite = t[3].item<double>() == 0;
  }
};

class Trainer {
 public:
  Trainer(const TrainOptions& opt, const TokenizerOptions& tok, ModelOptions model, const std::atomic<bool>* stop)
      : opt_(opt), tok_opt_(tok), model_opt_(model), stop_(stop) {}

  TrainResult run();

 private:
  void prepare();
  // Takes the output folder (rank 0): creates it, locks it, removes stale
  // temporary files. Returns whether a run can be resumed from it.
  bool claim_output();
  // After a failed start: removes what this run put into a folder it created.
  void undo_claim();
  ValidResult validate();
  void save(const std::string& name);
  void prune_step_checkpoints();
  // --average N: average.ckpt from the newest N step checkpoints, validated.
  void write_average(TrainResult* result);
  bool stop_requested() const { return stop_ && stop_->load(); }
  // Rank 0 (or the only process): logs, validates and writes files.
  bool is_main() const { return !comm_ || comm_->rank() == 0; }
  // Subword regularization (--spm-alpha): the batch `indices` of train_ with
  // segmentations sampled anew, seeded by (seed, epoch, example), so that a
  // resumed run draws the same ones. A sample over the length limits keeps
  // the usual segmentation. Batches were planned with the usual lengths, so
  // sampled batches run somewhat over --batch-tokens.
  Batch sampled_batch(const std::vector<int64_t>& indices) const;
  // Makes every rank hold rank 0's tokenizers, weights and (on resume) state.
  void share_from_main(bool resuming);

  TrainOptions opt_;
  TokenizerOptions tok_opt_;
  ModelOptions model_opt_;
  const std::atomic<bool>* stop_;

  torch::Device device_{torch::kCPU};
  Tokenizer src_tok_, tgt_tok_;
  Seq2Seq model_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<Example> train_;
  std::vector<std::pair<std::string, std::string>> train_text_;  // train_'s text, kept for --spm-alpha
  ParallelCorpus valid_corpus_;
  std::vector<Example> valid_;
  std::vector<std::vector<int64_t>> batches_;
  TrainState state_;
  std::unique_ptr<MetricsLog> metrics_;
  std::deque<std::string> step_checkpoints_;
  std::unique_ptr<Communicator> comm_;  // null when training as one process
  std::unique_ptr<RunLock> lock_;        // rank 0: the output folder is this run's
  bool created_output_ = false;          // rank 0 made the output folder (removed again if the start fails)
  std::string resume_path_;              // the checkpoint resumed from (a local copy on ranks > 0)
};

bool Trainer::claim_output() {
  const std::string& dir = opt_.output_dir;
  std::error_code ec;
  created_output_ = !fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) throw Error(located(dir, 0, "cannot create output folder: " + ec.message()));
  lock_ = std::make_unique<RunLock>(dir);
  if (const int stale = remove_stale_temporaries(dir); stale > 0)
    spdlog::info("removed {} temporary files of an earlier run that did not finish", stale);
  const std::string last = dir + "/last.ckpt";
  const bool resuming = opt_.resume && fs::exists(last);
  if (opt_.resume && !resuming) spdlog::warn("--resume: {} does not exist, starting a new run", last);
  if (!opt_.resume && fs::exists(last))
    throw Error(located(dir, 0, "already holds a training run (last.ckpt); use --resume to continue it "
                                "or choose another --output"));
  return resuming;
}

void Trainer::undo_claim() {
  if (!created_output_ || !lock_) return;
  std::error_code ec;
  for (const char* name : {"src.spm.model", "tgt.spm.model", "metrics.jsonl"}) fs::remove(opt_.output_dir + "/" + name, ec);
  fs::remove(opt_.output_dir + "/" + RunLock::file_name(), ec);
  lock_.reset();
  fs::remove(opt_.output_dir, ec);  // only when nothing else is in it
}

void Trainer::prepare() {
  opt_.validate();
  tok_opt_.validate();
  {
    ModelOptions arch = model_opt_;  // the vocabulary sizes come from the tokenizers later
    arch.src_vocab = arch.tgt_vocab = 1;
    arch.validate();
  }
  const int threads = set_threads(opt_.threads);
  device_ = resolve_device(opt_.device);
  if (opt_.dist.world_size > 1) {
    comm_ = Communicator::join(opt_.dist);
    if (device_.is_cuda()) device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(opt_.dist.local_rank));
    if (!is_main()) spdlog::set_level(spdlog::level::warn);  // rank 0 speaks for the group
    spdlog::info("process group: {} ranks (rendezvous {}:{}), this is rank {}", comm_->world_size(),
                 opt_.dist.master_addr, opt_.dist.master_port, comm_->rank());
  }
  torch::manual_seed(opt_.seed);
  const std::string last = opt_.output_dir + "/last.ckpt";
  bool resuming = is_main() && claim_output();
  if (comm_) {  // the other ranks follow rank 0's decision
    auto flag = torch::tensor({resuming ? 1L : 0L});
    comm_->broadcast({flag});
    resuming = flag.item<int64_t>() != 0;
  }

  auto train_corpus = read_corpus(opt_.train_src, opt_.train_tgt, opt_.train_tsv, "train");
  spdlog::info("training data: {}", train_corpus.stats.summary());
  if (train_corpus.src.empty()) {
    // Blame the side that made every pair unusable.
    const auto& st = train_corpus.stats;
    const bool target = opt_.train_tsv.empty() && st.lines > 0 && st.empty_tgt == st.empty && st.empty_src == 0 &&
                        st.too_long == 0;
    throw Error(located(!opt_.train_tsv.empty() ? opt_.train_tsv : target ? opt_.train_tgt : opt_.train_src, 0,
                        "no usable training pairs (" + st.summary() + ")"));
  }
  const bool has_valid = !opt_.valid_tsv.empty() || !opt_.valid_src.empty() || !opt_.valid_tgt.empty();
  if (has_valid) {
    valid_corpus_ = read_corpus(opt_.valid_src, opt_.valid_tgt, opt_.valid_tsv, "valid");
    spdlog::info("validation data: {}", valid_corpus_.stats.summary());
  }

  if (resuming && is_main()) {
    resume_path_ = last;
    auto loaded = load_checkpoint(last, device_);
    for (const auto& f : opt_.explicit_model_fields)
      if (model_opt_.field(f) != loaded.options.field(f))
        throw Error(located(last, 0, "was trained with " + f + "=" + loaded.options.field(f) + " but the options say " + f + "=" +
                                         model_opt_.field(f) + "; drop that option to resume, or train into a new --output"));
    model_opt_ = loaded.options;
    src_tok_ = loaded.src_tok;
    tgt_tok_ = loaded.tgt_tok;
    model_ = loaded.model;
  } else if (!resuming && is_main()) {
    if (!tok_opt_.src_model.empty()) {
      src_tok_ = Tokenizer::load(tok_opt_.src_model);
      tgt_tok_ = tok_opt_.shared ? src_tok_ : Tokenizer::load(tok_opt_.tgt_model.empty() ? tok_opt_.src_model : tok_opt_.tgt_model);
    } else if (!tok_opt_.tgt_model.empty()) {
      throw Error("--tgt-spm given without --src-spm");
    } else if (tok_opt_.shared) {
      auto both = train_corpus.src;
      both.insert(both.end(), train_corpus.tgt.begin(), train_corpus.tgt.end());
      src_tok_ = tgt_tok_ = Tokenizer::train(both, tok_opt_);
    } else {
      src_tok_ = Tokenizer::train(train_corpus.src, tok_opt_);
      tgt_tok_ = Tokenizer::train(train_corpus.tgt, tok_opt_);
    }
    write_file_atomic(opt_.output_dir + "/src.spm.model", src_tok_.bytes());
    write_file_atomic(opt_.output_dir + "/tgt.spm.model", tgt_tok_.bytes());
    model_opt_.src_vocab = src_tok_.vocab_size();
    model_opt_.tgt_vocab = tgt_tok_.vocab_size();
    model_ = Seq2Seq(model_opt_);
    model_->to(device_);
  }
  if (comm_) share_from_main(resuming);
  spdlog::info("vocabularies: source {} pieces, target {} pieces", src_tok_.vocab_size(), tgt_tok_.vocab_size());

  int64_t skipped = 0;
  std::vector<std::string> guide;
  if (!opt_.guided_alignment.empty()) {
    guide = read_lines(opt_.guided_alignment);
    if (static_cast<int64_t>(guide.size()) != train_corpus.stats.lines)
      throw Error(located(opt_.guided_alignment, 0, "has " + std::to_string(guide.size()) + " lines for " +
                                                        std::to_string(train_corpus.stats.lines) + " training pairs"));
  }
  std::vector<int64_t> kept;
  train_ = encode_corpus(train_corpus, src_tok_, tgt_tok_, opt_.max_src_tokens, opt_.max_tgt_tokens, &skipped,
                         guide.empty() ? nullptr : &guide, opt_.guided_alignment, &kept);
  if (opt_.spm_alpha > 0) {  // keep the text: each epoch segments it anew
    for (int64_t i : kept) train_text_.emplace_back(std::move(train_corpus.src[i]), std::move(train_corpus.tgt[i]));
    try {
      src_tok_.sample(train_text_[0].first, static_cast<int>(opt_.spm_nbest), opt_.spm_alpha, 0);
      tgt_tok_.sample(train_text_[0].second, static_cast<int>(opt_.spm_nbest), opt_.spm_alpha, 0);
    } catch (const Error& e) {
      throw Error(std::string("--spm-alpha needs unigram SentencePiece models (--spm-type unigram): ") + e.what());
    }
    spdlog::info("subword regularization: each epoch samples segmentations from the {} best, alpha {}",
                 opt_.spm_nbest, opt_.spm_alpha);
  }
  spdlog::info("training pairs: {} kept, {} over the length limits ({} / {} pieces) skipped", train_.size(), skipped,
               opt_.max_src_tokens, opt_.max_tgt_tokens);
  if (train_.empty()) throw Error("no training pairs left after the length limits");
  if (has_valid) {
    // Validation keeps every pair: the scores must be over the whole set.
    valid_ = encode_corpus(valid_corpus_, src_tok_, tgt_tok_, INT64_MAX, INT64_MAX, &skipped);
    if (opt_.valid_max_sentences > 0 && static_cast<int64_t>(valid_corpus_.src.size()) > opt_.valid_max_sentences) {
      valid_corpus_.src.resize(opt_.valid_max_sentences);
      valid_corpus_.tgt.resize(opt_.valid_max_sentences);
    }
  }

  BatchPlanOptions bp;
  bp.max_tokens = opt_.batch_tokens;
  bp.max_sentences = opt_.max_batch_sentences;
  batches_ = plan_batches(train_, bp, opt_.seed);

  optimizer_ = make_optimizer(opt_, model_->parameters());
  state_.learning_rate = opt_.learning_rate;
  state_.seed = static_cast<int64_t>(opt_.seed);
  if (resuming) {
    state_ = load_train_state(resume_path_, *optimizer_, device_);
    set_learning_rate(*optimizer_, state_.learning_rate);
    if (state_.rng_state.defined()) {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state_.rng_state);
    }
    if (static_cast<uint64_t>(state_.seed) != opt_.seed)
      spdlog::warn("resuming with the checkpoint's seed {} (not --seed {})", state_.seed, opt_.seed);
    batches_ = plan_batches(train_, bp, static_cast<uint64_t>(state_.seed));
    spdlog::info("resumed from {} at step {}, epoch {}, batch {}", last, state_.step, state_.epoch,
                 state_.batch_in_epoch);
  }
  if (comm_ && comm_->rank() > 0) {
    // Ranks differ in dropout masks only; the weights stay identical.
    torch::manual_seed(opt_.seed + 1000003ULL * static_cast<uint64_t>(comm_->rank()));
    if (!resume_path_.empty() && resume_path_ != last) fs::remove(resume_path_);
    return;  // no files, metrics or logs of their own
  }
  for (const auto& e : fs::directory_iterator(opt_.output_dir)) {
    auto name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 && e.path().extension() == ".ckpt") step_checkpoints_.push_back(e.path().string());
  }
  std::sort(step_checkpoints_.begin(), step_checkpoints_.end(), [](const std::string& a, const std::string& b) {
    auto num = [](const std::string& p) { return std::stoll(fs::path(p).stem().string().substr(5)); };
    return num(a) < num(b);
  });
  metrics_ = std::make_unique<MetricsLog>(opt_.output_dir + "/metrics.jsonl");
  spdlog::info("model: {} parameters, attention {}, device {}, {} threads, {} batches per epoch",
               count_parameters(*model_), to_string(model_opt_.attention), describe_device(device_), threads,
               batches_.size());
}

void Trainer::share_from_main(bool resuming) {
  const bool main = is_main();
  if (resuming) {
    // Every rank resumes from rank 0's file, which may not exist on its machine.
    std::string bytes;
    if (main) bytes = read_file_bounded(resume_path_, size_t{1} << 40, "checkpoint");
    comm_->broadcast_bytes(&bytes);
    if (!main) {
      resume_path_ = (fs::temp_directory_path() / ("nmt-resume-" + std::to_string(::getpid()) + ".ckpt")).string();
      write_file_atomic(resume_path_, bytes);
      auto loaded = load_checkpoint(resume_path_, device_);
      model_opt_ = loaded.options;
      src_tok_ = loaded.src_tok;
      tgt_tok_ = loaded.tgt_tok;
      model_ = loaded.model;
    }
    return;
  }
  std::string src = main ? src_tok_.bytes() : "", tgt = main ? tgt_tok_.bytes() : "";
  std::string config = main ? model_opt_.serialize() : "";
  comm_->broadcast_bytes(&src);
  comm_->broadcast_bytes(&tgt);
  comm_->broadcast_bytes(&config);
  if (!main) {
    src_tok_ = Tokenizer::from_bytes(src, "rank 0's source tokenizer");
    tgt_tok_ = Tokenizer::from_bytes(tgt, "rank 0's target tokenizer");
    model_opt_ = ModelOptions::parse(config, "rank 0's model config");
    model_ = Seq2Seq(model_opt_);
    model_->to(device_);
  }
  // Same seed, same initial weights; broadcasting makes it a guarantee.
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors;
  for (const auto& p : model_->parameters()) tensors.push_back(p);
  for (const auto& b : model_->buffers()) tensors.push_back(b);
  comm_->broadcast(tensors);
}

ValidResult Trainer::validate() {
  ValidResult r;
  torch::NoGradGuard no_grad;
  model_->eval();
  double nll = 0;
  int64_t tokens = 0;
  BatchPlanOptions bp;
  bp.max_tokens = opt_.batch_tokens;
  bp.max_sentences = opt_.max_batch_sentences;
  for (const auto& idx : plan_batches(valid_, bp, 0)) {
    auto b = make_batch(valid_, idx).to(device_);
    auto logits = model_->forward(b.src, b.src_len, b.tgt_in);
    nll += sequence_loss(logits, b.tgt_out, 0.0).item<double>();
    tokens += b.tgt_tokens;
  }
  r.loss = nll / std::max<int64_t>(tokens, 1);
  r.perplexity = std::exp(r.loss);
  Translator tr(model_, src_tok_, tgt_tok_);
  TranslateOptions to;
  to.batch_sentences = opt_.valid_batch_sentences;
  auto hyps = tr.translate_text(valid_corpus_.src, to);
  auto bleu = corpus_bleu(hyps, valid_corpus_.tgt);
  r.bleu = bleu.score;
  r.chrf = corpus_chrf(hyps, valid_corpus_.tgt).score;
  r.exact_match = exact_match(hyps, valid_corpus_.tgt);
  model_->train();
  return r;
}

void Trainer::save(const std::string& name) {
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    state_.rng_state = gen.get_state();
  }
  save_checkpoint(opt_.output_dir + "/" + name, model_, src_tok_, tgt_tok_, optimizer_.get(), &state_);
}

void Trainer::prune_step_checkpoints() {
  while (static_cast<int64_t>(step_checkpoints_.size()) > opt_.keep_checkpoints) {
    std::error_code ec;
    fs::remove(step_checkpoints_.front(), ec);
    step_checkpoints_.pop_front();
  }
}

Batch Trainer::sampled_batch(const std::vector<int64_t>& indices) const {
  std::vector<Example> sampled;
  sampled.reserve(indices.size());
  const int nbest = static_cast<int>(opt_.spm_nbest);
  for (int64_t i : indices) {
    Example e = train_[i];
    const uint64_t base = static_cast<uint64_t>(state_.seed) * 0x9E3779B97F4A7C15ULL ^
                          static_cast<uint64_t>(state_.epoch) * 0xC2B2AE3D27D4EB4FULL ^ static_cast<uint64_t>(i) * 2;
    auto src = src_tok_.sample(train_text_[i].first, nbest, opt_.spm_alpha, base);
    auto tgt = tgt_tok_.sample(train_text_[i].second, nbest, opt_.spm_alpha, base + 1);
    if (!src.empty() && !tgt.empty() && static_cast<int64_t>(src.size()) <= opt_.max_src_tokens &&
        static_cast<int64_t>(tgt.size()) <= opt_.max_tgt_tokens) {
      e.src = std::move(src);
      e.src.push_back(kEosId);
      e.tgt = std::move(tgt);
    }
    sampled.push_back(std::move(e));
  }
  std::vector<int64_t> all(sampled.size());
  std::iota(all.begin(), all.end(), 0);
  return make_batch(sampled, all);
}

void Trainer::write_average(TrainResult* result) {
  if (opt_.average <= 0 || !is_main() || step_checkpoints_.empty()) return;
  const size_t n = std::min<size_t>(static_cast<size_t>(opt_.average), step_checkpoints_.size());
  if (n < static_cast<size_t>(opt_.average))
    spdlog::warn("--average {}: only {} step checkpoints exist; averaging those", opt_.average, n);
  const std::vector<std::string> last(step_checkpoints_.end() - static_cast<std::ptrdiff_t>(n), step_checkpoints_.end());
  const std::string out = opt_.output_dir + "/average.ckpt";
  auto avg = average_checkpoints(last, out);
  if (valid_.empty()) {
    spdlog::info("wrote {}: the mean of {} checkpoints", out, n);
    return;
  }
  avg.model->to(device_);
  std::swap(model_, avg.model);  // validate() reads model_
  const auto v = validate();
  std::swap(model_, avg.model);
  result->average_metric = reported(opt_.stop_metric, higher_is_better(opt_.stop_metric, v));
  spdlog::info("average | {} checkpoints, {} .. {} | loss {:.4f} | ppl {:.2f} | BLEU {:.2f} | chrF {:.2f} | exact {:.1f}% | {}",
               n, fs::path(last.front()).filename().string(), fs::path(last.back()).filename().string(), v.loss,
               v.perplexity, v.bleu, v.chrf, v.exact_match, out);
  metrics_->write(JsonObject()
                      .add("type", "average")
                      .add("step", state_.step)
                      .add("checkpoints", static_cast<int64_t>(n))
                      .add("loss", v.loss)
                      .add("perplexity", v.perplexity)
                      .add("bleu", v.bleu)
                      .add("chrf", v.chrf)
                      .add("exact_match", v.exact_match));
}

TrainResult Trainer::run() {
  try {
    prepare();
  } catch (...) {
    undo_claim();
    throw;
  }
  TrainResult result;
  const auto t0 = Clock::now();
  const double elapsed0 = state_.elapsed_seconds;
  const int64_t per_epoch = static_cast<int64_t>(batches_.size());
  const int64_t world = comm_ ? comm_->world_size() : 1;
  const int64_t rank = comm_ ? comm_->rank() : 0;
  int64_t total_steps = opt_.max_epochs * ((per_epoch + world - 1) / world);
  if (opt_.max_steps > 0) total_steps = std::min(total_steps, opt_.max_steps);

  double train_seconds = 0;    // excludes validation, for throughput
  int64_t trained_tokens = 0;
  double window_loss = 0;      // summed smoothed loss since the last log line
  int64_t window_tokens = 0, window_sents = 0;
  auto window_t0 = Clock::now();
  model_->train();

  auto elapsed = [&] { return elapsed0 + seconds_since(t0); };
  int64_t saved_step = state_.step;  // the step last.ckpt holds
  int64_t bad_in_a_row = 0;          // consecutive non-finite steps

  // Runs a validation, updates best/plateau/early-stopping state and writes
  // checkpoints. Returns true when early stopping triggers.
  auto validate_and_save = [&]() -> bool {
    state_.elapsed_seconds = elapsed();
    bool stop = false;
    if (!valid_.empty()) {
      auto v0 = Clock::now();
      auto v = validate();
      const auto verdict = update_schedule(opt_, higher_is_better(opt_.stop_metric, v), &state_);
      const bool improved = verdict.improved;
      if (verdict.decayed) {
        set_learning_rate(*optimizer_, state_.learning_rate);
        spdlog::info("validation plateau: learning rate now {:.3g}", state_.learning_rate);
      }
      stop = verdict.stop;
      spdlog::info("valid | step {} | loss {:.4f} | ppl {:.2f} | BLEU {:.2f} | chrF {:.2f} | exact {:.1f}% | {}{}{} | {:.1f}s",
                   state_.step, v.loss, v.perplexity, v.bleu, v.chrf, v.exact_match,
                   improved ? "new best " : "no improvement ", to_string(opt_.stop_metric),
                   improved ? "" : " (" + std::to_string(state_.bad_validations) + ")", seconds_since(v0));
      metrics_->write(JsonObject()
                          .add("type", "valid")
                          .add("step", state_.step)
                          .add("epoch", state_.epoch)
                          .add("loss", v.loss)
                          .add("perplexity", v.perplexity)
                          .add("bleu", v.bleu)
                          .add("chrf", v.chrf)
                          .add("exact_match", v.exact_match)
                          .add("lr", state_.learning_rate)
                          .add("elapsed", state_.elapsed_seconds));
      if (improved) save("best.ckpt");
    } else {
      save("best.ckpt");  // without validation data the newest model is the best we know
    }
    save("last.ckpt");
    saved_step = state_.step;
    if (opt_.keep_checkpoints > 0) {
      std::string name = "step-" + std::to_string(state_.step) + ".ckpt";
      save(name);
      step_checkpoints_.push_back(opt_.output_dir + "/" + name);
      prune_step_checkpoints();
    }
    return stop;
  };

  // Validation and checkpoints happen on rank 0; its verdict (early stop)
  // and learning rate then reach every rank.
  auto validate_everywhere = [&]() -> bool {
    bool stop = is_main() ? validate_and_save() : false;
    if (comm_) {
      auto verdict = torch::tensor({stop ? 1.0 : 0.0, state_.learning_rate}, torch::kDouble);
      comm_->broadcast({verdict});
      stop = verdict[0].item<double>() != 0;
      if (state_.learning_rate != verdict[1].item<double>()) {
        state_.learning_rate = verdict[1].item<double>();
        set_learning_rate(*optimizer_, state_.learning_rate);
      }
    }
    return stop;
  };

  // With N ranks a step takes N batches of the epoch's order, rank r the
  // r-th; the loss is summed over all of them and divided by their target
  // tokens, so a step equals one step on the N batches joined.
  std::vector<torch::Tensor> params;  // each parameter once (tied weights appear twice in parameters())
  for (const auto& p : model_->parameters())
    if (std::none_of(params.begin(), params.end(), [&](const torch::Tensor& q) { return q.is_same(p); })) params.push_back(p);

  bool done = false;
  while (!done) {
    if (state_.epoch > opt_.max_epochs) { result.stop_reason = StopReason::kMaxEpochs; break; }
    const auto order = epoch_order(per_epoch, static_cast<uint64_t>(state_.seed), state_.epoch);
    while (state_.batch_in_epoch < per_epoch) {
      if (opt_.max_steps > 0 && state_.step >= opt_.max_steps) { result.stop_reason = StopReason::kMaxSteps; done = true; break; }
      double stops[2] = {stop_requested() ? 1.0 : 0.0,
                         opt_.max_minutes > 0 && elapsed() >= opt_.max_minutes * 60 ? 1.0 : 0.0};
      if (comm_) {  // a signal or the clock on any rank stops all of them
        auto t = torch::tensor({stops[0], stops[1]}, torch::kDouble);
        comm_->all_reduce_sum({t});
        stops[0] = t[0].item<double>();
        stops[1] = t[1].item<double>();
      }
      if (stops[0] > 0) { result.stop_reason = StopReason::kInterrupted; done = true; break; }
      if (stops[1] > 0) { result.stop_reason = StopReason::kMaxMinutes; done = true; break; }

      const auto step_t0 = Clock::now();
      const int64_t mine = state_.batch_in_epoch + rank;  // this rank's batch (none past the epoch's end)
      Batch batch;
      torch::Tensor loss;
      double loss_sum = 0;
      int64_t tokens = 0, sents = 0;
      if (mine < per_epoch) {
        batch = (opt_.spm_alpha > 0 ? sampled_batch(batches_[order[mine]]) : make_batch(train_, batches_[order[mine]]))
                    .to(device_);
        torch::Tensor alpha;  // [B, T, S] attention, for guided alignment
        auto logits = model_->forward(batch.src, batch.src_len, batch.tgt_in, batch.guide.defined() ? &alpha : nullptr);
        loss = sequence_loss(logits, batch.tgt_out, opt_.label_smoothing);
        loss_sum = loss.item<double>();
        if (batch.guide.defined()) {  // cross-entropy of the attention against the guided rows
          auto guided = guided_alignment_loss(alpha, batch.guide);
          loss = loss + opt_.guided_alignment_weight * guided;
          const double guided_sum = guided.item<double>();
          if (!std::isfinite(guided_sum)) loss_sum = guided_sum;
        }
        tokens = batch.tgt_tokens;
        sents = batch.size();
      }
      optimizer_->zero_grad();
      StepStats stats{loss_sum, tokens, sents, std::isfinite(loss_sum)};
      stats.all_reduce(comm_.get());  // every rank's tokens, loss, sentences and verdict
      bool finite = stats.finite;
      const int64_t step_tokens = stats.tokens;
      if (finite) {
        if (loss.defined()) (loss / static_cast<double>(step_tokens)).backward();
        if (comm_) {
          std::vector<torch::Tensor> grads;
          for (auto& p : params) {
            if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
            grads.push_back(p.grad());
          }
          comm_->all_reduce_sum(grads);
        }
        // The clip returns the total gradient norm: NaN/Inf if any gradient is.
        const double norm = torch::nn::utils::clip_grad_norm_(
            params, opt_.clip_norm > 0 ? opt_.clip_norm : std::numeric_limits<double>::infinity());
        finite = std::isfinite(norm);
      }
      state_.batch_in_epoch = std::min(per_epoch, state_.batch_in_epoch + world);
      if (!finite) {
        optimizer_->zero_grad();
        ++result.skipped_steps;
        spdlog::warn("step {}: non-finite loss or gradient, batch skipped ({} in a row, {} in all)", state_.step + 1,
                     ++bad_in_a_row, result.skipped_steps);
        if (bad_in_a_row >= opt_.max_bad_steps)
          throw Error("training stopped: " + std::to_string(bad_in_a_row) + " batches in a row had a NaN/Inf loss or "
                      "gradient (lower --learning-rate or --clip-norm); the last good checkpoint is " +
                      opt_.output_dir + "/last.ckpt (step " + std::to_string(saved_step) + ")");
        continue;
      }
      bad_in_a_row = 0;
      optimizer_->step();
      ++state_.step;
      train_seconds += seconds_since(step_t0);
      trained_tokens += step_tokens;
      window_loss += stats.loss_sum;
      window_tokens += step_tokens;
      window_sents += stats.sentences;

      if (opt_.log_every > 0 && state_.step % opt_.log_every == 0 && is_main()) {
        const double w = seconds_since(window_t0);
        const double mean = window_loss / std::max<int64_t>(window_tokens, 1);
        const double done_frac = static_cast<double>(state_.step) / std::max<int64_t>(total_steps, 1);
        double eta = done_frac > 0 ? elapsed() * (1 - done_frac) / done_frac : 0;
        if (opt_.max_minutes > 0) eta = std::min(eta, std::max(0.0, opt_.max_minutes * 60 - elapsed()));
        spdlog::info("epoch {} | step {}/{} | loss {:.4f} | ppl {:.2f} | lr {:.3g} | {:.0f} tgt tok/s | {:.0f} sent/s | elapsed {} | eta {}",
                     state_.epoch, state_.step, total_steps, mean, std::exp(mean), state_.learning_rate,
                     window_tokens / w, window_sents / w, hms(elapsed()), hms(eta));
        metrics_->write(JsonObject()
                            .add("type", "train")
                            .add("step", state_.step)
                            .add("epoch", state_.epoch)
                            .add("loss", mean)
                            .add("perplexity", std::exp(mean))
                            .add("lr", state_.learning_rate)
                            .add("tgt_tokens_per_s", window_tokens / w)
                            .add("elapsed", elapsed()));
        window_loss = 0;
        window_tokens = window_sents = 0;
        window_t0 = Clock::now();
      }
      if (opt_.valid_every > 0 && state_.step % opt_.valid_every == 0 && validate_everywhere()) {
        result.stop_reason = StopReason::kEarlyStopping;
        done = true;
        break;
      }
    }
    if (done) break;
    // End of epoch: validate unless this step just did.
    ++state_.epoch;
    state_.batch_in_epoch = 0;
    if (!(opt_.valid_every > 0 && state_.step % opt_.valid_every == 0) && validate_everywhere()) {
      result.stop_reason = StopReason::kEarlyStopping;
      break;
    }
  }
  // Nothing trained since the last save is lost: an interruption saves
  // quickly, any other end validates first.
  if (is_main() && (state_.step != saved_step || !fs::exists(opt_.output_dir + "/last.ckpt"))) {
    if (result.stop_reason == StopReason::kInterrupted) {
      state_.elapsed_seconds = elapsed();
      save("last.ckpt");
    } else {
      validate_and_save();
    }
  }
  if (result.stop_reason != StopReason::kInterrupted) write_average(&result);
  result.steps = state_.step;
  result.epochs = state_.epoch;
  result.best_metric = reported(opt_.stop_metric, state_.best_metric);
  result.tokens_per_second = train_seconds > 0 ? trained_tokens / train_seconds : 0;
  result.peak_rss_mb = peak_rss_mb();
  spdlog::info("training finished ({}): {} steps, {:.0f} target tokens/s, best {} {:.4g}, elapsed {}, "
               "{} skipped batches, peak memory {} MiB",
               to_string(result.stop_reason), result.steps, result.tokens_per_second, to_string(opt_.stop_metric),
               result.best_metric, hms(elapsed()), result.skipped_steps, result.peak_rss_mb);
  return result;
}

}  // namespace

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::kMaxEpochs: return "max_epochs";
    case StopReason::kMaxSteps: return "max_steps";
    case StopReason::kMaxMinutes: return "max_minutes";
    case StopReason::kEarlyStopping: return "early_stopping";
    case StopReason::kInterrupted: return "interrupted";
  }
  return "unknown";
}

TrainResult train(const TrainOptions& opt, const TokenizerOptions& tok, ModelOptions model,
                  const std::atomic<bool>* stop) {
  return Trainer(opt, tok, model, stop).run();
}

}  // namespace nmt
