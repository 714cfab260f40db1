// Files: atomic writes (temp + fsync + rename), whole-file reads, hashing, the cache dir.
#pragma once
#include <cstdint>
#include <functional>
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

Result<std::string> read_file(const std::string& path);

// Hex SHA-256 of a whole file (OpenSSL), streamed.
Result<std::string> sha256_file(const std::string& path);
std::string sha256_hex(const void* data, size_t n);

Result<uint64_t> file_size(const std::string& path);

// $GAMMA_CACHE, else $XDG_CACHE_HOME/gamma, else ~/.cache/gamma (created on demand).
std::string cache_dir();

// Fails with a clear message when the directory of `path` cannot take a new file.
Status check_writable_dir(const std::string& path);

}  // namespace gm
