// Reads nmt's format 1 and 2 checkpoints without LibTorch's loader, so that
// old files can be converted to the new format safely.
//
// Those files hold a LibTorch archive (a zip of a TorchScript pickle, tensor
// storages and TorchScript source). LibTorch's loader compiles the source and
// runs any __setstate__ it defines: loading a stranger's file can run code.
// This reader takes the zip apart itself, never looks at the source, and runs
// the pickle on a small machine that knows only the opcodes and names nmt's
// files use: it builds plain values and tensors copied out of the archive,
// checks every size and offset against the bytes, and refuses anything else
// with one nmt::Error line.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

// One parameter's optimizer state, as torch::optim::Adam or SGD saved it.
struct LegacyParamState {
  bool has_step = false;
  int64_t step = 0;               // Adam: steps taken
  torch::Tensor exp_avg;          // Adam: first moment
  torch::Tensor exp_avg_sq;       // Adam: second moment
  torch::Tensor max_exp_avg_sq;   // Adam with amsgrad; undefined otherwise
  torch::Tensor momentum_buffer;  // SGD with momentum; undefined otherwise
};

// One parameter group of the optimizer.
struct LegacyParamGroup {
  std::vector<std::string> params;  // weight names, in the optimizer's order
  // Its options: "lr", "eps", "weight_decay", "momentum", ... as numbers,
  // booleans ("amsgrad", "nesterov") as 0 or 1, Adam's "betas" as "beta1" and "beta2".
  std::map<std::string, double> options;
};

struct LegacyOptimizer {
  std::string kind;  // "adam" or "sgd", told by the options of its groups
  std::vector<LegacyParamGroup> groups;
  std::map<std::string, LegacyParamState> state;  // by weight name; parameters without state are absent
};

// The training state: what nmt::TrainState held when these files were written.
struct LegacyTrainState {
  int64_t step = 0;
  int64_t epoch = 1;
  int64_t batch_in_epoch = 0;
  double learning_rate = 0;
  double best_metric = 0;
  bool has_best = false;
  int64_t bad_validations = 0;
  int64_t plateau = 0;
  int64_t seed = 1;
  double elapsed_seconds = 0;
  torch::Tensor rng_state;         // CPU generator state; undefined when not stored
  torch::Tensor device_rng_state;  // CUDA generator state; undefined when not stored
};

// Everything a format 1 or 2 checkpoint holds. Tensors are CPU, contiguous
// and own their memory.
struct LegacyCheckpoint {
  std::string config;   // ModelOptions text, not parsed here
  std::string meta;     // JSON text of who wrote the file (CheckpointMeta); "" when absent
  std::string src_spm;  // SentencePiece model bytes, source side
  std::string tgt_spm;  // target side
  std::map<std::string, torch::Tensor> weights;  // by named_parameters()/named_buffers() key
  std::vector<std::string> weight_order;         // the same names in the file's order
  bool has_optimizer = false;
  LegacyOptimizer optimizer;
  bool has_train_state = false;
  LegacyTrainState state;
};

// The archive inside a format 1 or 2 checkpoint file's bytes: checks the
// header (magic, version; for version 2 the body size and CRC-32) and returns
// what follows it, a view into `file_bytes`. Throws nmt::Error naming
// `origin` for a foreign file, another version, or a truncated or damaged one.
std::string_view legacy_archive_bytes(std::string_view file_bytes, const std::string& origin);

// Parses the archive of a format 1 or 2 checkpoint (the bytes after the nmt
// header) without LibTorch's loader: nothing in the file is compiled or run.
// Throws nmt::Error naming `origin` for anything that is not what nmt wrote:
// damaged or truncated bytes, a pickle opcode or name nmt never writes,
// sizes or offsets outside the bytes, missing or mistyped entries. Memory
// use is bounded: the tensors it copies out never hold more bytes than the
// input, and its bookkeeping grows with the pickle's length (capped).
LegacyCheckpoint read_legacy_checkpoint(std::string_view archive_bytes, const std::string& origin);

}  // namespace nmt
