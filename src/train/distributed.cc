// c10d process groups for data-parallel training: rendezvous, bucketed
// all-reduce and broadcast (see distributed.h).
#include "train/distributed.h"

#include <ATen/ATen.h>
#include <c10/util/Logging.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>
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

#ifdef NMT_WITH_GLOO
// Sets TCPStore's options to its plain TCP server, which every LibTorch has,
// in place of libuv's, and says whether that changed them: LibTorch 2.4 and
// later default to libuv's server and refuse to start it when built without
// libuv (Debian 13's 2.6). LibTorch before 2.2 has no such option
// (`useLibUV`); there this overload, the only one, changes nothing.
template <class Options>
auto use_plain_tcp_store(Options& o, int) -> decltype(o.useLibUV = false, bool()) {
  const bool changed = o.useLibUV;
  o.useLibUV = false;
  return changed;
}
template <class Options>
bool use_plain_tcp_store(Options&, long) {
  return false;
}
#endif

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

namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string text_of(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

// "0.5 s", "30 s", "2 min": a timeout as the messages give it.
std::string duration_text(std::chrono::milliseconds d) {
  const double s = static_cast<double>(d.count()) / 1000;
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 120 ? "%g s" : "%g min", s < 120 ? s : s / 60);
  return buf;
}

// What a worker says when rank 0's store does not answer in time.
Error no_answer_from_rank_0(std::chrono::milliseconds timeout) {
  return Error("no answer from rank 0's rendezvous store within the timeout of " + duration_text(timeout) +
               " (--dist-timeout): is rank 0 running, and is nothing else listening on that port?");
}

// "rank 2", "ranks 1 and 3", "ranks 1, 2 and 5".
std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    out += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return out;
}

// Keys of the rendezvous, beside those Gloo uses.
const std::string kWorldKey = "nmt/world-size";  // rank 0's world size
const std::string kVerdictKey = "nmt/verdict";   // rank 0's: "ok" or why the group cannot form
const std::string kAckKey = "nmt/verdict-read";  // how many ranks read the verdict
std::string rank_key(int r) { return "nmt/rank/" + std::to_string(r); }      // rank r's world size
std::string count_key(int r) { return "nmt/rank-count/" + std::to_string(r); }  // processes that came as rank r

// The rendezvous before Gloo's, every wait bounded by `deadline`: rank 0
// publishes its world size and waits for every other rank to register its
// own; the others check theirs against rank 0's and register. Rank 0 then
// publishes a verdict, so that every rank fails with the same reason when
// one is missing or disagrees. Throws nmt::Error (the reason alone: join()
// adds who and where); a store that does not answer (a program on the port
// that accepts and never speaks) is one whose waits time out.
void rendezvous(c10d::Store& store, const DistributedOptions& opt, std::chrono::steady_clock::time_point deadline,
                std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  auto left = [&](std::chrono::milliseconds grace = std::chrono::milliseconds(0)) {
    const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline + grace - Clock::now());
    return std::max(d, std::chrono::milliseconds(1));
  };
  const int n = opt.world_size;
  if (opt.rank == 0) {
    store.set(kWorldKey, bytes_of(std::to_string(n)));
    std::vector<std::string> keys;
    for (int r = 1; r < n; ++r) keys.push_back(rank_key(r));
    std::string verdict = "ok";
    std::vector<int> arrived, missing;
    try {
      store.wait(keys, left());
      for (int r = 1; r < n; ++r) arrived.push_back(r);
    } catch (const std::exception&) {
      for (int r = 1; r < n; ++r) (store.check({rank_key(r)}) ? arrived : missing).push_back(r);
      verdict = ranks_text(missing) + " did not arrive within the timeout of " + duration_text(timeout) +
                " (--dist-timeout)";
    }
    int64_t readers = 0;  // ranks that wait for the verdict: those that agree on the world size
    for (int r : arrived) {
      const std::string theirs = text_of(store.get(rank_key(r)));
      if (theirs == std::to_string(n)) {
        ++readers;
      } else if (missing.empty() && verdict == "ok") {
        verdict = "rank " + std::to_string(r) + " was started with world size " + theirs + ", rank 0 with " +
                  std::to_string(n) + ": every rank needs the same WORLD_SIZE (--world-size)";
      }
    }
    store.set(kVerdictKey, bytes_of(verdict));
    // Stay (and serve the store) until they have read it, for a few seconds at most.
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (store.add(kAckKey, 0) < readers && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (verdict != "ok") throw Error(verdict);
    return;
  }
  try {
    store.wait({kWorldKey}, left());
  } catch (const std::exception&) {
    throw no_answer_from_rank_0(timeout);
  }
  const std::string world = text_of(store.get(kWorldKey));
  if (store.add(count_key(opt.rank), 1) > 1)
    throw Error("another process was started as rank " + std::to_string(opt.rank) + ": every rank needs its own RANK");
  store.set(rank_key(opt.rank), bytes_of(std::to_string(n)));
  if (world != std::to_string(n))
    throw Error("this rank was started with world size " + std::to_string(n) + ", rank 0 with " + world +
                ": every rank needs the same WORLD_SIZE (--world-size)");
  std::string verdict;
  try {
    // Rank 0 gives its verdict at its deadline at the latest: a little grace for the clocks' start.
    store.wait({kVerdictKey}, left(std::chrono::seconds(5)));
    verdict = text_of(store.get(kVerdictKey));
    store.add(kAckKey, 1);
  } catch (const std::exception&) {
    throw Error("rank 0 gave no word within the timeout of " + duration_text(timeout) + " (--dist-timeout)");
  }
  if (verdict != "ok") throw Error("rank 0 reports: " + verdict);
}

