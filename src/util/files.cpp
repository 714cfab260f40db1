#include "util/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <openssl/evp.h>

namespace fs = std::filesystem;

namespace gm {

static std::string temp_name_for(const std::string& path) {
  std::random_device rd;
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd() % 1000000) + ".partial";
}

Status check_writable_dir(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::errorf(Status::Code::kIo, "cannot write {}: directory {} does not exist", path, dir.string());
  if (::access(dir.c_str(), W_OK) != 0) return Status::errorf(Status::Code::kIo, "cannot write {}: {}", path, std::strerror(errno));
  return Status::ok();
}

// Temp files of `path` left by writers that were killed (SIGKILL, power loss): their pid is
// gone. Removed before the next write of `path`, so interrupted runs leave no litter behind.
static void remove_stale_temps(const std::string& path) {
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp-";
  std::error_code ec;
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(n.c_str() + prefix.size(), nullptr, 10);
    if (pid == long(::getpid())) continue;
    if (pid <= 0 || (::kill(pid_t(pid), 0) != 0 && errno == ESRCH)) fs::remove(it->path(), ec);
  }
}

Status write_atomic(const std::string& path, const std::function<Status(const std::string&)>& write) {
  GAMMA_RETURN_IF_ERROR(check_writable_dir(path));
  remove_stale_temps(path);
  const std::string tmp = temp_name_for(path);
  Status st;
  try {
    st = write(tmp);
  } catch (...) {  // e.g. std::bad_alloc: the caller reports it, the temp goes now
    std::remove(tmp.c_str());
    throw;
  }
  if (!st.is_ok()) {  // name the file the user asked for, not its temp
    std::string m = st.message();
    for (size_t at; (at = m.find(tmp)) != std::string::npos;) m.replace(at, tmp.size(), path);
    st = Status::error(m, st.code());
  }
  if (st.is_ok()) {
    // fsync so a crash after rename cannot leave an empty file under the final name.
    int fd = ::open(tmp.c_str(), O_RDONLY);
    if (fd < 0 || ::fsync(fd) != 0) st = Status::errorf(Status::Code::kIo, "cannot write {}: {}", path, std::strerror(errno));
    if (fd >= 0) ::close(fd);
  }
  if (st.is_ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = Status::errorf(Status::Code::kIo, "cannot write {}: {}", path, std::strerror(errno));
  if (!st.is_ok()) std::remove(tmp.c_str());
  return st;
}

Status write_file_atomic(const std::string& path, const std::string& contents) {
  return write_atomic(path, [&](const std::string& tmp) -> Status {
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return Status::errorf(Status::Code::kIo, "cannot write {}: {}", path, std::strerror(errno));
    size_t n = std::fwrite(contents.data(), 1, contents.size(), f);
    bool ok = n == contents.size() && std::fflush(f) == 0;
    int err = errno;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) return Status::errorf(Status::Code::kIo, "cannot write {}: {}", path, std::strerror(err ? err : EIO));
    return Status::ok();
  });
}

Status write_file_atomic_nosync(const std::string& path, const std::string& contents) {
  return write_file_atomic_nosync(path, contents.data(), contents.size());
}

Status write_file_atomic_nosync(const std::string& path, const void* data, size_t n) {
  remove_stale_temps(path);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::errorf(Status::Code::kIo, "cannot write {}: {}", tmp, std::strerror(errno));
  const bool ok = std::fwrite(data, 1, n, f) == n;
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::errorf(Status::Code::kIo, "cannot write {}: {}", path, std::strerror(errno));
  }
  return Status::ok();
}

Status read_file_exact(const std::string& path, void* dst, uint64_t n) {
  GAMMA_ASSIGN_OR_RETURN(uint64_t size, file_size(path));
  if (size != n) return Status::errorf(Status::Code::kCorrupt, "{} holds {} bytes, not {}", path, size, n);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::errorf(Status::Code::kIo, "cannot read {}: {}", path, std::strerror(errno));
  const bool ok = std::fread(dst, 1, n, f) == n;
  std::fclose(f);
  return ok ? Status::ok() : Status::errorf(Status::Code::kIo, "cannot read {}", path);
}

Result<std::string> read_file(const std::string& path) {
  std::error_code dec;
  if (fs::is_directory(path, dec)) return Status::errorf(Status::Code::kIo, "cannot read {}: it is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf(errno == ENOENT ? Status::Code::kNotFound : Status::Code::kIo, "cannot read {}: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::errorf(Status::Code::kIo, "cannot read {}", path);
  return ss.str();
}

Status check_text_file(const std::string& path, const char* what) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Status::errorf(Status::Code::kIo, "{} {} is a directory", what, path);
  GAMMA_ASSIGN_OR_RETURN(uint64_t n, file_size(path));
  if (n == 0) return Status::errorf(Status::Code::kInvalidArgument, "{} {} is empty", what, path);
  if (n > kMaxTextBytes)
    return Status::errorf(Status::Code::kInvalidArgument,
                          "{} {} is {:.1f} GiB; gamma reads texts up to 1 GiB (take a prefix: head -c 100M)", what, path,
                          double(n) / double(uint64_t(1) << 30));
  return Status::ok();
}

