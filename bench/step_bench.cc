// Times nmt's training step and searches at a fixed shape, the C++ side of
// bench/vs-pytorch.sh's fixed-shape rows (bench/reference/nmt_ref.py
// train-fixed and decode-fixed are the Python side, with the same shapes,
// sizes and random-token batches).
//   nmt-bench-step train  THREADS BATCH SRC_LEN TGT_LEN STEPS [DECODER]
//   nmt-bench-step decode THREADS BATCH SRC_LEN BEAM REPS CHECKPOINT
// Prints one JSON line: target tokens/s (train) or sentences/s (decode).
// Environment: NMT_BENCH_DEVICE=cuda runs on the GPU (the device is
// synchronized before each clock read); NMT_BENCH_PATH=auto|optimized|plain|recurrence
// picks the decoder's path (DecoderImpl::Path for training; for search,
// plain is EngineOptions::plain and the others its optimized step; default
// auto, what nmt runs; "reference" is an older name of plain),
// NMT_BENCH_REFERENCE=1 is NMT_BENCH_PATH=plain; NMT_BENCH_GRAPHS=1 trains
// as nmt-train --cuda-graphs (each step replayed from a CUDA graph on CUDA,
// eagerly elsewhere); NMT_BENCH_PARTS=N trains
// each batch as N parts side by side (nmt-train --batch-parts N; default 0,
// automatic, as nmt-train; 1: whole); NMT_BENCH_HEAP=default
// leaves glibc's heap policy as it is (nmt::keep_freed_memory() is not called);
// NMT_BENCH_NO_CUDA_GRAPHS=1 runs greedy steps on CUDA eagerly (--no-cuda-graphs);
// NMT_BENCH_PROFILE=FILE records a search's timed repetitions with LibTorch's
// profiler into FILE, a Chrome trace of every operator call (the figure
// printed then includes the profiler's own cost).
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/blas_kernels.h"
#include "engine/rnn_engine.h"
#include "model/batch.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "model/model.h"
#include "search/search.h"
#include "text/tokenizer.h"
#include "train/batch_parts.h"
#include "train/flat_adam.h"
#include "train/gradients.h"
#include "train/graphed_step.h"
#include "train/losses.h"

