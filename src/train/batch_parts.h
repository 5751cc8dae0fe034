// One training step's batch as parts trained side by side on the CPU. The
// small matrix products of a recurrent step, spread over two threads, spend
// much of their time waiting for each other; one part per thread, each
// single-threaded, does not. The loss is summed over the parts and the
// gradients of the parts are summed in part order, so the step is the
// whole batch's step (to float rounding), the same on every run.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace nmt {

// No part has fewer sentences than this: a batch is cut into one part per
// thread once each thread gets this many of its sentences, and into
// kPartsPerThread parts per thread once each of those parts would: handed out
// as threads come free, more parts even out the threads' work. On Multi30k
// batches (up to 128 sentences / 4,096 tokens, 2-core VM) four parts ran
// 1.06x the earlier two static ones alone and kept 65% of that rate beside a
// busy process, against 54% (bench/results/train-contention-vm-*.txt); at 64
// sentences four parts of 16 ran 0.88x two of 32 alone (median of 3 rounds).
constexpr int64_t kMinPartSentences = 32;
constexpr int64_t kPartsPerThread = 2;

// How many parts to cut a batch of `sentences` into: `want` of them (at most
// one per sentence), or with `want` 0 (automatic) as many as `threads` times
// kPartsPerThread, or `threads`, or 1, the first whose parts get at least
// kMinPartSentences sentences each (1 with one thread); 1 off the CPU, where
// a batch is one launch sequence anyway.
int64_t batch_parts(int64_t want, int threads, int64_t sentences, const torch::Device& device);

// How batches will be cut, for the log: "whole batches", "3 parts each" or
// "2 parts for batches of 64 sentences or more, 4 for 128 or more".
std::string describe_batch_parts(int64_t want, int threads, const torch::Device& device);

// Sentence ranges [begin, end) of `parts` near-equal slices of `sentences`.
std::vector<std::pair<int64_t, int64_t>> part_ranges(int64_t sentences, int64_t parts);

// Runs forward(p) for every p in [0, parts) on `workers` threads, each
// taking the next part not yet taken until none is left (inside one OpenMP
// parallel region, so LibTorch's loops and BLAS run single-threaded within a
// part). Handing parts out as threads come free, rather than a fixed share
// per thread, keeps both threads working when another process takes turns
// on the cores with one of them. Part p's dropout is drawn from a generator
// seeded with mix(seed, p), so the results do not depend on which thread ran
// which part. The first exception of any part is rethrown once all have ended.
void run_parts(int64_t parts, int workers, uint64_t seed, const std::function<void(int64_t)>& forward);

// Backward of sum_p losses[p] * scale: each part's graph is differentiated
// on one thread (handed out as in run_parts), and each parameter's .grad is
// set to the sum of the parts' gradients in part order (zeros where none
// reached it). Every graph is freed. Throws what autograd throws.
void backward_parts(const std::vector<torch::Tensor>& losses, double scale, const std::vector<torch::Tensor>& params,
                    int workers);

// A 64-bit mix of (a, b), for seeding per step and part.
uint64_t mix_seed(uint64_t a, uint64_t b);

}  // namespace nmt
