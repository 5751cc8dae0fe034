// Where the work runs: the options every tool shares (--device, --threads),
// with their field list (fields.h).
#pragma once
#include <string>

#include "base/check_ranges.h"
#include "base/error.h"
#include "base/fields.h"

namespace nmt {

// Most CPU threads any option accepts.
constexpr int kMaxThreads = 1024;

// Where the work runs.
struct RuntimeOptions {
  std::string device = "auto";  // "cpu", "cuda", "cuda:N" or "auto" (CUDA when available); see device.h
  int threads = 0;              // intra-op CPU threads; 0: NMT_THREADS or all cores

  void validate() const;  // throws nmt::UsageError for a thread count out of range or an empty device
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v(Field{"device", "cpu, cuda, cuda:N or auto", "Hardware"}, s.device);
    v(Field{"threads", "CPU threads (0: NMT_THREADS or all cores)", "Hardware"}.within(0, kMaxThreads), s.threads);
  }
};

inline void RuntimeOptions::validate() const {
  check_ranges(*this);
  if (device.empty()) throw UsageError("--device must be cpu, cuda, cuda:N or auto");
}

}  // namespace nmt
