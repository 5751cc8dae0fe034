// Logging set-up and exception-to-exit-code mapping for the executables.
#include "app.h"

#include <c10/util/Exception.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "error.h"

namespace nmt {

void setup_logging(bool verbose) {
  auto logger = spdlog::stderr_color_mt("nmt");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
}

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    spdlog::error("{}", e.what());
    return kExitError;
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}", e.what());
    return kExitError;
  } catch (const c10::Error& e) {
    spdlog::error("internal error (LibTorch): {}", e.what_without_backtrace());
    return kExitInternal;
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    return kExitInternal;
  }
}

}  // namespace nmt
