// Helpers of the tests that run the real executables (cli_*_test.cc):
// nmt-train's arguments for the toy corpus, and the splitting of their output.
#pragma once
#include <string>
#include <vector>

#include "test_util.h"

namespace nmt::test {

// nmt-train's arguments for a tiny model on the toy corpus `f`, written to
// the run folder `out` (one thread, the CPU). Never throws (beyond std::bad_alloc).
std::string train_args(const ToyFiles& f, const std::string& out);

// Splits one CSV line with "..." quoting ("" inside quotes is a quote).
std::vector<std::string> csv_fields(const std::string& line);

// The lines of `s`, without their '\n'.
std::vector<std::string> lines_of(const std::string& s);

// The fields of an n-best or pharaoh line, split at each " ||| ".
std::vector<std::string> split_bars(const std::string& line);

}  // namespace nmt::test
