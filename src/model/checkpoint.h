// The checkpoint file: everything needed to translate (model config,
// tokenizers, weights) and to resume training (optimizer, scheduler, RNG and
// data position), in one file written atomically.
//
// Layout (version 3): 8-byte magic "NMTCKPT\n", uint32 format version,
// uint64 size of the body, uint32 CRC-32 (zlib) of the body, all
// little-endian, then the body: named tensors in the safetensors layout
// (model/tensor_file.h), which holds no code. Metadata: "format" ("nmt
// checkpoint 3"), "config" (ModelOptions text), "meta" (JSON: who wrote the
// file and how, CheckpointMeta) and, in training checkpoints, "train_state"
// (JSON: TrainState's scalars) and "optimizer" (JSON: its kind, per group its
// options and per parameter Adam's step). Tensors: "model.<parameter>",
// "tokenizer.src" / "tokenizer.tgt" (SentencePiece model bytes, U8) and, in
// training checkpoints, "optimizer.<group>.<index>.<moment>", "state.rng" and
// "state.device_rng" (generator states, U8) and, where training smooths its
// weights, "state.weights.<parameter>" (the weights the optimizer steps; the
// model's are their moving average).
//
// Reading checks, before a model is built: the header, the checksum, the
// tensor layout (every range inside the file), the model config (every
// dimension in range) and each weight's name and shape against the config
// (parameter_shapes()), so that a file can never make nmt allocate more than
// its own size; the training state is checked field by field when a run
// resumes from it. Versions 1 and 2 (a LibTorch archive, whose loading can
// run code from the file) are refused with a hint; convert_checkpoint()
// reads them without LibTorch's loader (model/legacy_checkpoint.h).
#pragma once
#include <torch/optim.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/schedule_state.h"
#include "model/model.h"
#include "text/tokenizer.h"

namespace nmt {

constexpr uint32_t kCheckpointVersion = 3;  // written and read; versions 1 and 2 are only converted

// Where training stands; saved with every training checkpoint.
struct TrainState : ScheduleState {  // learning rate, best figure, plateau and early-stopping counts
  int64_t step = 0;            // optimizer steps taken
  int64_t epoch = 1;           // current epoch (1-based)
  int64_t batch_in_epoch = 0;  // batches of this epoch already consumed
  int64_t seed = 1;              // the run's seed; data order derives from it
  double elapsed_seconds = 0;    // training wall time so far
  torch::Tensor rng_state;       // CPU generator state (dropout on the CPU, data order)
  torch::Tensor device_rng_state;  // the training device's generator (dropout on CUDA); undefined on the CPU
  // With --exponential-smoothing the file's model weights are a moving
  // average, and these (by parameter name, in parameter_shapes() order) the
  // weights the optimizer steps, which a resumed run goes on from. Empty
  // otherwise.
  std::vector<std::pair<std::string, torch::Tensor>> stepped_weights;

  // The scalar fields, each once, by the key a checkpoint stores it under:
  // v(key, field) for every one (the generator states are stored apart).
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("step", s.step);
    v("epoch", s.epoch);
    v("batch_in_epoch", s.batch_in_epoch);
    v("learning_rate", s.learning_rate);
    v("best_metric", s.best_metric);
    v("has_best", s.has_best);
    v("bad_validations", s.bad_validations);
    v("plateau", s.plateau);
    v("seed", s.seed);
    v("elapsed_seconds", s.elapsed_seconds);
  }
};

// Who wrote a checkpoint and how (its "meta" entry). Informational: nothing
// that loads a model depends on it, and files without it load as before.
struct CheckpointMeta {
  std::string writer;     // the nmt build that wrote the file, e.g. "nmt 0.1.0 (commit abc1234)"
  std::string command;    // the command line of the training run, quoted for a shell ("" unknown)
  std::string folder;     // the folder that command ran in ("" unknown)
  int64_t step = -1;      // the training step of the weights (-1 unknown)
  std::string made_from;  // an average or a released model: what it was made from ("" for a training checkpoint)
};

// A model ready to run, with its tokenizers.
struct LoadedModel {
  ModelOptions options;
  Tokenizer src_tok;
  Tokenizer tgt_tok;
  Seq2Seq model{nullptr};
  CheckpointMeta meta;  // empty fields (step -1) for a file without one
};

// Writes a checkpoint to `path` through a temporary file in the same folder
// and a rename, so an interrupted write never replaces a good file. With
// `optimizer` and `state`, a training checkpoint. `meta` is stored with
// `writer` set to this build (nmt_build()) and, when its step is unknown,
// the step of `state`. Throws nmt::Error on I/O failure, or (writing
// nothing) when a weight holds NaN or Inf.
void save_checkpoint(const std::string& path, Seq2Seq& model, const Tokenizer& src_tok, const Tokenizer& tgt_tok,
                     torch::optim::Optimizer* optimizer = nullptr, const TrainState* state = nullptr,
                     CheckpointMeta meta = {});

