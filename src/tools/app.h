// What every executable shares: logging to stderr, signal handling and the
// mapping from exceptions to exit codes. The apps parse flags (CLI11) and
// call in here.
#pragma once
#include <atomic>
#include <functional>
#include <string>

namespace nmt {

// Exit codes of the nmt executables.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;     // bad input or file, a failure at run time (an nmt::Error)
constexpr int kExitUsage = 2;     // a command line or config file that cannot be parsed, a bad option value (nmt::UsageError)
constexpr int kExitInternal = 3;  // an unexpected failure (a bug: please report)

// Makes sure descriptors 0, 1 and 2 are open, opening /dev/null on each that
// is closed (read-only for 0, write-only for 1 and 2), so that no file the
// tool opens later becomes its stdin, stdout or stderr and receives its log
// lines or output (`nmt-train 2>&-` would write its log into the first file
// it opens). Call first thing in main(). Returns false when one could not be
// opened (then the tool should stop). Never throws.
bool ensure_standard_streams();

// Sends logs to stderr as "[time] [level] message"; `verbose` adds debug
// lines, `warnings_only` keeps warnings and errors only (ranks > 0 of a
// data-parallel run: rank 0 speaks for the group). Its first line says which
// BLAS kernels nmt chose, when it chose them (base/blas_kernels.h).
void setup_logging(bool verbose = false, bool warnings_only = false);

// Installs the handlers of SIGINT, SIGTERM and SIGHUP. Without `stop`, a
// signal removes this process's temporary files (io.h), prints one error
// line and exits with 128 + the signal (130, 143, 129): a file being
// written keeps its old content. With `stop`, the first signal only sets
// *stop (the tool finishes cleanly) and a second acts as above. SIGPIPE (the
// reader of a pipe we write went away) is ignored with `stop`, so a closed log
// pipe never ends a training run or a server; without it, the tool removes
// its temporary files and exits 141 without a word, as `cmd | head` expects.
// SIGXFSZ is ignored, so a file-size limit becomes a write error with a message.
void install_signal_handlers(const char* tool, std::atomic<bool>* stop = nullptr);

// argv as one line that sh (bash for $'...') reads back into the same words: each
// argument bare when it holds only safe characters, else in single quotes,
// or as $'...' with escapes when it holds control characters (so the line
// never breaks). Never throws (beyond std::bad_alloc).
std::string command_line(int argc, const char* const* argv);

// Runs `body` and returns its exit code; an exception is logged as one line
// ("error: ...") and mapped to kExitUsage (nmt::UsageError), kExitError
// (nmt::Error, std::invalid_argument) or kExitInternal (anything else, LibTorch errors without their backtrace).
int run_guarded(const std::function<int()>& body);

}  // namespace nmt
