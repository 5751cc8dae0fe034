// The opaque decoder state of a search (decoder_state.h).
#include "engine/decoder_state.h"

#include "base/error.h"

namespace nmt {

void DecoderState::add(std::string name, torch::Tensor tensor, Rows rows) {
  for (const auto& e : entries_)
    if (e.name == name) throw Error("decoder state: tensor '" + name + "' added twice");
  entries_.push_back({std::move(name), std::move(tensor), rows});
}

torch::Tensor& DecoderState::at(const std::string& name) {
  for (auto& e : entries_)
    if (e.name == name) return e.tensor;
  throw Error("decoder state: no tensor '" + name + "'");
}

const torch::Tensor& DecoderState::at(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return e.tensor;
  throw Error("decoder state: no tensor '" + name + "'");
}

void DecoderState::reorder(const torch::Tensor& rows) {
  for (auto& e : entries_)
    if (e.rows == Rows::kMoveWithBeam) e.tensor = e.tensor.index_select(0, rows);
}

void DecoderState::keep(const torch::Tensor& rows) {
  for (auto& e : entries_) e.tensor = e.tensor.index_select(0, rows);
}

void DecoderState::copy_moving_from(const DecoderState& other) {
  for (auto& e : entries_)
    if (e.rows == Rows::kMoveWithBeam) e.tensor.copy_(other.at(e.name));
}

void DecoderState::own_storage() {
  for (auto& e : entries_)
    if (e.tensor.defined()) e.tensor = e.tensor.clone(torch::MemoryFormat::Contiguous);
}

void DecoderState::copy_from(const DecoderState& other) {
  if (other.entries_.size() != entries_.size())
    throw Error("decoder state: " + std::to_string(other.entries_.size()) + " tensors copied into " +
                std::to_string(entries_.size()));
  for (auto& e : entries_) {
    const auto& from = other.at(e.name);
    if (from.defined() != e.tensor.defined() || (from.defined() && from.sizes() != e.tensor.sizes()))
      throw Error("decoder state: tensor '" + e.name + "' of another shape copied in place");
    if (from.defined()) e.tensor.copy_(from);
  }
}

}  // namespace nmt
