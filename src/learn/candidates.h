// The pool's candidates, dequantized on demand: each cand-<TYPE>.gguf (or import-*.gguf) is
// opened once (header only), and a module's candidate is read with pread and turned into
// F32 with ggml's to_float, rows split over threads. A streamed pool's candidate is made from
// the source instead (pool/candidate.h: the bytes the stored pool would hold) and its bytes are
// kept in POOL/stream/ (made_bytes_path), for the reader's later passes over the same layers and
// for the readers after it (gamma layers, every emit), which then quantize nothing Stage I made;
// where that cannot be written, in memory up to stream_keep_bytes(), and past that a candidate is
// made again each time it is asked for. A stored pool's candidates are not kept: the page cache
// does that.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pool/manifest.h"
#include "util/status.h"

struct gguf_context;

namespace gm {

class Model;
struct Imatrix;

class CandidateStore {
 public:
  // Opens every file the manifest names and checks that each candidate's tensor is there
  // with the module's shape and the candidate's type and byte count; a streamed pool's source
  // model and imatrix, checked against the manifest's fingerprint and hash.
  static Result<std::unique_ptr<CandidateStore>> open(const Manifest& m);
  ~CandidateStore();
  // Dequantizes candidate `cand` of `module` into dst (n_params floats, row-major as stored:
  // shape[1] rows of shape[0]).
  Status dequantize(const ModuleEntry& module, const Candidate& cand, float* dst, int n_threads) const;

 private:
  struct File {
    std::string path;
    int fd = -1;
    gguf_context* ctx = nullptr;
    uint64_t data_offset = 0;
  };
  struct Loc {
    const File* file;  // null: a streamed candidate, made from source_
    uint64_t offset, nbytes;
    int type;
  };
  CandidateStore();
  Status make(const ModuleEntry& module, const Candidate& cand, const Loc& loc, float* dst, int n_threads) const;
  std::vector<std::unique_ptr<File>> files_;
  std::unique_ptr<Model> source_;    // a streamed pool's source
  std::unique_ptr<Imatrix> imatrix_;  // and its imatrix (null without one)
  Manifest made_;  // a streamed pool's directory, fingerprint and imatrix hash: where made bytes are kept
  mutable std::mutex mu_;  // guards what follows
  // The last streamed module's F32 weights (one module's worth of memory, kept between calls).
  mutable std::string ref_module_;
  mutable std::vector<float> ref_;
  // Streamed candidates' bytes that could not be kept on disk, the first made while they fit in
  // keep_bytes_.
  uint64_t keep_bytes_ = 0;
  mutable uint64_t kept_bytes_ = 0;
  mutable std::map<std::pair<std::string, std::string>, std::vector<uint8_t>> kept_;
  std::map<std::pair<std::string, std::string>, Loc> locs_;  // (module, candidate id)
};

}  // namespace gm
