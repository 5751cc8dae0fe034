// Mixed-precision training on the CPU: matrix products in bfloat16, the
// weights kept (and updated) in float, the loss in float. LibTorch's CPU
// autocast rounds each product's inputs to bfloat16 (a weight once per
// region, the cast cached) and runs the product through oneDNN, with
// AVX512-BF16 or AMX dot products where the CPU has them; element-wise work
// stays in float wherever its inputs are float. The decoder's recurrence
// (recurrence.h) does its own rounding, since it records no autograd graph.
#pragma once
#include <torch/types.h>

namespace nmt {

// While alive (and `enabled`), the calling thread's CPU products run in
// bfloat16 under autocast; the previous state comes back, and the cast
// cache is dropped, when it goes. Threads are separate: each part of a batch
// (train/batch_parts.h) opens its own. Never throws.
class Bf16Autocast {
 public:
  explicit Bf16Autocast(bool enabled);
  ~Bf16Autocast();
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool enabled_ = false, was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

// Whether the calling thread is inside an enabled Bf16Autocast (or any CPU
// autocast region of bfloat16).
bool bf16_autocast_active();

// Turns the calling thread's CPU autocast off while alive (for code that
// rounds its own products), and back to what it was after. Never throws.
class NoAutocast {
 public:
  NoAutocast();
  ~NoAutocast();
  NoAutocast(const NoAutocast&) = delete;
  NoAutocast& operator=(const NoAutocast&) = delete;

 private:
  bool was_enabled_ = false;
};

}  // namespace nmt