// The rendezvous store at `addr`: rank 0 (`so.isServer`) starts its server,
// the others connect to it, on a thread of its own: LibTorch 2.x's
// constructor pings the server and reads the answer without a timeout (a
// listener that never speaks held it for good). Throws what the constructor
// threw, or nmt::Error when it has not returned 5 s after `deadline` (its own
// tries end `so.timeout` after they begin); that thread is left to end alone.
c10::intrusive_ptr<c10d::Store> open_store(const std::string& addr, c10d::TCPStoreOptions so,
                                           std::chrono::steady_clock::time_point deadline,
                                           std::chrono::milliseconds timeout) {
  // LibTorch 2.x logs each failed try to connect with a backtrace: c10's log level (c10d's,
  // where LibTorch logs without glog) lets through only fatal messages until the store is open.
  struct QuietC10d {
    int saved = FLAGS_caffe2_log_level;
    QuietC10d() { FLAGS_caffe2_log_level = std::max(saved, 3); }
    ~QuietC10d() { FLAGS_caffe2_log_level = saved; }
  } quiet;
  std::packaged_task<c10::intrusive_ptr<c10d::Store>()> make([addr, so]() mutable -> c10::intrusive_ptr<c10d::Store> {
    try {
      return c10::make_intrusive<c10d::TCPStore>(addr, so);
    } catch (const std::exception& e) {
      // a LibTorch built without libuv: its plain TCP server instead
      if (std::string(e.what()).find("libuv") == std::string::npos || !use_plain_tcp_store(so, 0)) throw;
      return c10::make_intrusive<c10d::TCPStore>(addr, so);
    }
  });
  auto store = make.get_future();
  std::thread(std::move(make)).detach();
  const auto by = std::max(deadline, std::chrono::steady_clock::now() + so.timeout) + std::chrono::seconds(5);
  if (store.wait_until(by) != std::future_status::ready)
    throw so.isServer ? Error("the rendezvous store did not start within " + duration_text(timeout) + " (--dist-timeout)")
                      : no_answer_from_rank_0(timeout);
  return store.get();
}

}  // namespace

std::unique_ptr<Communicator> Communicator::join(const DistributedOptions& opt) {
  if (opt.world_size < 2) throw Error("a process group needs a world size of 2 or more");
  if (opt.rank < 0 || opt.rank >= opt.world_size)
    throw Error("rank " + std::to_string(opt.rank) + " is outside 0.." + std::to_string(opt.world_size - 1));
  auto impl = std::make_unique<Impl>();
  impl->opt = opt;
  // At least 1 ms: c10d reads a timeout of 0 as none at all.
  const auto timeout = std::chrono::milliseconds(std::max<int64_t>(1, std::llround(opt.timeout_minutes * 60000)));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string who = "rank " + std::to_string(opt.rank) + " could not join the process group at " +
                          opt.master_addr + ":" + std::to_string(opt.master_port) + " (world size " +
                          std::to_string(opt.world_size) + "): ";
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(opt.master_port);
    so.isServer = opt.rank == 0;
    so.numWorkers = static_cast<std::size_t>(opt.world_size);
    // Not TCPStore's own wait for the workers: on rank 0 it gives up
    // silently at the timeout (Gloo then waits as long again), and on the
    // others it waits for an answer without any timeout. rendezvous() waits
    // instead, each wait bounded.
    so.waitWorkers = false;
    // c10d counts the time to connect in whole seconds (a 0.5 s timeout
    // would give up connecting at once): at least 1 s for the store.
    so.timeout = std::max(timeout, std::chrono::milliseconds(1000));
    impl->store = open_store(opt.master_addr, so, deadline, timeout);
  } catch (const Error& e) {
    throw Error(who + e.what());
  } catch (const std::exception& e) {
    throw Error(who + first_line(e.what()));
  }
  try {
    rendezvous(*impl->store, opt, deadline, timeout);
  } catch (const Error& e) {
    throw Error(who + e.what());
  } catch (const std::exception& e) {
    throw Error(who + first_line(e.what()));
  }
  try {
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
    throw Error(who + first_line(e.what()));
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