Result<std::string> read_text_file(const std::string& path, const char* what) {
  GAMMA_RETURN_IF_ERROR(check_text_file(path, what));
  return read_file(path);
}

namespace {
// An flock of `how` on `path` (created if missing): its descriptor, or -1 when LOCK_NB was asked
// and another process holds it.
Result<int> lock_fd(const std::string& path, int how) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::errorf(Status::Code::kIo, "cannot lock {}: {}", path, std::strerror(errno));
  int rc;
  do rc = ::flock(fd, how); while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK && (how & LOCK_NB)) return -1;
    return Status::errorf(Status::Code::kIo, "cannot lock {}: {}", path, std::strerror(err));
  }
  return fd;
}
}  // namespace

Result<FileLock> FileLock::acquire(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(int fd, lock_fd(path, LOCK_EX));
  return FileLock(fd);
}

Result<FileLock> FileLock::acquire_shared(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(int fd, lock_fd(path, LOCK_SH));
  return FileLock(fd);
}

Result<std::optional<FileLock>> FileLock::try_acquire(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(int fd, lock_fd(path, LOCK_EX | LOCK_NB));
  if (fd < 0) return std::optional<FileLock>();
  return std::optional<FileLock>(FileLock(fd));
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

Result<OutputLock> OutputLock::take(const std::string& out, const std::string& who) {
  const std::string path = out + ".lock";
  GAMMA_ASSIGN_OR_RETURN(std::optional<FileLock> l, FileLock::try_acquire(path));
  if (!l) return Status::errorf("another {} is writing {}", who, out);
  return OutputLock(std::move(*l), path);
}

OutputLock::~OutputLock() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);  // before the flock is released (lock_ is destroyed after this)
}

static std::string to_hex(const unsigned char* d, unsigned n) {
  static const char* hex = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (unsigned i = 0; i < n; ++i) { s[2 * i] = hex[d[i] >> 4]; s[2 * i + 1] = hex[d[i] & 15]; }
  return s;
}

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
  return to_hex(md, len);
}

Result<std::string> sha256_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::errorf(errno == ENOENT ? Status::Code::kNotFound : Status::Code::kIo, "cannot read {}: {}", path, std::strerror(errno));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<unsigned char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) EVP_DigestUpdate(ctx, buf.data(), n);
  bool err = std::ferror(f);
  std::fclose(f);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  if (err) return Status::errorf(Status::Code::kIo, "cannot read {}", path);
  return to_hex(md, len);
}

Result<std::string> sha256_file_cached(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::errorf(errno == ENOENT ? Status::Code::kNotFound : Status::Code::kIo, "cannot read {}: {}", path, std::strerror(errno));
  std::error_code ec;
  const std::string abs = fs::absolute(path, ec).lexically_normal().string();
  const std::string key = fmt::format("{}\n{}\n{}\n{}\n{}.{:09d}", abs, (unsigned long long)st.st_dev,
                                      (unsigned long long)st.st_ino, (long long)st.st_size,
                                      (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
  const std::string entry = cache_dir() + "/hashes/" + sha256_hex(key.data(), key.size());
  if (auto cached = read_file(entry); cached.is_ok() && cached.value().size() == 64) return cached.value();
  GAMMA_ASSIGN_OR_RETURN(std::string sha, sha256_file(path));
  // A file modified in the last seconds may be rewritten within one mtime tick ("racy git"):
  // remember only settled files.
  if (std::time(nullptr) - st.st_mtim.tv_sec < 3) return sha;
  fs::create_directories(cache_dir() + "/hashes", ec);
  (void)write_file_atomic(entry, sha);  // a cache that cannot be written only costs time
  return sha;
}

std::string exe_dir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "" : p.parent_path().string();
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::exists(path, ec);
}

Result<uint64_t> file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::errorf(errno == ENOENT ? Status::Code::kNotFound : Status::Code::kIo, "cannot read {}: {}", path, std::strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fe;  // a file removed meanwhile (another process's temp) counts nothing
    if (it->is_regular_file(fe)) {
      const uintmax_t n = it->file_size(fe);
      if (!fe) bytes += n;
    }
  }
  return bytes;
}

std::string cache_dir() {
  std::string dir;
  if (const char* g = std::getenv("GAMMA_CACHE"); g && *g) dir = g;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/gamma";
  else dir = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") + "/.cache/gamma";
  std::error_code ec;
  fs::create_directories(dir, ec);
  return dir;
}

}  // namespace gm
