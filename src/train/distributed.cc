// c10d process groups for data-parallel training: rendezvous, bucketed
// all-reduce and broadcast (see distributed.h).
#include "train/distributed.h"

#include <ATen/ATen.h>
#include <torch/types.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "train/progress.h"

#ifdef NMT_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace nmt {
namespace {

// The value of environment variable `name` as an int, or `fallback` when unset.
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > 1 << 30)
    throw Error(std::string("environment variable ") + name + "='" + v + "' is not a non-negative integer");
  return static_cast<int>(n);
}

// The first line of an exception's message (c10::Error adds a backtrace).
[[maybe_unused]] std::string first_line(const char* what) {
  std::string s(what);
  return s.substr(0, s.find('\n'));
}

}  // namespace

DistributedOptions distributed_from_env(DistributedOptions opt) {
  opt.rank = env_int("RANK", opt.rank);
  opt.world_size = env_int("WORLD_SIZE", opt.world_size);
  opt.local_rank = env_int("LOCAL_RANK", opt.local_rank);
  opt.master_port = env_int("MASTER_PORT", opt.master_port);
  if (const char* a = std::getenv("MASTER_ADDR"); a != nullptr && *a != '\0') opt.master_addr = a;
  if (opt.world_size < 1) throw Error("world size must be at least 1");
  if (opt.rank >= opt.world_size)
    throw Error("rank " + std::to_string(opt.rank) + " is not below the world size " + std::to_string(opt.world_size));
  if (opt.master_port < 1 || opt.master_port > 65535)
    throw Error("master port " + std::to_string(opt.master_port) + " is not a TCP port");
  return opt;
}

#ifdef NMT_WITH_GLOO

bool distributed_supported(std::string* why) {
  if (why) why->clear();
  return true;
}

struct Communicator::Impl {
  DistributedOptions opt;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

std::unique_ptr<Communicator> Communicator::join(const DistributedOptions& opt) {
  if (opt.world_size < 2) throw Error("a process group needs a world size of 2 or more");
  if (opt.rank < 0 || opt.rank >= opt.world_size)
    throw Error("rank " + std::to_string(opt.rank) + " is outside 0.." + std::to_string(opt.world_size - 1));
  auto impl = std::make_unique<Impl>();
  impl->opt = opt;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(opt.timeout_minutes * 60000));
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(opt.master_port);
    so.isServer = opt.rank == 0;
    so.numWorkers = static_cast<std::size_t>(opt.world_size);
    so.waitWorkers = true;
    so.timeout = timeout;
    impl->store = c10::make_intrusive<c10d::TCPStore>(opt.master_addr, so);
    auto go = c10d::ProcessGroupGloo::Options::create(timeout);
    // Which network interface Gloo uses: GLOO_SOCKET_IFNAME as in PyTorch,
    // else loopback for a local group, else this host's name.
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    const bool local = opt.master_addr == "localhost" || opt.master_addr.rfind("127.", 0) == 0;
    if (ifname != nullptr && *ifname != '\0') {
      go->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (local) {
      go->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      go->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, opt.rank, opt.world_size, go);
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(opt.rank) + " could not join the process group at " + opt.master_addr + ":" +
                std::to_string(opt.master_port) + " (world size " + std::to_string(opt.world_size) +
                "): " + first_line(e.what()));
  }
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

