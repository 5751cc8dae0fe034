// What the safety tests (safety_test.cc, safety_run_folder_test.cc,
// safety_input_test.cc) share: the trained toy model they point the
// executables at, and the temporary files a run leaves in a folder.
#pragma once
#include <string>
#include <vector>

#include "test_util.h"

namespace nmt::safety_test {

using nmt::test::quote;

// The trained toy checkpoint (written once per process); throws as
// trained_toy_checkpoint() does.
inline const std::string& model() { return nmt::test::trained_toy_checkpoint(); }

// The arguments that point nmt-translate or nmt-align at model() on one CPU thread.
inline std::string model_args() { return "-m " + quote(model()) + " --device cpu --threads 1"; }

// The temporary files in `dir` (test_util.h: temporary_files()).
inline std::vector<std::string> temporaries(const std::string& dir) { return nmt::test::temporary_files(dir); }

}  // namespace nmt::safety_test
