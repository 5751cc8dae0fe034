// File input and output shared by the three tools, written so that nothing
// the user points at is damaged:
// - OutputFile: a regular file (or a path not there yet) is written to a
//   temporary file beside it and renamed over it at commit(), so it is either
//   the old file or the complete new one; a symbolic link has its target
//   replaced that way; a character device, FIFO or /dev/stdout-like link
//   (/proc/self/fd/N) is opened and written in place, never replaced.
// - The temporary files of this process are listed where a signal handler
//   can remove them (remove_temporaries_now), and a later run removes those
//   of processes that are gone (remove_stale_temporaries).
// - LineReader: lines from a file, FIFO or stdin ("-") with a byte cap per
//   line, so no input can take unbounded memory.
// - read_file_bounded: a whole file, refused past a size cap (declared in
//   base/read_file.h, below io/, for the config reader; included here).
// - RunLock: an exclusive OS lock on a folder for the life of a process.
// Everything here is torch-free and throws nmt::Error naming the path.
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "base/read_file.h"  // read_file_bounded

namespace nmt {

// How an output path is written (see OutputFile).
enum class OutputMode {
  kStdout,   // "" or "-": this process's standard output
  kReplace,  // a regular file or a new path: temporary file + rename
  kInPlace,  // a device, FIFO or socket: opened and written as it is
  kDup,      // /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: a copy of descriptor N
};

struct OutputTarget {
  OutputMode mode = OutputMode::kStdout;
  std::string path;  // the file finally written: symbolic links followed (kReplace, kInPlace)
  int fd = -1;       // kDup: the descriptor
};

// Decides how `path` is written, following symbolic links. Throws
// nmt::Error naming `path` for a folder, a block device, a link loop or a
// path that cannot be examined.
OutputTarget resolve_output(const std::string& path);

// An output file that is either written completely or not at all (see the
// top of this file). Write through stream(); flush() reports a failed write;
// commit() makes the output final. Destroying an uncommitted OutputFile
// removes its temporary file and leaves the old file as it was.
class OutputFile {
 public:
  // Opens `path` ("" or "-": stdout) for writing. With `sweep_stale`, first
  // removes temporary files of `path` left by processes that are gone.
  // Throws nmt::Error naming the path when it cannot be opened.
  explicit OutputFile(const std::string& path, bool sweep_stale = true);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream();
  // Pushes buffered bytes out. Throws nmt::Error naming the path and the
  // system's reason ("No space left on device") when a write failed.
  void flush();
  // flush(), then for a replaced file fsync and rename over the target.
  // Throws nmt::Error as flush() does, or when the rename fails (the old
  // file is then unchanged).
  void commit();
  // The name used in messages: the path given, or "<stdout>".
  const std::string& name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes `bytes` to `path` through an OutputFile and commits it. Throws nmt::Error.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Name of the temporary file this process uses while replacing `path`.
std::string temporary_name(const std::string& path);

// Removes temporary files ("NAME.tmp.PID") in `dir` whose process is gone;
// with `name`, only those of that file name. Returns how many were removed.
// Never throws (files that cannot be removed are left).
int remove_stale_temporaries(const std::string& dir, const std::string& name = "");

// Removes every temporary file this process is writing. Async-signal-safe:
// meant for signal handlers, before _exit().
void remove_temporaries_now();

// Reads lines from a file, a FIFO or stdin ("" or "-"), at most `max_bytes`
// kept per line: the rest of a longer line is read and dropped (the kept part
// ends on a UTF-8 character boundary) and next() says so. Memory stays
// bounded by max_bytes whatever the input.
class LineReader {
 public:
  // Throws nmt::Error naming the path when it cannot be opened.
  LineReader(const std::string& path, size_t max_bytes);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its '\n' into *line; false at the end of input.
  // *cropped (when given) says whether the line was longer than max_bytes.
  // Throws nmt::Error located at path:line for a NUL byte (checked in the
  // dropped part too; a UTF-16 file is named as such) or a read error.
  bool next(std::string* line, bool* cropped = nullptr);
  // Whether next() can return without waiting: a whole line is buffered,
  // input is ready to be read, or the input has ended. False only while a
  // pipe or terminal has nothing more to give yet. Never throws.
  bool more_ready() const;
  const std::string& name() const { return name_; }  // path, or "<stdin>"
  int64_t line() const { return line_; }            // lines returned so far

 private:
  bool fill();  // reads more input into the buffer; false at end of input
  std::string name_;
  int fd_ = -1;
  bool own_fd_ = false;
  size_t max_bytes_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  int64_t line_ = 0;
};

// An exclusive lock on a folder (flock on DIR/.nmt.lock), held until
// destroyed or the process ends, however it ends. The lock file holds the
// owner's process id.
class RunLock {
 public:
  // Takes the lock or throws nmt::Error "DIR is in use by process PID".
  explicit RunLock(const std::string& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  static std::string file_name() { return ".nmt.lock"; }

 private:
  int fd_ = -1;
};

}  // namespace nmt
