// StepGraph: see step_graph.h. The CUDA part compiles only against LibTorch
// 2.x with CUDA (NMT_WITH_CUDA, set by CMake where libtorch_cuda exists).
#include "search/step_graph.h"

#include <atomic>

#if defined(NMT_WITH_CUDA) && TORCH_VERSION_MAJOR >= 2
#define NMT_CUDA_GRAPHS 1
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <spdlog/spdlog.h>

#include <string>
#endif

namespace nmt {
namespace {
std::atomic<int64_t> g_captures{0};  // StepGraph::captures()
}  // namespace

bool cuda_graphs_built() {
#ifdef NMT_CUDA_GRAPHS
  return true;
#else
  return false;
#endif
}

#ifdef NMT_CUDA_GRAPHS
struct StepGraph::Impl {
  explicit Impl(const torch::Device& d)
      : device(d.has_index() ? d : torch::Device(torch::kCUDA, c10::cuda::current_device())),
        stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())) {}
  torch::Device device;
  c10::cuda::CUDAStream stream;  // where the warm-up and the capture run
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  bool eager = false;  // the capture failed: every run runs the step itself
  int64_t runs = 0;
};
#else
struct StepGraph::Impl {};
#endif

StepGraph::StepGraph(std::function<void()> step, const torch::Device& device, bool capture) : step_(std::move(step)) {
#ifdef NMT_CUDA_GRAPHS
  if (capture && device.is_cuda()) impl_ = std::make_unique<Impl>(device);
#else
  (void)device;
  (void)capture;
#endif
}

StepGraph::~StepGraph() = default;

bool StepGraph::captured() const {
#ifdef NMT_CUDA_GRAPHS
  return impl_ && impl_->graph != nullptr;
#else
  return false;
#endif
}

int64_t StepGraph::captures() { return g_captures.load(); }

void StepGraph::run() {
#ifdef NMT_CUDA_GRAPHS
  if (impl_) {
    auto& g = *impl_;
    // Synchronisation is by stream, never the whole device: another thread's
    // capture on this device (a second model's batcher) must not be waited on,
    // which would break it.
    const auto caller = c10::cuda::getCurrentCUDAStream(g.device.index());
    if (g.runs++ == 0) {  // warm-up: eagerly, on the capture's stream
      caller.synchronize();  // the inputs the caller's stream wrote
      {
        c10::cuda::CUDAStreamGuard guard(g.stream);
        step_();
      }
      g.stream.synchronize();  // the outputs, before the caller's stream reads them
      return;
    }
    if (!g.graph && !g.eager) {  // capture records the kernels without running them: replay below runs this step
      g.graph = std::make_unique<at::cuda::CUDAGraph>();
      try {
        c10::cuda::CUDAStreamGuard guard(g.stream);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
        // Thread-local mode: only this thread's unsafe calls (a cudaMalloc, a
        // synchronisation) break the capture, not another thread's, such as a
        // second model's batcher in nmt-serve. LibTorch 2.0 captures in CUDA's
        // global mode only.
        g.graph->capture_begin(/*pool=*/{0, 0}, cudaStreamCaptureModeThreadLocal);
#else
        g.graph->capture_begin();
#endif
        try {
          step_();
        } catch (...) {
          try {
            g.graph->capture_end();  // ends the stream's capture; throws for the invalidated graph
          } catch (...) {
          }
          throw;
        }
        g.graph->capture_end();
        g_captures.fetch_add(1);
      } catch (const std::exception& e) {
        // Nothing ran on the device: this step, and every later one, runs eagerly.
        g.graph.reset();
        g.eager = true;
        const std::string what = e.what();
        spdlog::warn("a step could not be captured as a CUDA graph, so it runs eagerly: {}",
                     what.substr(0, what.find('\n')));
      }
      g.stream.synchronize();
    }
    if (g.graph) {
      g.graph->replay();
      return;
    }
  }
#endif
  step_();
}

}  // namespace nmt
