#include "decoder/activations.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "util/data.h"
#include "ggml.h"
#include "gguf_model/model.h"
#include "decoder/llama_runner.h"
#include "util/files.h"
#include "util/json.h"
#include "util/progress.h"

namespace fs = std::filesystem;

namespace gm {
namespace {

constexpr const char* kSchema = "gamma.activations";
constexpr int kVersion = 1;

std::string boundary_file(const std::string& dir, int b) { return dir + "/h" + std::to_string(b) + ".bin"; }

Status pwrite_all(int fd, const void* data, size_t n, uint64_t off, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, off_t(off));
    if (w <= 0) return Status::errorf("cannot write {}: {}", path, std::strerror(errno));
    p += w; n -= size_t(w); off += uint64_t(w);
  }
  return Status::ok();
}

Status pread_all(int fd, void* data, size_t n, uint64_t off, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, off_t(off));
    if (r <= 0) return Status::errorf("cannot read {}: {}", path, r == 0 ? "unexpected end of file" : std::strerror(errno));
    p += r; n -= size_t(r); off += uint64_t(r);
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<std::string>> default_calibration_files() {
  GAMMA_ASSIGN_OR_RETURN(std::string f, default_calibration_file());
  return std::vector<std::string>{f};
}

std::string activation_cache_root(const CalibOptions& opt) {
  return opt.cache_root.empty() ? cache_dir() + "/activations" : opt.cache_root;
}

std::vector<std::string> activation_cache_keys(const std::string& root) {
  std::vector<std::string> keys;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(root, ec))
    if (d.is_directory(ec) && d.path().extension().empty()) keys.push_back(d.path().filename().string());
  std::sort(keys.begin(), keys.end());
  return keys;
}

Result<bool> drop_activation_cache(const std::string& root, const std::string& key) {
  const std::string dir = root + "/" + key;
  std::error_code ec;
  if (key.empty() || key.find('/') != std::string::npos || !fs::is_directory(dir, ec)) return false;
  // The builders' lock: an entry being built (or extended by boundaries) is left alone. The lock
  // file stays: a builder waiting on it holds that file, and a new one would let two build.
  GAMMA_ASSIGN_OR_RETURN(std::optional<FileLock> lock, FileLock::try_acquire(dir + ".lock"));
  if (!lock) return false;
  fs::remove_all(dir, ec);
  if (ec) return Status::errorf("cannot remove {}: {}", dir, ec.message());
  return true;
}

Result<std::vector<std::vector<int32_t>>> calibration_sequences(LlamaRunner& runner, const CalibOptions& opt) {
  std::vector<std::string> files = opt.text_files;
  if (files.empty()) {
    GAMMA_ASSIGN_OR_RETURN(files, default_calibration_files());
  }
  const int seq_len = opt.seq_len;
  const int n_seq = int(std::max<int64_t>(1, opt.calib_tokens / seq_len));
  const int32_t bos = runner.bos();
  std::vector<std::vector<int32_t>> seqs;
  for (size_t f = 0; f < files.size(); ++f) {
    // An equal share per file; sequences start at evenly spaced line starts through the file,
    // so a long book contributes more than its first chapter.
    const int share = n_seq / int(files.size()) + (int(f) < n_seq % int(files.size()) ? 1 : 0);
    if (share == 0) continue;
    GAMMA_ASSIGN_OR_RETURN(std::string text, read_text_file(files[f], "calibration file"));
    for (int i = 0; i < share; ++i) {
      size_t off = size_t(double(text.size()) * i / share);
      if (off > 0) {
        size_t nl = text.find('\n', off);
        off = nl == std::string::npos ? off : nl + 1;
      }
      std::vector<int32_t> toks;
      for (size_t len = size_t(seq_len) * 8;; len *= 2) {
        const bool all = off + len >= text.size();
        GAMMA_ASSIGN_OR_RETURN(toks, runner.tokenize(text.substr(off, all ? std::string::npos : len)));
        if (int(toks.size()) >= seq_len + 1 || all) break;
      }
      // +1: the cut may split a word at the end; drop the last token.
      if (int(toks.size()) < seq_len + 1)
        return Status::errorf("calibration file {} is too short for {} sequences of {} tokens", files[f], share,
                              seq_len);
      toks.resize(size_t(seq_len));
      if (bos >= 0) toks[0] = bos;  // as llama-perplexity: every sequence starts with BOS
      seqs.push_back(std::move(toks));
    }
  }
  return seqs;
}

ActivationCache::~ActivationCache() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

