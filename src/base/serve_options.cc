// The checks of nmt-serve's options (serve_options.h) that are not plain
// ranges: the ranges come from the field list, through check_ranges().
#include "base/serve_options.h"

#include "base/check_ranges.h"
#include "base/error.h"

namespace nmt {

void ServeOptions::validate() const {
  check_ranges(*this);  // translate's and runtime's fields included
  runtime.validate();
  translate.validate();
  if (model_paths.empty())
    throw UsageError("option --model (-m) is required: the checkpoint to serve (repeat it for an ensemble)");
  if (host.empty()) throw UsageError("--host must name an address, e.g. 127.0.0.1");
  if (max_sentences > queue_sentences)
    throw UsageError("--max-sentences " + std::to_string(max_sentences) + " is above --queue-sentences " +
                     std::to_string(queue_sentences) + ": a request that large could never be queued");
  if (translate.search.beam_size > max_beam_size)
    throw UsageError("--beam-size " + std::to_string(translate.search.beam_size) + " is above --max-beam-size " +
                     std::to_string(max_beam_size) + ": the default must be one a request could ask for");
}

}  // namespace nmt
