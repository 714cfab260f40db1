// Files: atomic writes (temp + fsync + rename), whole-file reads, hashing, the cache dir.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "util/status.h"

namespace gm {

// Writes `path` by calling `write(tmp_path)` and renaming the temp file over `path` only if
// it succeeded, so a reader never sees a partial file. The temp file lives in the same
// directory (rename is atomic there) and is removed on any failure.
Status write_atomic(const std::string& path,
                    const std::function<Status(const std::string& tmp_path)>& write);
// Convenience: atomically write a string (e.g. JSON) to `path`.
Status write_file_atomic(const std::string& path, const std::string& contents);

// Temp + rename without fsync, for state rewritten often (cache progress, Stage I
// checkpoints): a killed process never leaves a partial file, and it costs nothing (fsync
// took seconds per call on a busy disk here). After a power loss the file may be missing or
// empty; readers then ignore it and start over.
Status write_file_atomic_nosync(const std::string& path, const std::string& contents);
Status write_file_atomic_nosync(const std::string& path, const void* data, size_t n);

Result<std::string> read_file(const std::string& path);
// Reads a file of exactly `n` bytes straight into `dst` (a cache entry whose size is known): a
// missing file is kNotFound, one of another size kCorrupt (a torn or foreign entry), nothing copied twice.
Status read_file_exact(const std::string& path, void* dst, uint64_t n);

// A text gamma tokenizes (calibration, evaluation): read whole, refused in one line when it is
// empty or larger than kMaxTextBytes (a 10 GB text would otherwise be read into memory and
// tokenized for the few hundred thousand tokens any stage uses). `what` names it in errors.
constexpr uint64_t kMaxTextBytes = uint64_t(1) << 30;
Result<std::string> read_text_file(const std::string& path, const char* what);
Status check_text_file(const std::string& path, const char* what);  // the same checks, nothing read

// An exclusive advisory lock (flock) on `path`, created if missing, held until destruction;
// the kernel drops it when the process dies, so a killed holder never blocks the next run.
// Guards the builders of shared cache entries (activation cache, model fetch) against a
// second gamma process building the same entry at the same time.
class FileLock {
 public:
  static Result<FileLock> acquire(const std::string& path);
  // Shared (LOCK_SH): many holders at once, none while an exclusive one is held. A reader of a
  // cache entry holds it while it opens the entry, so the entry is not removed meanwhile.
  static Result<FileLock> acquire_shared(const std::string& path);
  // Without waiting: an empty optional when another process holds it.
  static Result<std::optional<FileLock>> try_acquire(const std::string& path);
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// The lock of a long job's output (OUT.lock, taken without waiting): a second job writing the
// same output is refused with "another WHO is writing OUT". The lock file goes when this
// object does, however the job ends.
class OutputLock {
 public:
  static Result<OutputLock> take(const std::string& out, const std::string& who);
  OutputLock(OutputLock&& o) noexcept : lock_(std::move(o.lock_)), path_(std::move(o.path_)) { o.path_.clear(); }
  OutputLock& operator=(OutputLock&&) = delete;
  ~OutputLock();

 private:
  OutputLock(FileLock l, std::string path) : lock_(std::move(l)), path_(std::move(path)) {}
  FileLock lock_;
  std::string path_;
};

// Hex SHA-256 of a whole file (OpenSSL), streamed.
Result<std::string> sha256_file(const std::string& path);
std::string sha256_hex(const void* data, size_t n);
// sha256_file, remembered under cache_dir()/hashes keyed by the file's absolute path, device,
// inode, size and mtime (nanoseconds), as git's index and ccache trust them: a sweep that
// evaluates dozens of models against one 7 GB teacher hashes it once, not per run. Any change
// to the file changes the key. Downloads are still verified with sha256_file.
Result<std::string> sha256_file_cached(const std::string& path);

Result<uint64_t> file_size(const std::string& path);
// The bytes of every regular file under `dir`, recursively (0 for a missing directory).
uint64_t dir_bytes(const std::string& dir);
// Whether `path` names an existing file or directory (false for "" and on any error).
bool file_exists(const std::string& path);

// $GAMMA_CACHE, else $XDG_CACHE_HOME/gamma, else ~/.cache/gamma (created on demand).
std::string cache_dir();

// The directory of the running executable ("" if unknown).
std::string exe_dir();

// Fails with a clear message when the directory of `path` cannot take a new file.
Status check_writable_dir(const std::string& path);

}  // namespace gm
