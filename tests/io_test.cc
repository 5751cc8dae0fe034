// The I/O module: output files that replace regular files whole and write
// devices, FIFOs and descriptor links in place; writes that fail part-way or
// are killed leave the old file byte-identical; stale temporary files; line
// reading with a byte cap; bounded file reads; the run-folder lock.
#include "io/io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {
namespace fs = std::filesystem;
using nmt::test::contains;
using nmt::test::error_of;
using nmt::test::read_bytes;
using nmt::test::temp_dir;
using nmt::test::write_bytes;

std::vector<std::string> temporaries(const std::string& dir) { return nmt::test::temporary_files(dir); }

void write_all(const std::string& path, const std::string& text) {
  nmt::OutputFile f(path);
  f.stream() << text;
  f.commit();
}

TEST(OutputFileTest, ReplacesARegularFileWholeAndKeepsItsMode) {
  const auto dir = temp_dir("io_regular");
  const auto path = dir + "/out.txt";
  write_bytes(path, "old\n");
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  {
    nmt::OutputFile f(path);
    f.stream() << "new ";
    f.flush();
    EXPECT_EQ(read_bytes(path), "old\n") << "visible before commit";
    EXPECT_EQ(temporaries(dir).size(), 1u);
    f.stream() << "text\n";
    f.commit();
  }
  EXPECT_EQ(read_bytes(path), "new text\n");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(OutputFileTest, UncommittedOutputLeavesTheOldFile) {
  const auto dir = temp_dir("io_abandon");
  const auto path = dir + "/out.txt";
  write_bytes(path, "old\n");
  {
    nmt::OutputFile f(path);
    f.stream() << std::string(200000, 'x');
    f.flush();
  }  // destroyed without commit, as when an exception unwinds
  EXPECT_EQ(read_bytes(path), "old\n");
  EXPECT_TRUE(temporaries(dir).empty());
  // A new path that was never committed does not appear.
  { nmt::OutputFile f(dir + "/new.txt"); f.stream() << "x"; }
  EXPECT_FALSE(fs::exists(dir + "/new.txt"));
}

TEST(OutputFileTest, SymlinkTargetIsReplacedAndTheLinkKept) {
  const auto dir = temp_dir("io_link");
  fs::create_directories(dir + "/real");
  write_bytes(dir + "/real/target.txt", "old\n");
  fs::create_symlink("real/target.txt", dir + "/link.txt");  // relative, as ln -s makes them
  fs::create_symlink(dir + "/link.txt", dir + "/link2.txt");  // a chain
  write_all(dir + "/link2.txt", "new\n");
  EXPECT_TRUE(fs::is_symlink(dir + "/link.txt"));
  EXPECT_TRUE(fs::is_symlink(dir + "/link2.txt"));
  EXPECT_EQ(read_bytes(dir + "/real/target.txt"), "new\n");
  EXPECT_TRUE(temporaries(dir + "/real").empty());
  EXPECT_TRUE(temporaries(dir).empty());
  // A dangling link: its target is created.
  fs::create_symlink("made.txt", dir + "/dangling.txt");
  write_all(dir + "/dangling.txt", "made\n");
  EXPECT_TRUE(fs::is_symlink(dir + "/dangling.txt"));
  EXPECT_EQ(read_bytes(dir + "/made.txt"), "made\n");
}

TEST(OutputFileTest, FifoIsWrittenInPlace) {
  const auto dir = temp_dir("io_fifo");
  const auto path = dir + "/pipe";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // The read end opens first (non-blocking), so the writer never waits and a
  // writer that replaced the FIFO shows as nothing read, not as a hang.
  const int r = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(r, 0);
  write_all(path, "through the pipe\n");
  char buf[64] = {0};
  const ssize_t n = ::read(r, buf, sizeof buf - 1);
  ::close(r);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "through the pipe\n");
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(OutputFileTest, DescriptorLinksWriteToTheDescriptor) {
  // /proc/self/fd/N and /dev/fd/N (what /dev/stdout leads to) write where
  // descriptor N goes, here the write end of a pipe.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  for (const std::string prefix : {"/proc/self/fd/", "/dev/fd/"}) {
    write_all(prefix + std::to_string(p[1]), prefix + "\n");
    char buf[64] = {0};
    const ssize_t n = ::read(p[0], buf, sizeof buf - 1);
    EXPECT_EQ(std::string(buf, n > 0 ? n : 0), prefix + "\n");
  }
  ::close(p[0]);
  ::close(p[1]);
  EXPECT_EQ(nmt::resolve_output("/dev/stdout").mode, nmt::OutputMode::kDup);
  EXPECT_EQ(nmt::resolve_output("/dev/stdout").fd, 1);
  EXPECT_EQ(nmt::resolve_output("-").mode, nmt::OutputMode::kStdout);
}