void Communicator::all_reduce_sum(const std::vector<at::Tensor>& tensors) {
  // Buckets of tensors with one dtype and device, each flattened into one
  // host buffer; all are launched, then waited on.
  struct Bucket {
    std::vector<at::Tensor> members;
    int64_t bytes = 0;
  };
  std::vector<Bucket> buckets;
  const int64_t limit = std::max<int64_t>(1, impl_->opt.bucket_mb) << 20;
  for (const auto& t : tensors) {
    if (!t.defined()) throw Error("all_reduce_sum: an undefined tensor");
    Bucket* b = nullptr;
    for (auto& cand : buckets)
      if (cand.members.front().scalar_type() == t.scalar_type() && cand.members.front().device() == t.device() &&
          cand.bytes + static_cast<int64_t>(t.nbytes()) <= limit)
        b = &cand;
    if (b == nullptr) b = &buckets.emplace_back();
    b->members.push_back(t);
    b->bytes += static_cast<int64_t>(t.nbytes());
  }
  std::vector<std::vector<at::Tensor>> flats(buckets.size());
  std::vector<c10::intrusive_ptr<c10d::Work>> work;
  try {
    for (size_t k = 0; k < buckets.size(); ++k) {
      std::vector<at::Tensor> parts;
      for (const auto& t : buckets[k].members) parts.push_back(t.reshape({-1}));
      flats[k] = {at::cat(parts).to(at::kCPU).contiguous()};  // [bucket elements] on the host
      work.push_back(impl_->group->allreduce(flats[k]));
    }
    for (auto& w : work) w->wait();
  } catch (const std::exception& e) {
    throw Error("all-reduce failed on rank " + std::to_string(rank()) + ": " + first_line(e.what()));
  }
  for (size_t k = 0; k < buckets.size(); ++k) {
    int64_t offset = 0;
    for (auto& t : buckets[k].members) {
      const int64_t n = t.numel();
      t.copy_(flats[k][0].narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
}

void Communicator::broadcast(const std::vector<at::Tensor>& tensors, int root) {
  try {
    for (const auto& t : tensors) {
      std::vector<at::Tensor> host{t.to(at::kCPU).contiguous()};
      c10d::BroadcastOptions bo;
      bo.rootRank = root;
      impl_->group->broadcast(host, bo)->wait();
      t.copy_(host[0]);
    }
  } catch (const std::exception& e) {
    throw Error("broadcast failed on rank " + std::to_string(rank()) + ": " + first_line(e.what()));
  }
}

#else  // no Gloo in this build

bool distributed_supported(std::string* why) {
  if (why)
    *why = "this build of nmt has no distributed support: LibTorch's c10d Gloo headers (gloo/algorithm.h) were "
           "not found when it was configured (on Debian: apt install libgloo-dev, then rebuild)";
  return false;
}

struct Communicator::Impl {
  DistributedOptions opt;
};

std::unique_ptr<Communicator> Communicator::join(const DistributedOptions&) {
  std::string why;
  distributed_supported(&why);
  throw Error(why);
}

void Communicator::all_reduce_sum(const std::vector<at::Tensor>&) { throw Error("no distributed support"); }
void Communicator::broadcast(const std::vector<at::Tensor>&, int) { throw Error("no distributed support"); }

#endif

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;
int Communicator::rank() const { return impl_->opt.rank; }
int Communicator::world_size() const { return impl_->opt.world_size; }

void Communicator::broadcast_bytes(std::string* bytes, int root) {
  auto size = at::tensor({static_cast<int64_t>(bytes->size())}, at::kLong);
  broadcast({size}, root);
  auto data = at::zeros({size.item<int64_t>()}, at::kByte);
  if (rank() == root) std::memcpy(data.data_ptr(), bytes->data(), bytes->size());
  broadcast({data}, root);
  if (rank() != root) bytes->assign(static_cast<const char*>(data.data_ptr()), static_cast<size_t>(data.numel()));
}

// Beside the Communicator, so that progress.cc needs no LibTorch.
void StepStats::all_reduce(Communicator* comm) {
  if (comm == nullptr) return;
  auto t = torch::tensor({static_cast<double>(tokens), finite ? loss_sum : 0.0, static_cast<double>(sentences),
                          finite ? 0.0 : 1.0}, torch::kDouble);
  comm->all_reduce_sum({t});
  tokens = static_cast<int64_t>(t[0].item<double>());
  loss_sum = t[1].item<double>();
  sentences = static_cast<int64_t>(t[2].item<double>());
  finite = t[3].item<double>() == 0;
}


}  // namespace nmt