// A checkpoint file's bytes: the header (magic, `version`, and from version
// 2 on the body's size and CRC-32), then `body`. What save_checkpoint()
// writes around its body; tests use it to seal bodies they edit.
std::string checkpoint_file_bytes(std::string_view body, uint32_t version = kCheckpointVersion);

// What a checkpoint's bytes hold, checked but not yet turned into a model.
struct CheckpointInfo {
  ModelOptions options;      // the architecture (validated)
  std::string src_spm;       // SentencePiece model bytes, source side
  std::string tgt_spm;       // target side
  bool has_train_state = false;  // optimizer and training state present
  uint32_t format_version = 0;   // of the file's header
  TrainState state;              // with has_train_state: the scalar fields (no generator state or weights)
  bool smoothed = false;         // the training state holds stepped weights: the model's are their moving average
  bool has_meta = false;         // the file records who wrote it (files from before that: no)
  CheckpointMeta meta;
};

// Parses checkpoint bytes: header (magic, version, size, checksum), tensor
// layout, config, every weight's shape against it, tokenizers, training
// state. `origin` names the source in errors. Throws nmt::Error with a hint
// for anything malformed, damaged or of an older format; never crashes on
// arbitrary bytes and never allocates much more than their size.
CheckpointInfo inspect_checkpoint(const std::string& bytes, const std::string& origin);

// What `path` holds, for people ("nmt-translate --info"): format version,
// who wrote it and how (the nmt build, the training command, what it was
// made from), parameter count, vocabulary sizes, the training state (step,
// epoch, learning rate, best validation figure) and the model options, one
// "key: value" per line. Throws nmt::Error as load_checkpoint() does.
std::string describe_checkpoint(const std::string& path);

// Reads a checkpoint's model and tokenizers onto `device`. Reads the header
// before the body, so a device or foreign file is refused at once. Throws
// nmt::Error with a hint for a missing file, a foreign, truncated or damaged
// (checksum) file, a format version this build does not read, or a weight
// holding NaN or Inf (named).
LoadedModel load_checkpoint(const std::string& path, const torch::Device& device);

// Writes to `out` a checkpoint whose weights are the element-wise mean of
// the weights of `paths` (checkpoint averaging), with the first one's
// configuration, tokenizers and meta (its "made_from" naming the files)
// and no training state. Returns the averaged model. Throws nmt::Error when `paths` is empty, a file cannot be read, or
// the checkpoints differ in configuration or tokenizers.
LoadedModel average_checkpoints(const std::vector<std::string>& paths, const std::string& out);

// The sizes of a release_checkpoint().
struct ReleaseResult {
  uint64_t in_bytes = 0, out_bytes = 0;
  int64_t step = -1;  // the training step of the weights (-1 unknown)
};

// Writes to `out` the model of checkpoint `in` (configuration, tokenizers,
// weights and its meta, which gains "made_from") without the optimizer and
// training state: a model to ship, which translates and aligns exactly as
// `in` does but cannot be resumed. `out` is written atomically (temporary
// file and rename). Throws nmt::UsageError when `out` names `in` (by any
// path or link; `in` is never replaced), nmt::Error when `in` is not a
// readable checkpoint or `out` cannot be written (which is then left as it
// was).
ReleaseResult release_checkpoint(const std::string& in, const std::string& out);

// What a convert_checkpoint() did.
struct ConvertResult {
  uint32_t from_version = 0;  // the input's format
  bool resumable = false;     // the input held optimizer and training state, and so does the output
  int64_t step = -1;          // their training step (-1: none)
  uint64_t in_bytes = 0, out_bytes = 0;
};

// Writes to `out` (atomically) checkpoint `in` of format 1 or 2 in the
// current format: model, tokenizers and, when `in` has them, optimizer and
// training state. `in` is read by read_legacy_checkpoint(), which runs
// nothing from the file; its weights are checked against its config as a
// load checks them, and the output is parsed back before it is kept.
// Throws nmt::UsageError when `out` names `in`, nmt::Error when `in` is
// not a format 1 or 2 checkpoint or is damaged (naming what).
ConvertResult convert_checkpoint(const std::string& in, const std::string& out);

// Restores the optimizer and returns the training state of a training
// checkpoint, each field checked: counts in range, the learning rate finite
// and positive, the generator state one this LibTorch takes, the optimizer
// of the run's kind with moments of its parameters' shapes, finite, and the
// stepped weights (if any) one per parameter, of its shape, finite. Throws
// nmt::Error naming the file and the field, or when `path` holds no
// training state.
TrainState load_train_state(const std::string& path, torch::optim::Optimizer& optimizer, const torch::Device& device);

}  // namespace nmt
