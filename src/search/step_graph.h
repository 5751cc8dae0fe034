// One piece of work (a decoder step that reads and writes only tensors it
// was given once, in place) run many times. On CUDA with LibTorch 2.x it is
// captured once into a CUDA graph and replayed: one launch a step instead of
// dozens, where a step of a small model waits on kernel launches, not on the
// GPU. Elsewhere it simply runs each time, so the same search code runs (and
// is tested) on the CPU.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace nmt {

// Whether this build can capture CUDA graphs (LibTorch 2.x with CUDA).
bool cuda_graphs_built();

class StepGraph {
 public:
  // `step` must leave every tensor it reads for the next run where it found
  // it (same storage, updated in place), allocate nothing the caller keeps,
  // and never read a tensor's values on the host (no item(), no copies to the
  // CPU): a captured graph repeats its kernels on the same addresses.
  // `capture`: replay from a CUDA graph (only where cuda_graphs_built() and
  // `device` is CUDA; otherwise it is ignored).
  StepGraph(std::function<void()> step, const torch::Device& device, bool capture);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Runs the step once: the first run eagerly (on the stream the capture
  // will use, which warms up the libraries' handles), the second captures
  // and replays, later ones replay. A capture that fails (an operation CUDA
  // graphs do not allow) is logged once, and the step then runs eagerly,
  // this time and every later one. Throws what the step or CUDA throws
  // outside a capture.
  void run();

  // Whether runs replay a captured graph (after a successful capture).
  bool captured() const;

  // How many graphs this process has captured successfully so far, all
  // StepGraphs and threads together: tests tell a replayed graph from a new
  // capture, or from the eager fallback, by it. 0 where none can be captured.
  static int64_t captures();

 private:
  struct Impl;
  std::function<void()> step_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmt
