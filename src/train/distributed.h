// Data-parallel training across processes on LibTorch's own distributed
// engine (c10d): a TCP rendezvous store served by rank 0 and a Gloo process
// group. Gloo all-reduces CPU tensors; CUDA tensors are staged through host
// memory. Builds whose LibTorch (or system) lacks the Gloo headers compile
// without it and say so when asked for more than one process.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "base/options.h"

namespace nmt {

// `opt` with the fields torchrun's environment variables set: RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT. Unset variables leave
// the field alone. Throws nmt::Error naming a malformed variable or an
// inconsistent rank.
DistributedOptions distributed_from_env(DistributedOptions opt);

// Whether this build can join a process group; if not, `why` says what is
// missing.
bool distributed_supported(std::string* why);

// This process's membership of the group. Every method is collective: all
// ranks call the same methods in the same order, or they wait until the
// timeout and throw.
class Communicator {
 public:
  // Joins the group described by `opt` (rank 0 serves the store at
  // master_addr:master_port, the others connect to it). Before Gloo's own
  // rendezvous the ranks check through the store that they agree on the
  // world size and that no rank comes twice, every wait bounded by the
  // timeout (a store that never answers included). Throws nmt::Error, one
  // line naming this rank, the address and the reason, when this build has
  // no distributed support, on bad options, when ranks disagree, or when the
  // other ranks (or rank 0's store) do not answer within the timeout.
  static std::unique_ptr<Communicator> join(const DistributedOptions& opt);
  ~Communicator();

  int rank() const;
  int world_size() const;

  // Sums every tensor over all ranks, in place. Tensors are packed into flat
  // buckets of about bucket_mb (per dtype and device), all launched before
  // any is waited on. Throws nmt::Error on a communication failure.
  void all_reduce_sum(const std::vector<at::Tensor>& tensors);

  // Copies the root's values into every rank's tensors, in place.
  void broadcast(const std::vector<at::Tensor>& tensors, int root = 0);

  // Copies the root's bytes to every rank.
  void broadcast_bytes(std::string* bytes, int root = 0);

 private:
  struct Impl;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmt
