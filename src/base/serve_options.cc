// The checks of nmt-serve's options (serve_options.h) that are not plain
// ranges: the ranges come from the field list, through check_ranges().
#include "base/serve_options.h"

#include <algorithm>
#include <cctype>

#include "base/check_ranges.h"
#include "base/error.h"

namespace nmt {
namespace {

// Whether `s` can name a served model: letters, digits, '-', '_' and '.', not empty.
bool model_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

ServeOptions ServeOptions::resolved() const {
  ServeOptions r = *this;
  r.translate.search.resolve_beam(given);
  return r;
}

void ServeOptions::validate() const {
  check_ranges(*this);  // translate's and runtime's fields included
  runtime.validate();
  translate.validate();
  const auto models = served_models();  // -m given, each value well formed
  rescore.validate_given(given);
  translate.shortlist.validate_given(given);
  mbr.validate(translate.search.beam_size, given);
  if (models.size() > 1 && (!ensemble_weights.empty() || rescore.enabled()))
    throw UsageError(std::string(ensemble_weights.empty() ? "--r2l-model and --channel-model rescore the beams"
                                                          : "--ensemble-weights weighs the checkpoints") +
                     " of one served model, and -m names " + std::to_string(models.size()) +
                     " models (NAME=PATH): serve that system alone");
  validate_ensemble_weights(ensemble_weights, models.front().paths);
  if (host.empty()) throw UsageError("--host must name an address, e.g. 127.0.0.1");
  if (max_sentences > queue_sentences)
    throw UsageError("--max-sentences " + std::to_string(max_sentences) + " is above --queue-sentences " +
                     std::to_string(queue_sentences) + ": a request that large could never be queued");
  if (translate.search.beam_size > max_beam_size)
    throw UsageError("--beam-size " + std::to_string(translate.search.beam_size) + " is above --max-beam-size " +
                     std::to_string(max_beam_size) + ": the default must be one a request could ask for");
}

std::vector<ServedModel> ServeOptions::served_models() const {
  if (model_paths.empty())
    throw UsageError("option --model (-m) is required: the checkpoint to serve (repeat it for an ensemble, "
                     "NAME=PATH for several models)");
  std::vector<ServedModel> models;
  for (const auto& value : model_paths) {
    std::string name = "default", path = value;
    if (const auto eq = value.find('='); eq != std::string::npos && model_name(value.substr(0, eq))) {
      name = value.substr(0, eq);
      path = value.substr(eq + 1);
    }
    if (path.empty()) throw UsageError("--model '" + value + "': no checkpoint path after the name");
    auto it = std::find_if(models.begin(), models.end(), [&](const ServedModel& m) { return m.name == name; });
    if (it == models.end()) it = models.insert(models.end(), ServedModel{name, {}});
    it->paths.push_back(path);
  }
  return models;
}

}  // namespace nmt
