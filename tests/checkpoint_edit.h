// Tests of hostile checkpoints: take a real format 3 file apart, change what
// a stranger could change, and seal it again with a valid size and
// checksum, so that each check after the checksum is what gets tested.
#pragma once
#include <torch/types.h>

#include <map>
#include <string>

namespace nmt::test {

// The tensors and metadata of a format 3 checkpoint.
struct CheckpointParts {
  std::map<std::string, torch::Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Reads the parts of the checkpoint at `path` (which must be valid).
CheckpointParts read_checkpoint_parts(const std::string& path);

// Writes `parts` as a checkpoint at `path`: a valid header and checksum.
void write_checkpoint_parts(const std::string& path, const CheckpointParts& parts);

// The body (safetensors layout) of the checkpoint at `path`.
std::string checkpoint_body(const std::string& path);

// Writes `body` behind a version 3 header with its size and checksum.
void write_sealed(const std::string& path, const std::string& body);

// Writes `archive` (a LibTorch zip) behind a version 2 header with its size
// and checksum: an old-format file with whatever archive a test made.
void write_old_body(const std::string& path, const std::string& archive);

// The body with its JSON header text replaced by `json` (the data kept).
std::string with_json_header(const std::string& body, const std::string& json);

// The JSON header text of a body.
std::string json_header(const std::string& body);

}  // namespace nmt::test
