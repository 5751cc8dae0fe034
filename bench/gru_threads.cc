// Times one training step of the encoder's bidirectional GRU (forward and
// backward) at a fixed shape, to choose BLAS flavour and thread counts.
//   nmt-bench-gru TORCH_THREADS BLAS_THREADS [batch seq emb hidden reps]
// Prints the median milliseconds per step over `reps` timed steps.
#include <dlfcn.h>
#include <torch/nn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TORCH_THREADS BLAS_THREADS [batch seq emb hidden reps]\n", argv[0]);
    return 2;
  }
  const int torch_threads = std::atoi(argv[1]);
  const int blas_threads = std::atoi(argv[2]);
  auto arg = [&](int i, int64_t def) { return argc > i ? std::atoll(argv[i]) : def; };
  const int64_t B = arg(3, 64), S = arg(4, 16), E = arg(5, 256), H = arg(6, 512), reps = arg(7, 20);
  torch::set_num_threads(torch_threads);
  using SetFn = void (*)(int);
  auto set_blas = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set_blas) set_blas(blas_threads);
  torch::manual_seed(0);
  torch::nn::GRU gru(torch::nn::GRUOptions(E, H).bidirectional(true).batch_first(true));
  auto x = torch::randn({B, S, E}, torch::requires_grad());
  std::vector<double> ms;
  for (int64_t r = 0; r < reps + 3; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto y = std::get<0>(gru->forward(x));
    y.sum().backward();
    double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r >= 3) ms.push_back(t);  // 3 warm-up steps
  }
  std::sort(ms.begin(), ms.end());
  std::printf("torch_threads=%d blas_threads=%d openblas=%s shape=%ldx%ldx%ld hidden=%ld median_ms=%.2f\n",
              torch_threads, blas_threads, set_blas ? "yes" : "no", (long)B, (long)S, (long)E, (long)H,
              ms[ms.size() / 2]);
  return 0;
}
