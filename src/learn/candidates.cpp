#include "learn/candidates.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ggml.h"
#include "gguf.h"
#include "gguf_model/model.h"
#include "pool/candidate.h"
#include "pool/imatrix.h"
#include "util/parallel.h"

namespace gm {

CandidateStore::CandidateStore() = default;

CandidateStore::~CandidateStore() {
  for (auto& f : files_) {
    if (f->ctx) gguf_free(f->ctx);
    if (f->fd >= 0) ::close(f->fd);
  }
}

Result<std::unique_ptr<CandidateStore>> CandidateStore::open(const Manifest& m) {
  GAMMA_RETURN_IF_ERROR(m.needs_candidates());
  std::unique_ptr<CandidateStore> s(new CandidateStore());
  if (m.streamed) {
    GAMMA_ASSIGN_OR_RETURN(s->source_, Model::open(m.model_path));
    if (!m.imatrix_path.empty()) {
      GAMMA_ASSIGN_OR_RETURN(Imatrix im, load_imatrix(m.imatrix_path));
      s->imatrix_ = std::make_unique<Imatrix>(std::move(im));
    }
    GAMMA_RETURN_IF_ERROR(m.check_source(s->source_->fingerprint(), s->imatrix_ ? s->imatrix_->sha256 : ""));
    s->keep_bytes_ = stream_keep_bytes();
    s->made_.dir = m.dir;
    s->made_.model_fingerprint = m.model_fingerprint;
    s->made_.imatrix_sha256 = m.imatrix_sha256;
  }
  std::map<std::string, const File*> by_name;
  for (const auto& e : m.modules) {
    // Matrices, and a MoE layer's experts stacked in a 3-D tensor (rows of each expert in turn).
    if (e.shape.size() != 2 && e.shape.size() != 3)
      return Status::errorf("pool module {} is not a matrix or a stack of matrices", e.name);
    for (const auto& c : e.candidates) {
      if (m.streamed && c.file.empty()) {
        const int64_t k = s->source_->find(e.name);
        auto type = parse_type(c.type);
        if (k < 0 || !type.is_ok())
          return Status::errorf("streamed pool {}: the source has no {} at {}", m.dir, e.name, c.type);
        if (s->source_->tensors()[size_t(k)].shape != e.shape)
          return Status::errorf("streamed pool {}: {} in the source is not the manifest's shape", m.dir, e.name);
        s->locs_[{e.name, c.id}] = Loc{nullptr, 0, c.bytes, int(*type)};
        continue;
      }
      const File* f = nullptr;
      if (auto it = by_name.find(c.file); it != by_name.end()) {
        f = it->second;
      } else {
        auto nf = std::make_unique<File>();
        nf->path = m.dir + "/" + c.file;
        nf->fd = ::open(nf->path.c_str(), O_RDONLY);
        if (nf->fd < 0) return Status::errorf("pool candidate file {}: {}", nf->path, std::strerror(errno));
        gguf_init_params ip{/*no_alloc=*/true, nullptr};
        nf->ctx = gguf_init_from_file(nf->path.c_str(), ip);
        if (!nf->ctx) {
          ::close(nf->fd);
          return Status::errorf("pool candidate file {} is not a valid GGUF", nf->path);
        }
        nf->data_offset = gguf_get_data_offset(nf->ctx);
        f = nf.get();
        by_name[c.file] = f;
        s->files_.push_back(std::move(nf));
      }
      const int64_t id = gguf_find_tensor(f->ctx, e.name.c_str());
      if (id < 0) return Status::errorf("pool candidate file {} lacks tensor {}", f->path, e.name);
      const ggml_type type = gguf_get_tensor_type(f->ctx, id);
      const int64_t* ne = gguf_get_tensor_ne(f->ctx, id);
      bool same = true;
      for (size_t d = 0; d < 4; ++d) same &= ne[d] == (d < e.shape.size() ? e.shape[d] : 1);
      if (!same)
        return Status::errorf("{} in {} has shape {}x{}x{}, the manifest says {}", e.name, f->path, ne[0], ne[1], ne[2],
                              fmt::format("{}", fmt::join(e.shape, "x")));
      auto want = parse_type(c.type);
      if (!want.is_ok() || *want != type)
        return Status::errorf("{} in {} is {}, the manifest says {}", e.name, f->path, ggml_type_name(type), c.type);
      if (!ggml_get_type_traits(type)->to_float && type != GGML_TYPE_F32)
        return Status::errorf("{} in {}: type {} cannot be dequantized", e.name, f->path, ggml_type_name(type));
      const uint64_t nbytes = gguf_get_tensor_size(f->ctx, id);
      s->locs_[{e.name, c.id}] = Loc{f, f->data_offset + gguf_get_tensor_offset(f->ctx, id), nbytes, int(type)};
    }
  }
  return s;
}

Status CandidateStore::dequantize(const ModuleEntry& module, const Candidate& cand, float* dst, int n_threads) const {
  auto it = locs_.find({module.name, cand.id});
  if (it == locs_.end()) return Status::errorf("no candidate {} for module {}", cand.id, module.name);
  const Loc& loc = it->second;
  if (!loc.file) return make(module, cand, loc, dst, n_threads);
  const ggml_type type = ggml_type(loc.type);
  int64_t rows = 1;
  for (size_t d = 1; d < module.shape.size(); ++d) rows *= module.shape[d];
  const int64_t width = module.shape[0];
  const size_t row_bytes = ggml_row_size(type, width);
  // Threads only pay off on big tensors (a spawn costs tens of microseconds).
  if (rows * width < (int64_t(1) << 20)) n_threads = 1;
  n_threads = std::max(1, std::min<int>(n_threads, int(rows)));
  // Each worker reads and converts its own row range: reading is from the page cache, so
  // the copy parallelizes as well as the conversion.
  std::vector<Status> st(static_cast<size_t>(n_threads));
  auto work = [&](int t) {
    const int64_t r0 = rows * t / n_threads, r1 = rows * (t + 1) / n_threads;
    std::vector<uint8_t> buf(size_t(r1 - r0) * row_bytes);
    size_t left = buf.size();
    uint64_t off = loc.offset + uint64_t(r0) * row_bytes;
    uint8_t* p = buf.data();
    while (left > 0) {
      ssize_t r = ::pread(loc.file->fd, p, left, off_t(off));
      if (r <= 0) {
        st[size_t(t)] = Status::errorf("cannot read {} from {}: {}", module.name, loc.file->path,
                                       r == 0 ? "unexpected end of file" : std::strerror(errno));
        return;
      }
      p += r; left -= size_t(r); off += uint64_t(r);
    }
    float* out = dst + r0 * width;
    if (type == GGML_TYPE_F32) std::memcpy(out, buf.data(), buf.size());
    else ggml_get_type_traits(type)->to_float(buf.data(), out, (r1 - r0) * width);
  };
  parallel_for(n_threads, n_threads, 1, [&](int64_t t, int) { work(int(t)); });
  for (auto& s : st) GAMMA_RETURN_IF_ERROR(s);
  return Status::ok();
}

// A streamed candidate: made from the source as the pool makes it, then dequantized.
Status CandidateStore::make(const ModuleEntry& module, const Candidate& cand, const Loc& loc, float* dst,
                            int n_threads) const {
  const TensorInfo& t = source_->tensor(module.name);
  const ggml_type type = ggml_type(loc.type);
  const int64_t n = t.n_elements();
  auto to_float = [&](const std::vector<uint8_t>& q) {
    if (type == GGML_TYPE_F32) std::memcpy(dst, q.data(), q.size());
    else ggml_get_type_traits(type)->to_float(q.data(), dst, n);
  };
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_pair(module.name, cand.id);
  if (auto it = kept_.find(key); it != kept_.end()) {
    to_float(it->second);
    return Status::ok();
  }
  const std::vector<float>* iv = imatrix_ ? imatrix_->find(module.name) : nullptr;
  auto make_bytes = [&]() -> Result<std::vector<uint8_t>> {
    // Readers ask for a module's candidates one after another (Stage I's load_layer, HAWQ-V2), so
    // its F32 weights are read once for all of them, not once per type; the source's own type
    // needs none (its bytes are copied).
    if (type != t.type && ref_module_ != module.name) {
      ref_module_.clear();
      GAMMA_ASSIGN_OR_RETURN(ref_, source_->read_f32(t));
      ref_module_ = module.name;
    }
    return candidate_bytes(*source_, t, type, type != t.type ? &ref_ : nullptr, iv, n_threads);
  };
  std::vector<uint8_t> q;
  bool on_disk = false;
  if (type == t.type) {
    GAMMA_ASSIGN_OR_RETURN(q, make_bytes());
    on_disk = true;  // the source's own bytes: read again from it, never kept
  } else {
    GAMMA_RETURN_IF_ERROR(cached_bytes(made_bytes_path(made_, "stream", module.name, type), loc.nbytes, q, make_bytes, &on_disk));
  }
  if (q.size() != loc.nbytes)
    return Status::errorf("{} at {}: {} bytes made, the manifest says {}", module.name, ggml_type_name(type), q.size(),
                          loc.nbytes);
  to_float(q);
  if (!on_disk && kept_bytes_ + q.size() <= keep_bytes_) {
    kept_bytes_ += q.size();
    kept_.emplace(key, std::move(q));
  }
  return Status::ok();
}

}  // namespace gm