namespace {

using Clock = std::chrono::steady_clock;

const torch::Device& device() {
  static const torch::Device d(std::getenv("NMT_BENCH_DEVICE") ? std::getenv("NMT_BENCH_DEVICE") : "cpu");
  return d;
}
std::string path_name() {
  const char* ref = std::getenv("NMT_BENCH_REFERENCE");
  if (ref && std::string(ref) == "1") return "plain";
  const char* p = std::getenv("NMT_BENCH_PATH");
  const std::string name = p ? p : "auto";
  return name == "reference" ? "plain" : name;
}
nmt::DecoderImpl::Path decoder_path() {
  const auto n = path_name();
  if (n == "optimized") return nmt::DecoderImpl::Path::kOptimized;
  if (n == "plain") return nmt::DecoderImpl::Path::kPlain;
  if (n == "recurrence") return nmt::DecoderImpl::Path::kRecurrence;
  if (n != "auto")
    throw std::runtime_error("NMT_BENCH_PATH must be auto, optimized, plain or recurrence, got '" + n + "'");
  return nmt::DecoderImpl::Path::kAuto;
}
// Waits for the device's queued work (CUDA runs asynchronously).
void sync() {
  if (device().is_cuda()) torch::cuda::synchronize();
}
Clock::time_point now() {
  sync();
  return Clock::now();
}
double since(Clock::time_point t0) { return std::chrono::duration<double>(now() - t0).count(); }
// The JSON fields every line ends with.
std::string tail_fields() {
  return std::string(",\"device\":\"") + device().str() + "\",\"decoder_path\":\"" +
         path_name() + "\"}";
}

// Random tokens (ids >= 4, no specials) for `batch` sentences of `len` pieces.
torch::Tensor random_tokens(int64_t batch, int64_t len, int64_t vocab) {
  return torch::randint(4, vocab, {batch, len}, torch::kInt64).to(device());
}

int train(int64_t B, int64_t S, int64_t T, int64_t steps, const std::string& decoder) {
  nmt::ModelOptions opt;  // the sizes of configs/multi30k-en-de.toml, 8k vocabularies
  opt.src_vocab = opt.tgt_vocab = 8000;
  opt.emb_dim = 256;
  opt.enc_hidden = 256;
  opt.dec_hidden = 512;
  opt.attn_dim = 512;
  opt.dropout = 0.3;
  opt.tie_embeddings = true;
  opt.decoder = decoder == "cgru" ? nmt::DecoderType::kCgru : nmt::DecoderType::kBahdanau;
  nmt::Seq2Seq model(opt);
  model->to(device());
  model->decoder->set_path(decoder_path());
  model->train();
  nmt::FlatAdam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  const auto& params = adam.flat_parameters();
  const char* want = std::getenv("NMT_BENCH_PARTS");
  const int64_t parts = nmt::batch_parts(want ? std::stoll(want) : 0, torch::get_num_threads(), B, device());
  const auto ranges = nmt::part_ranges(B, parts);
  const char* graphs = std::getenv("NMT_BENCH_GRAPHS");  // 1: the step of nmt-train --cuda-graphs
  std::unique_ptr<nmt::GraphedTrainStep> graphed;
  if (graphs != nullptr && std::string(graphs) == "1") {
    nmt::GraphedStepOptions g;
    g.rows = B;
    g.label_smoothing = 0.1;
    g.clip_norm = 1.0;
    graphed = std::make_unique<nmt::GraphedTrainStep>(model, adam, g, device());
  }
  uint64_t seed = 0;
  auto step = [&] {  // what nmt-train's Trainer::train_step does, without guided alignment
    auto src = random_tokens(B, S, opt.src_vocab);
    auto tgt = random_tokens(B, T, opt.tgt_vocab);
    auto tgt_in = torch::cat({torch::full({B, 1}, nmt::kBosId, tgt.options()), tgt.narrow(1, 0, T - 1)}, 1);
    if (graphed) {
      nmt::Batch b;
      b.src = src.cpu();
      b.src_len = torch::full({B}, S, torch::kInt64);
      b.tgt_in = tgt_in.cpu();
      b.tgt_out = tgt.cpu();
      b.tgt_tokens = B * T;
      graphed->run(b);
      return;
    }
    std::vector<torch::Tensor> losses(parts);
    auto part_loss = [&](int64_t p) {
      const auto [b0, b1] = ranges[p];
      auto src_len = torch::full({b1 - b0}, S, torch::kInt64);
      auto logits = model->forward(src.slice(0, b0, b1), src_len, tgt_in.slice(0, b0, b1));
      losses[p] = nmt::sequence_loss(logits, tgt.slice(0, b0, b1), 0.1);
    };
    if (parts == 1) part_loss(0);
    else nmt::run_parts(parts, torch::get_num_threads(), ++seed, part_loss);
    const double n = static_cast<double>(B * T);
    for (auto p : params) p.mutable_grad().reset();
    if (parts == 1) (losses[0] / n).backward();
    else nmt::backward_parts(losses, 1.0 / n, params, torch::get_num_threads());
    auto grads = adam.gradients();
    const auto norm = nmt::clip_gradient(grads, 1.0);
    const auto loss = torch::stack(losses).sum().detach();
    adam.prepare();
    adam.step(grads, torch::isfinite(loss) & torch::isfinite(norm));
    (void)torch::stack({loss.to(torch::kDouble), norm.to(torch::kDouble)}).cpu();  // the trainer's one read
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up
  const auto t0 = now();
  for (int64_t i = 0; i < steps; ++i) step();
  const double s = since(t0);
  std::printf("{\"command\":\"train-fixed\",\"threads\":%d,\"parts\":%lld,\"graphs\":%s,\"steps\":%lld,\"seconds\":%.4f,"
              "\"tgt_tokens_per_s\":%.1f,\"ms_per_step\":%.3f%s\n",
              torch::get_num_threads(), static_cast<long long>(parts), graphed ? "true" : "false",
              static_cast<long long>(steps), s, static_cast<double>(B * T * steps) / s,
              1000 * s / static_cast<double>(steps), tail_fields().c_str());
  return 0;
}

int decode(int64_t B, int64_t S, int64_t beam, int64_t reps, const std::string& path) {
  auto loaded = nmt::load_checkpoint(path, device());
  decoder_path();  // checks the name
  nmt::InferenceScope scope({loaded.model});
  nmt::EngineOptions eo;
  eo.plain = path_name() == "plain";
  nmt::Scorer scorer(nmt::make_engines({loaded.model}, eo));
  nmt::SearchOptions so;
  so.beam_size = beam;
  so.no_cuda_graphs = std::getenv("NMT_BENCH_NO_CUDA_GRAPHS") != nullptr;
  auto search = nmt::make_search(so, device());
  nmt::Batch batch;
  // The same tokens as nmt_ref.py decode-fixed: 4 + (131 b + 17 j) mod (V - 4).
  const int64_t V = loaded.options.src_vocab;
  batch.src = (torch::arange(B, torch::kInt64).unsqueeze(1) * 131 + torch::arange(S, torch::kInt64).unsqueeze(0) * 17)
                  .remainder(V - 4) + 4;
  batch.src = batch.src.to(device());
  batch.src_len = torch::full({B}, S, torch::kInt64);
  search->run(scorer, batch, false);  // warm-up
  std::vector<double> times;
  const char* profile = std::getenv("NMT_BENCH_PROFILE");
  std::unique_ptr<torch::autograd::profiler::RecordProfile> recording;
  if (profile) recording = std::make_unique<torch::autograd::profiler::RecordProfile>(profile);
  for (int64_t i = 0; i < reps; ++i) {
    const auto t0 = now();
    search->run(scorer, batch, false);
    times.push_back(since(t0));
  }
  recording.reset();  // writes the trace
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  std::printf("{\"command\":\"decode-fixed\",\"threads\":%d,\"batch\":%lld,\"beam\":%lld,\"median_seconds\":%.5f,"
              "\"sentences_per_s\":%.2f%s\n",
              torch::get_num_threads(), static_cast<long long>(B), static_cast<long long>(beam), med,
              static_cast<double>(B) / med, tail_fields().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if ((cmd != "train" && cmd != "decode") || argc < 7 || (cmd == "decode" && argc < 8)) {
    std::fprintf(stderr,
                 "usage: %s train THREADS BATCH SRC_LEN TGT_LEN STEPS [bahdanau|cgru]\n"
                 "       %s decode THREADS BATCH SRC_LEN BEAM REPS CHECKPOINT\n",
                 argv[0], argv[0]);
    return 2;
  }
  // What the tools do at start (apps/cli.h, nmt::start_runtime): the widest
  // BLAS kernels, LibTorch's AVX-512 kernels, the heap policy and the threads
  // of LibTorch and OpenBLAS; the device comes from NMT_BENCH_DEVICE.
  nmt::ensure_best_blas_kernels();
  const char* heap = std::getenv("NMT_BENCH_HEAP");  // "default": glibc's policy, for comparison
  nmt::prefer_avx512_kernels();
  if (!(heap && std::string(heap) == "default")) nmt::keep_freed_memory();
  nmt::set_threads(std::atoi(argv[2]));
  torch::manual_seed(1);
  const int64_t B = std::atoll(argv[3]), S = std::atoll(argv[4]), x = std::atoll(argv[5]), n = std::atoll(argv[6]);
  try {
    if (cmd == "train") return train(B, S, x, n, argc > 7 ? argv[7] : "bahdanau");
    return decode(B, S, x, n, argv[7]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nmt-bench-step: %s\n", e.what());
    return 1;
  }
}
