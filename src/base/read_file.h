// Reading a whole file under a size cap: torch-free and below io/, so that
// base/ (the config reader) and every layer above can use it; io/io.h
// includes it with the rest of the tools' file input.
#pragma once
#include <cstddef>
#include <string>

namespace nmt {

// The whole content of `path` when it is at most `max_bytes` long; reads
// at most max_bytes + 1 bytes whatever the file (a device, a FIFO). Throws
// nmt::Error naming the path (and `what`, e.g. "SentencePiece model") when it
// cannot be read or is larger.
std::string read_file_bounded(const std::string& path, size_t max_bytes, const std::string& what);

}  // namespace nmt
