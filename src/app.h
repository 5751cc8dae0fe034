// What every executable shares: logging to stderr and the mapping from
// exceptions to exit codes. The apps parse flags (CLI11) and call in here.
#pragma once
#include <functional>
#include <string>

namespace nmt {

// Exit codes of the nmt executables.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;     // bad input, file or option (an nmt::Error)
constexpr int kExitInternal = 3;  // an unexpected failure (a bug: please report)

// Sends logs to stderr as "[time] [level] message"; `verbose` adds debug lines.
void setup_logging(bool verbose = false);

// Runs `body` and returns its exit code; an exception is logged as one line
// ("error: ...") and mapped to kExitError (nmt::Error, std::invalid_argument)
// or kExitInternal (anything else, LibTorch errors without their backtrace).
int run_guarded(const std::function<int()>& body);

}  // namespace nmt
