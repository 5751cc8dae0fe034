// nmt-serve's HTTP side (server.h): routes, limits and shutdown on
// cpp-httplib; what each route answers is the Service's.
#include "serve/server.h"

#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "base/error.h"
#include "serve/page.h"
#include "serve/service.h"

namespace nmt {
namespace {

// Debian's cpp-httplib 0.11 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG,
// compiled into the library): a burst of new connections on a busy machine
// overflows it and the kernel resets some of them, requests lost without a
// status. listen() again on a listening socket only changes its backlog, so
// this finds the socket listening on `port` among the process's descriptors
// and gives it SOMAXCONN. Returns whether it found one. Never throws.
bool widen_listen_backlog(int port) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  bool done = false;
  while (const dirent* e = ::readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2 || fd == ::dirfd(dir)) continue;
    int listening = 0;
    socklen_t len = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening == 0) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int bound = -1;
    if (addr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) bound = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
    if (bound == port && ::listen(fd, SOMAXCONN) == 0) done = true;
  }
  ::closedir(dir);
  return done;
}

void put(httplib::Response& res, const HttpReply& reply) {
  res.status = reply.status;
  if (reply.retry_after > 0) res.set_header("Retry-After", std::to_string(reply.retry_after));
  res.set_content(reply.body, "application/json");
}

// The routes of `svr`, answered by `service`.
void route(httplib::Server& svr, Service& service) {
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(page_html(), "text/html; charset=utf-8");
  });
  svr.Get("/health", [&](const httplib::Request&, httplib::Response& res) { put(res, service.health()); });
  svr.Get("/models", [&](const httplib::Request&, httplib::Response& res) { put(res, service.models()); });
  svr.Post("/translate", [&](const httplib::Request& req, httplib::Response& res) {
    put(res, service.translate(req.body));
  });
  // Every other refusal (404, 405, 413 from the body limit, 400 from a
  // request httplib cannot read) as JSON too, unless a route wrote one.
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string what = res.status == 404   ? "no such path: " + req.path + " (GET /, /health, /models; POST /translate)"
                       : res.status == 413 ? std::string("request body too large (--max-body-bytes)")
                       : res.status == 400 ? std::string("the request is not one HTTP/1.1 understands")
                                           : "HTTP status " + std::to_string(res.status);
    res.set_content(error_reply(res.status, what).body, "application/json");
  });
  svr.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("{} {} -> {}", req.method, req.path, res.status);
  });
}

}  // namespace

void serve(const ServeOptions& opt, const std::atomic<bool>& stop) {
  Service service(opt);
  httplib::Server svr;
  const auto threads = static_cast<size_t>(opt.http_threads);
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr.set_payload_max_length(static_cast<size_t>(opt.max_body_bytes));
  route(svr, service);
  int port = static_cast<int>(opt.port);
  if (port == 0) port = svr.bind_to_any_port(opt.host);
  else if (!svr.bind_to_port(opt.host, port)) port = -1;
  if (port < 0)
    throw Error("cannot listen on " + opt.host + ":" + std::to_string(opt.port) +
                " (--host, --port): the port is in use, or the address is not this machine's");
  if (!widen_listen_backlog(port)) spdlog::warn("could not widen the listen backlog: bursts of connections may be reset");
  const auto served = opt.served_models();
  std::string models;
  for (const auto& m : served)
    models += (models.empty() ? "" : ", ") + m.name +
              (m.paths.size() > 1 ? " (an ensemble of " + std::to_string(m.paths.size()) + ")" : "");
  spdlog::info("listening on http://{}:{} ({} {}; POST /translate, GET /health, GET /models, GET / for the page)",
               opt.host, port, served.size() == 1 ? "model" : "models", models);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!stop.load() && !done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    // Stops accepting; listen_after_bind() returns once the requests in hand
    // are answered. Asked again until it has returned: a stop asked before
    // the listening began would otherwise be lost.
    while (!done.load()) {
      svr.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  svr.listen_after_bind();
  done = true;
  watcher.join();
  service.stop();
  spdlog::info("stopped: every request answered");
}

}  // namespace nmt
