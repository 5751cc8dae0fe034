// nmt-serve's HTTP side: cpp-httplib serving a Service (service.h) and the
// page (page.h) until a stop is asked for.
#pragma once
#include <atomic>

#include "base/serve_options.h"

namespace nmt {

// Loads the models of `opt`, listens on opt.host:opt.port (logging
// "listening on http://HOST:PORT", the port chosen when opt.port is 0) and
// answers GET /, GET /health, GET /models and POST /translate until *stop is
// set (SIGTERM, SIGINT): then stops accepting, answers the requests it has
// and returns. Refusals are JSON {"error": ...} with their status, unknown
// paths included (404). Reads no file a request names. Throws
// nmt::UsageError for bad options, nmt::Error when a model cannot be loaded
// or the address cannot be bound.
void serve(const ServeOptions& opt, const std::atomic<bool>& stop);

}  // namespace nmt
