// A decoder's state for the rows (hypotheses) of one search, opaque to the
// search: named tensors, each marked as moving with the beam (row r is
// hypothesis r's own, as the recurrent state) or fixed per source (the rows
// of one sentence hold the same, as its encoder annotations), and per-batch
// data of the engine's that no row indexes. The search reorders, keeps and
// copies a state; only the engine that made it reads its tensors
// (engine/engine.h). Shapes: R rows.
#pragma once
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

namespace nmt {

class DecoderState {
 public:
  // How a tensor's rows follow the hypotheses.
  enum class Rows {
    kMoveWithBeam,    // row r belongs to hypothesis r: reorder() moves it
    kFixedPerSource,  // the same for every hypothesis of a sentence: only keep() moves it
  };
  // Per-batch data an engine attaches (derive from it); the same for all rows.
  // copy_from() leaves it as it is, so a kept state refilled for another batch
  // keeps the first batch's: an engine whose Extra differs between batches
  // must make its scorer refuse refills (Scorer::refillable(), as a shortlist does).
  struct Extra {
    virtual ~Extra() = default;
  };

  // Adds tensor `name` [R, ..]. Throws nmt::Error when the name is taken.
  void add(std::string name, torch::Tensor tensor, Rows rows);
  // Tensor `name`. Throws nmt::Error naming it when there is none.
  torch::Tensor& at(const std::string& name);
  const torch::Tensor& at(const std::string& name) const;

  // Hypotheses move: the tensors that move with the beam take rows `rows`
  // [R'] (int64 indices into the current rows, on their device), in that
  // order, rows of one sentence staying within it.
  void reorder(const torch::Tensor& rows);
  // Rows `rows` [R'] of every tensor, in that order: unlike reorder(), rows
  // may come from any sentences (a search drops finished sentences so).
  void keep(const torch::Tensor& rows);
  // Copies the moving tensors of `other` (same names, shapes) into this
  // state's, in place (a replayed CUDA graph reads fixed addresses: see
  // own_storage()). Throws nmt::Error when the names differ.
  void copy_moving_from(const DecoderState& other);
  // Gives every tensor storage of its own (contiguous), so that copy_from()
  // can refill all of them in place: one state serves batch after batch of
  // one shape (a captured CUDA graph's).
  void own_storage();
  // Copies every tensor of `other` into this state's, in place; `extra` is
  // left as it is. Throws nmt::Error when the names or shapes differ.
  void copy_from(const DecoderState& other);

  // The engine's per-batch data; null when it has none.
  std::shared_ptr<const Extra> extra;

 private:
  struct Entry {
    std::string name;
    torch::Tensor tensor;
    Rows rows;
  };
  std::vector<Entry> entries_;
};

}  // namespace nmt
