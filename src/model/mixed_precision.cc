// CPU autocast in bfloat16 (see mixed_precision.h), across LibTorch versions:
// 2.4 replaced the per-device functions with ones that take the device type.
#include "model/mixed_precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace nmt {
namespace {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool cpu_enabled() { return at::autocast::is_autocast_enabled(at::kCPU); }
void set_cpu_enabled(bool on) { at::autocast::set_autocast_enabled(at::kCPU, on); }
at::ScalarType cpu_dtype() { return at::autocast::get_autocast_dtype(at::kCPU); }
void set_cpu_dtype(at::ScalarType t) { at::autocast::set_autocast_dtype(at::kCPU, t); }
#else
bool cpu_enabled() { return at::autocast::is_cpu_enabled(); }
void set_cpu_enabled(bool on) { at::autocast::set_cpu_enabled(on); }
at::ScalarType cpu_dtype() { return at::autocast::get_autocast_cpu_dtype(); }
void set_cpu_dtype(at::ScalarType t) { at::autocast::set_autocast_cpu_dtype(t); }
#endif

}  // namespace

Bf16Autocast::Bf16Autocast(bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
  was_enabled_ = cpu_enabled();
  was_dtype_ = cpu_dtype();
  set_cpu_dtype(at::kBFloat16);
  set_cpu_enabled(true);
  at::autocast::increment_nesting();
}

Bf16Autocast::~Bf16Autocast() {
  if (!enabled_) return;
  // The outermost region drops the cast weights, which go stale at the next optimizer step.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_cpu_enabled(was_enabled_);
  set_cpu_dtype(was_dtype_);
}

bool bf16_autocast_active() { return cpu_enabled() && cpu_dtype() == at::kBFloat16; }

NoAutocast::NoAutocast() : was_enabled_(cpu_enabled()) {
  if (was_enabled_) set_cpu_enabled(false);
}

NoAutocast::~NoAutocast() {
  if (was_enabled_) set_cpu_enabled(true);
}

}  // namespace nmt