namespace {

// Beside an F16 entry's directory: its teacher's hidden states do not fit F16.
constexpr const char* kF16Overflow = ".f16-overflow";

CalibOptions f32_options(const CalibOptions& opt) {
  CalibOptions o = opt;
  o.f32 = true;
  return o;
}

// What determines the bytes of a cache entry (its key is this JSON's hash): the format, the
// teacher, the texts' contents, the sequences and the stored type.
Result<json> cache_settings(const Model& teacher, const std::vector<std::string>& files, int n_seq,
                            const CalibOptions& opt) {
  json k = json::object();
  k["format"] = kVersion;
  k["teacher"] = teacher.fingerprint();
  k["files"] = json::array();
  for (const auto& f : files) {
    GAMMA_RETURN_IF_ERROR(check_text_file(f, "calibration file"));  // before hashing 10 GB
    GAMMA_ASSIGN_OR_RETURN(std::string sha, sha256_file(f));
    k["files"].push_back(sha);
  }
  k["n_seq"] = n_seq;
  k["seq_len"] = opt.seq_len;
  k["dtype"] = opt.f32 ? "f32" : "f16";
  return k;
}

// Runs the teacher over the calibration sequences and writes the boundaries `todo` of entry
// `dir` (resumable in DIR.partial, sequence by sequence), then publishes them: a new entry by
// renaming the partial directory, boundaries added to an existing one file by file.
Status build_boundaries(const std::string& teacher_path, const CalibOptions& opt, const std::vector<std::string>& files,
                        const json& k, const std::string& key, const std::string& dir, const std::vector<int>& todo,
                        int L, int n_seq) {
  std::error_code ec;
  const std::string part = dir + ".partial";
  // A partial build of another set of boundaries cannot be resumed: start it over.
  std::string set;
  for (int b : todo) set += std::to_string(b) + " ";
  std::string all;  // a partial without the record (an older gamma's) built every boundary
  for (int b = 0; b <= L; ++b) all += std::to_string(b) + " ";
  auto prev = read_file(part + "/boundaries");
  if ((prev.is_ok() ? *prev : all) != set) fs::remove_all(part, ec);
  fs::create_directories(part, ec);
  if (ec) return Status::errorf("cannot create {}: {}", part, ec.message());
  GAMMA_RETURN_IF_ERROR(write_file_atomic_nosync(part + "/boundaries", set));

  GAMMA_ASSIGN_OR_RETURN(auto runner, LlamaRunner::open(teacher_path, opt.seq_len, opt.n_threads));
  GAMMA_ASSIGN_OR_RETURN(auto seqs, calibration_sequences(*runner, opt));
  const int n_layer = runner->n_layer();
  const int64_t n_embd = runner->n_embd();
  const size_t esize = opt.f32 ? 4 : 2;
  const uint64_t seq_bytes = uint64_t(opt.seq_len) * uint64_t(n_embd) * esize;

  // Resume: "done" holds the number of finished sequences of an earlier run with this key.
  int done = 0;
  if (auto d = read_file(part + "/done"); d.is_ok()) done = std::max(0, std::min(n_seq, std::atoi(d->c_str())));
  std::vector<int> fds;
  auto close_all = [&] { for (int fd : fds) ::close(fd); fds.clear(); };
  for (int b : todo) {
    const std::string p = boundary_file(part, b);
    int fd = ::open(p.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0) { close_all(); return Status::errorf("cannot write {}: {}", p, std::strerror(errno)); }
    fds.push_back(fd);
    if (::ftruncate(fd, off_t(seq_bytes * uint64_t(n_seq))) != 0) {
      close_all();
      return Status::errorf("cannot size {}: {}", p, std::strerror(errno));
    }
  }
  std::unique_ptr<Progress> bar;
  if (!opt.quiet) bar = std::make_unique<Progress>("teacher activations", n_seq);
  LlamaRunner::Capture cap;
  std::vector<uint8_t> buf(seq_bytes);
  for (int s = done; s < n_seq; ++s) {
    Status st = runner->run(seqs[size_t(s)], &cap, /*want_hidden=*/true, /*want_logits=*/false);
    for (size_t i = 0; st.is_ok() && i < todo.size(); ++i) {
      const int b = todo[i];
      const auto& h = cap.hidden[size_t(b)];
      for (float v : h) {
        if (!std::isfinite(v)) {
          st = Status::errorf("teacher hidden state at layer boundary {} is {}", b, v);
          break;
        }
        if (!opt.f32 && std::fabs(v) > 65504.0f) {  // open_or_build starts over in F32
          st = Status::errorf("teacher hidden state at layer boundary {} is {} (outside F16 range)", b, v);
          if (Status m = write_file_atomic(dir + kF16Overflow, st.message()); !m.is_ok()) st = m;
          break;
        }
      }
      if (!st.is_ok()) break;
      if (opt.f32) std::memcpy(buf.data(), h.data(), seq_bytes);
      else ggml_fp32_to_fp16_row(h.data(), reinterpret_cast<ggml_fp16_t*>(buf.data()), int64_t(h.size()));
      st = pwrite_all(fds[i], buf.data(), seq_bytes, seq_bytes * uint64_t(s), boundary_file(part, b));
    }
    // "done" moves on only after the sequence's data is written (to the page cache: a
    // killed process loses nothing; fsync here cost seconds per sequence on a busy disk).
    if (st.is_ok()) st = write_file_atomic_nosync(part + "/done", std::to_string(s + 1));
    if (!st.is_ok()) { close_all(); return st; }
    if (bar) bar->update(s + 1);
    if (opt.on_sequence) opt.on_sequence(s + 1);
  }
  close_all();
  if (bar) bar->finish();

  if (!fs::exists(dir + "/meta.json")) {
    std::string tok_bytes(size_t(n_seq) * size_t(opt.seq_len) * sizeof(int32_t), '\0');
    for (int s = 0; s < n_seq; ++s)
      std::memcpy(&tok_bytes[size_t(s) * size_t(opt.seq_len) * 4], seqs[size_t(s)].data(), size_t(opt.seq_len) * 4);
    GAMMA_RETURN_IF_ERROR(write_file_atomic(part + "/tokens.bin", tok_bytes));
    json meta = json_header(kSchema, kVersion);
    meta["key"] = key;
    meta["settings"] = k;
    meta["teacher_path"] = fs::absolute(teacher_path).string();
    meta["text_files"] = files;
    meta["n_layer"] = n_layer;
    meta["n_embd"] = n_embd;
    GAMMA_RETURN_IF_ERROR(write_json(part + "/meta.json", meta));
    fs::remove(part + "/done", ec);
    fs::remove(part + "/boundaries", ec);
    fs::remove_all(dir, ec);  // a stale directory without meta.json
    fs::rename(part, dir, ec);
    if (ec) return Status::errorf("cannot publish {}: {}", dir, ec.message());
  } else {
    // The entry exists: add the new boundaries to it, each file by an atomic rename.
    for (int b : todo) {
      fs::rename(boundary_file(part, b), boundary_file(dir, b), ec);
      if (ec) return Status::errorf("cannot publish {}: {}", boundary_file(dir, b), ec.message());
    }
    fs::remove_all(part, ec);
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<ActivationCache>> ActivationCache::open_or_build(const std::string& teacher_path,
                                                                         const CalibOptions& opt) {
  if (opt.seq_len < 2) return Status::errorf("--seq-len must be at least 2 (got {})", opt.seq_len);
  if (opt.calib_tokens < 1) return Status::errorf("--calib-tokens must be positive (got {})", opt.calib_tokens);
  GAMMA_ASSIGN_OR_RETURN(auto teacher, Model::open(teacher_path));
  std::vector<std::string> files = opt.text_files;
  if (files.empty()) {
    GAMMA_ASSIGN_OR_RETURN(files, default_calibration_files());
  }
  const int n_seq = int(std::max<int64_t>(1, opt.calib_tokens / opt.seq_len));

  // The key: what determines the bytes of the cache.
  json k;
  GAMMA_ASSIGN_OR_RETURN(k, cache_settings(*teacher, files, n_seq, opt));
  const std::string kstr = k.dump();
  const std::string key = sha256_hex(kstr.data(), kstr.size()).substr(0, 24);
  const std::string root = activation_cache_root(opt);
  const std::string dir = root + "/" + key;

  // A teacher whose hidden states overflow F16 (Gemma's residual stream: 68,398 at boundary 8
  // of Gemma-3-270M) is cached in F32; the marker, left by the first build that found it,
  // saves later runs the forward pass that finds it again.
  if (!opt.f32 && fs::exists(dir + kF16Overflow)) return open_or_build(teacher_path, f32_options(opt));

  const int L = teacher->n_layer();
  const int first = opt.first_boundary, last = opt.last_boundary < 0 ? L : opt.last_boundary;
  if (first < 0 || first > last || last > L)
    return Status::errorf("activation boundaries {}..{} are outside the teacher's 0..{}", first, last, L);
  // The boundaries of the range this entry lacks (all of them when it has no meta.json yet).
  auto missing = [&] {
    std::vector<int> m;
    const bool meta = fs::exists(dir + "/meta.json");
    for (int b = first; b <= last; ++b)
      if (!meta || !fs::exists(boundary_file(dir, b))) m.push_back(b);
    return m;
  };

  std::error_code ec;
  // Held while this process builds the entry (exclusive), or opens it (shared: a finished job
  // drops the entries it made, drop_activation_cache, and must not do so under a reader).
  std::optional<FileLock> lock;
  bool unlocked = false;  // a cache this process cannot write to is read without the lock
  if (missing().empty()) {
    if (auto l = FileLock::acquire_shared(dir + ".lock"); l.is_ok()) lock.emplace(std::move(*l));
    else unlocked = true;
  }
  if (!unlocked && (!lock || !missing().empty())) {  // (dropped between the two looks: built again)
    lock.reset();
    fs::create_directories(root, ec);
    if (ec) return Status::errorf("cannot create {}: {}", root, ec.message());
    // Another gamma may be building the same entry: wait for it, then use what it published.
    GAMMA_ASSIGN_OR_RETURN(FileLock l, FileLock::acquire(dir + ".lock"));
    lock.emplace(std::move(l));
  }
  if (const std::vector<int> todo = missing(); !todo.empty()) {
    Status st = build_boundaries(teacher_path, opt, files, k, key, dir, todo, L, n_seq);
    if (!st.is_ok() && !opt.f32 && fs::exists(dir + kF16Overflow)) {
      lock.reset();
      fs::remove_all(dir + ".partial", ec);
      return open_or_build(teacher_path, f32_options(opt));
    }
    GAMMA_RETURN_IF_ERROR(st);
  }

  GAMMA_ASSIGN_OR_RETURN(json meta, read_json(dir + "/meta.json", kSchema, kVersion));
  std::unique_ptr<ActivationCache> c(new ActivationCache());
  c->dir_ = dir;
  c->key_ = key;
  try {
    c->n_seq_ = meta.at("settings").at("n_seq").get<int>();
    c->seq_len_ = meta.at("settings").at("seq_len").get<int>();
    c->f32_ = meta.at("settings").at("dtype").get<std::string>() == "f32";
    c->n_layer_ = meta.at("n_layer").get<int>();
    c->n_embd_ = meta.at("n_embd").get<int64_t>();
  } catch (const json::exception& e) {
    return Status::errorf("{}/meta.json: {}", dir, e.what());
  }
  const uint64_t seq_bytes = uint64_t(c->seq_len_) * uint64_t(c->n_embd_) * (c->f32_ ? 4 : 2);
  GAMMA_ASSIGN_OR_RETURN(std::string tb, read_file(dir + "/tokens.bin"));
  if (tb.size() != size_t(c->n_seq_) * size_t(c->seq_len_) * 4) return Status::errorf("{}/tokens.bin has the wrong size", dir);
  c->tokens_.resize(tb.size() / 4);
  std::memcpy(c->tokens_.data(), tb.data(), tb.size());
  if (c->n_layer_ != L) return Status::errorf("{}/meta.json has {} layers, the teacher {}", dir, c->n_layer_, L);
  c->first_ = first;
  for (int b = first; b <= last; ++b) {
    const std::string p = boundary_file(dir, b);
    auto sz = file_size(p);
    if (!sz.is_ok() || *sz != seq_bytes * uint64_t(c->n_seq_))
      return Status::errorf("activation cache {} is damaged ({}); delete the directory to rebuild it", dir, p);
    int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) return Status::errorf("cannot read {}: {}", p, std::strerror(errno));
    c->fds_.push_back(fd);
  }
  return c;
}

Status ActivationCache::read(int b, const std::vector<int>& seqs, float* dst) const {
  if (b < first_ || b >= first_ + int(fds_.size()))
    return Status::errorf("layer boundary {} is not in this activation cache's part ({}..{})", b, first_,
                          first_ + int(fds_.size()) - 1);
  const size_t n = size_t(seq_len_) * size_t(n_embd_);
  std::vector<ggml_fp16_t> tmp(f32_ ? 0 : n);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const uint64_t off = uint64_t(seqs[i]) * n * (f32_ ? 4 : 2);
    float* out = dst + i * n;
    if (seqs[i] < 0 || seqs[i] >= n_seq_) return Status::errorf("no sequence {} in the activation cache", seqs[i]);
    GAMMA_RETURN_IF_ERROR(f32_ ? pread_all(fds_[size_t(b - first_)], out, n * 4, off, dir_)
                               : pread_all(fds_[size_t(b - first_)], tmp.data(), n * 2, off, dir_));
    if (!f32_) ggml_fp16_to_fp32_row(tmp.data(), out, int64_t(n));
  }
  return Status::ok();
}

}  // namespace gm
