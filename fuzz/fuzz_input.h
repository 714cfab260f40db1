// What every fuzz target shares: the input bytes as a file (gamma's readers take paths, as
// users hand them files), one per process under /dev/shm, rewritten for each input.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace gm::fuzz {

// A directory of this process's own (removed at exit); `name` inside it holds the input.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  static const std::string dir = [] {
    const std::string d = "/dev/shm/gamma-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all("/dev/shm/gamma-fuzz-" + std::to_string(::getpid()), ec);
    });
    return d;
  }();
  const std::string path = dir + "/" + name;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace gm::fuzz