TEST(OutputFileTest, CharacterDeviceIsWrittenInPlace) {
  if (::geteuid() != 0) GTEST_SKIP() << "making a device node (mknod) needs root";
  const auto dir = temp_dir("io_chardev");
  const auto path = dir + "/null";
  ASSERT_EQ(::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);  // a private /dev/null
  write_all(path, "gone\n");
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced by a regular file";
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  EXPECT_TRUE(temporaries(dir).empty());
  // /dev/full in place: the write error is reported, the node stays.
  const auto full = dir + "/full";
  ASSERT_EQ(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
  const auto msg = error_of([&] { write_all(full, "x"); });
  EXPECT_TRUE(contains(msg, full) && contains(msg, "No space left")) << msg;
  ASSERT_EQ(::lstat(full.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(OutputFileTest, FoldersAndMissingFoldersAreErrorsNamingThePath) {
  const auto dir = temp_dir("io_folder");
  auto msg = error_of([&] { nmt::OutputFile f(dir); });
  EXPECT_TRUE(contains(msg, dir) && contains(msg, "folder")) << msg;
  msg = error_of([&] { nmt::OutputFile f(dir + "/no/such/out.txt"); });
  EXPECT_TRUE(contains(msg, dir + "/no/such/out.txt") && contains(msg, "cannot open output")) << msg;
}

// Runs `f` with writes limited to `bytes` per file (RLIMIT_FSIZE): a write
// past the limit fails with EFBIG, as on a full disk, part-way through.
template <typename F>
void with_file_size_limit(rlim_t bytes, F&& f) {
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = bytes;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  f();
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
}

TEST(OutputFileTest, AWriteThatFailsPartWayLeavesTheOldFileByteIdentical) {
  const auto dir = temp_dir("io_partial");
  const auto path = dir + "/out.bin";
  std::string old(50000, '\0');
  for (size_t i = 0; i < old.size(); ++i) old[i] = static_cast<char>(i * 7);
  write_bytes(path, old);
  std::string msg;
  with_file_size_limit(100000, [&] {
    msg = error_of([&] {
      nmt::OutputFile f(path);
      for (int i = 0; i < 100; ++i) f.stream() << std::string(10000, 'n');  // 1 MB: fails near 100 kB
      f.commit();
    });
  });
  EXPECT_TRUE(contains(msg, path) && contains(msg, "write failed")) << msg;
  EXPECT_EQ(read_bytes(path), old);
  EXPECT_TRUE(temporaries(dir).empty());
  // The same through write_file_atomic (checkpoints, tokenizer models).
  with_file_size_limit(100000, [&] {
    msg = error_of([&] { nmt::write_file_atomic(path, std::string(300000, 'c')); });
  });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_EQ(read_bytes(path), old);
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(OutputFileTest, AWriterKilledMidWriteLeavesTheOldFileAndALaterRunSweepsItsTemporary) {
  const auto dir = temp_dir("io_kill");
  const auto path = dir + "/out.txt";
  write_bytes(path, "old\n");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // writes half a file, says so, then waits to be killed
    nmt::OutputFile f(path);
    f.stream() << std::string(1 << 20, 'h');
    f.flush();
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(temporaries(dir).size(), 1u) << "the writer's temporary file exists mid-write";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(read_bytes(path), "old\n");
  // The dead writer's file is swept; a live process's is not.
  const std::string live = dir + "/other.txt.tmp." + std::to_string(::getppid());
  write_bytes(live, "busy");
  EXPECT_EQ(nmt::remove_stale_temporaries(dir), 1);
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{"other.txt.tmp." + std::to_string(::getppid())});
  // Opening the same output again sweeps a stale temporary of its own name.
  write_bytes(dir + "/out.txt.tmp.999999999", "stale");
  write_all(path, "new\n");
  EXPECT_FALSE(fs::exists(dir + "/out.txt.tmp.999999999"));
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(OutputFileTest, SignalHandlerRemovesTheTemporaryFiles) {
  const auto dir = temp_dir("io_signal");
  const auto path = dir + "/out.txt";
  write_bytes(path, "old\n");
  nmt::OutputFile a(path), b(dir + "/second.txt");
  a.stream() << "half";
  a.flush();
  ASSERT_EQ(temporaries(dir).size(), 2u);
  nmt::remove_temporaries_now();  // what the handler calls before _exit
  EXPECT_TRUE(temporaries(dir).empty());
  EXPECT_EQ(read_bytes(path), "old\n");
}

// --- LineReader -----------------------------------------------------------------

std::vector<std::string> read_all_lines(const std::string& path, size_t cap, std::vector<bool>* cropped = nullptr) {
  nmt::LineReader r(path, cap);
  std::vector<std::string> out;
  std::string line;
  bool crop = false;
  while (r.next(&line, &crop)) {
    out.push_back(line);
    if (cropped) cropped->push_back(crop);
  }
  return out;
}

TEST(LineReaderTest, SplitsLinesAcrossBufferBoundaries) {
  const auto dir = temp_dir("lr_lines");
  std::string text;
  std::vector<std::string> expect;
  for (int i = 0; i < 5000; ++i) {
    expect.push_back(std::string(i % 97, 'a' + i % 26));
    text += expect.back() + "\n";
  }
  text += "last line without newline";
  expect.push_back("last line without newline");
  write_bytes(dir + "/t.txt", text);
  EXPECT_EQ(read_all_lines(dir + "/t.txt", 1000), expect);
  write_bytes(dir + "/empty.txt", "");
  EXPECT_TRUE(read_all_lines(dir + "/empty.txt", 10).empty());
  write_bytes(dir + "/blank.txt", "\n\n");
  EXPECT_EQ(read_all_lines(dir + "/blank.txt", 10), (std::vector<std::string>{"", ""}));
}

TEST(LineReaderTest, LongLinesAreCutAtACharacterBoundaryAndTheRestDropped) {
  const auto dir = temp_dir("lr_crop");
  // "é" is 2 bytes: a cap of 6 falls inside the third one.
  const std::string long_line = "ab\xC3\xA9\xC3\xA9\xC3\xA9" + std::string(300000, 'z');
  write_bytes(dir + "/t.txt", "short\n" + long_line + "\nafter\n");
  std::vector<bool> cropped;
  const auto lines = read_all_lines(dir + "/t.txt", 7, &cropped);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "short");
  EXPECT_EQ(lines[1], "ab\xC3\xA9\xC3\xA9");  // 6 bytes, not half an é
  EXPECT_EQ(lines[2], "after");
  EXPECT_EQ(cropped, (std::vector<bool>{false, true, false}));
}

TEST(LineReaderTest, NulBytesAreLocatedErrorsEvenInTheDroppedPart) {
  const auto dir = temp_dir("lr_nul");
  write_bytes(dir + "/t.txt", "fine\n" + std::string(100, 'x') + std::string("\0y\n", 3));
  const auto msg = error_of([&] { read_all_lines(dir + "/t.txt", 10); });
  EXPECT_TRUE(contains(msg, dir + "/t.txt:2:") && contains(msg, "NUL byte at byte 101")) << msg;
}

TEST(LineReaderTest, Utf16IsNamed) {
  const auto dir = temp_dir("lr_utf16");
  write_bytes(dir + "/le.txt", std::string("\xFF\xFEh\0i\0\n\0", 8));
  auto msg = error_of([&] { read_all_lines(dir + "/le.txt", 100); });
  EXPECT_TRUE(contains(msg, "UTF-16") && contains(msg, "iconv -f UTF-16 -t UTF-8")) << msg;
  write_bytes(dir + "/be.txt", std::string("\0h\0e\0l\0l\0o", 10));  // no byte-order mark
  msg = error_of([&] { read_all_lines(dir + "/be.txt", 100); });
  EXPECT_TRUE(contains(msg, "UTF-16")) << msg;
}

TEST(LineReaderTest, EndlessNulInputFailsAtOnce) {
  const auto msg = error_of([&] { read_all_lines("/dev/zero", 1 << 16); });
  EXPECT_TRUE(contains(msg, "/dev/zero:1:") && contains(msg, "NUL byte at byte 1")) << msg;
}

TEST(LineReaderTest, ReadsAFifo) {
  const auto dir = temp_dir("lr_fifo");
  const auto path = dir + "/in";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&] { write_bytes(path, "one\ntwo\n"); });
  EXPECT_EQ(read_all_lines(path, 100), (std::vector<std::string>{"one", "two"}));
  writer.join();
}

TEST(ReadFileBoundedTest, RefusesPastTheCapWithoutReadingOn) {
  const auto dir = temp_dir("rfb");
  write_bytes(dir + "/f", "12345");
  EXPECT_EQ(nmt::read_file_bounded(dir + "/f", 5, "thing"), "12345");
  auto msg = error_of([&] { nmt::read_file_bounded(dir + "/f", 4, "thing"); });
  EXPECT_TRUE(contains(msg, dir + "/f") && contains(msg, "larger than 4 bytes")) << msg;
  msg = error_of([&] { nmt::read_file_bounded("/dev/zero", 1 << 20, "SentencePiece model"); });
  EXPECT_TRUE(contains(msg, "/dev/zero") && contains(msg, "SentencePiece model")) << msg;
  msg = error_of([&] { nmt::read_file_bounded(dir, 10, "thing"); });
  EXPECT_TRUE(contains(msg, "folder")) << msg;
}

// --- RunLock ----------------------------------------------------------------------

TEST(RunLockTest, OneHolderAtATimeAndTheLockGoesWithItsProcess) {
  const auto dir = temp_dir("lock");
  {
    nmt::RunLock held(dir);
    const auto msg = error_of([&] { nmt::RunLock second(dir); });
    EXPECT_TRUE(contains(msg, dir + " is in use by process " + std::to_string(::getpid()))) << msg;
  }
  EXPECT_NO_THROW(nmt::RunLock again(dir));
  // A process that dies holding the lock (SIGKILL) releases it.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    nmt::RunLock mine(dir);
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  const auto msg = error_of([&] { nmt::RunLock busy(dir); });
  EXPECT_TRUE(contains(msg, "in use by process " + std::to_string(child))) << msg;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_NO_THROW(nmt::RunLock after(dir));
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
