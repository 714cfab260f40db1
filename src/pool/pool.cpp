#include "pool/pool.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <filesystem>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "gguf.h"
#include "gguf_model/model.h"
#include "gguf_model/writer.h"
#include "pool/candidate.h"
#include "pool/imatrix.h"
#include "pool/quantize.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/threads.h"

namespace fs = std::filesystem;

namespace gm {
namespace {

// Per-candidate figures of one candidate file, kept in its sidecar for resuming.
struct Stats {
  std::string fingerprint, imatrix_sha256;
  std::map<std::string, std::pair<uint64_t, double>> modules;  // name -> (bytes, rel_err)
  double seconds = 0;  // wall time of quantizing and measuring this part
};

json stats_json(const Stats& s) {
  json j = json_header("gamma.pool.part", 1);
  j["fingerprint"] = s.fingerprint;
  j["imatrix_sha256"] = s.imatrix_sha256;
  json m = json::object();
  for (const auto& [k, v] : s.modules) m[k] = {{"bytes", v.first}, {"rel_err", v.second}};
  j["modules"] = m;
  j["seconds"] = s.seconds;
  return j;
}

// A finished part from an earlier (interrupted) run, if it matches this model and imatrix.
bool load_stats(const std::string& path, const std::string& fingerprint, const std::string& im_sha, Stats& s) {
  auto r = read_json(path, "gamma.pool.part", 1);
  if (!r.is_ok()) return false;
  try {
    s.fingerprint = r->at("fingerprint").get<std::string>();
    s.imatrix_sha256 = r->at("imatrix_sha256").get<std::string>();
    if (s.fingerprint != fingerprint || s.imatrix_sha256 != im_sha) return false;
    for (const auto& [k, v] : r->at("modules").items())
      s.modules[k] = {v.at("bytes").get<uint64_t>(), v.at("rel_err").get<double>()};
    s.seconds = r->value("seconds", 0.0);
  } catch (const json::exception&) {
    return false;
  }
  return true;
}

struct Import {
  std::string path, label;
  std::unique_ptr<Model> model;
};

std::string sanitize_label(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  return s.empty() ? "import" : s;
}

}  // namespace

const std::vector<std::string>& default_candidate_types() {
  static const std::vector<std::string> kTypes = {
      // 256-wide blocks (Qwen's Pareto set; SmolLM2's ffn_down), then 32-wide blocks (IQ4_NL
      // only where no 256-wide type fits)
      "IQ2_XXS", "IQ2_XS", "IQ2_S", "Q2_K", "IQ3_XXS", "IQ3_S", "IQ4_XS", "Q4_K", "Q5_K", "Q6_K",
      "IQ4_NL", "Q4_1", "Q5_1", "Q8_0"};
  return kTypes;
}

const std::vector<std::string>& fast_decode_types() {
  static const std::vector<std::string> kTypes = {"Q3_K", "Q4_0"};
  return kTypes;
}

namespace {

// One `gamma pool` run, its steps in order: the types, the imatrix, the manifest skeleton,
// then (unless a preview) the output directory, one part file per type, the imports.
class PoolBuilder {
 public:
  explicit PoolBuilder(const PoolOptions& opt) : opt_(opt), nt_(resolve_threads(opt.n_threads)) {}
  Result<Manifest> run();

 private:
  Status resolve_types();
  Status load_checked_imatrix();
  void init_manifest();
  bool admits(ggml_type type, const std::string& name, const std::vector<int64_t>& shape) const;
  void add_predicted(ModuleEntry& e, ggml_type type) const;
  Manifest preview();
  Result<Manifest> estimate();
  Status prepare_dir();
  void add_candidates(const Stats& s, const std::string& file, const std::function<std::string(const std::string&)>& id_of,
                      const std::function<ggml_type(const std::string&)>& type_of);
  Status make_part(ggml_type type, const std::vector<const LinearModule*>& mods);
  Status add_import(const std::string& spec);

  const PoolOptions& opt_;
  const int nt_;
  std::unique_ptr<Model> model_;
  bool automatic_ = false;
  std::set<int64_t> widths_;
  std::vector<ggml_type> types_;
  Imatrix im_;
  std::unique_ptr<GgufWriter> probe_;  // the emitted file's header, measured once
  Manifest man_;
  std::map<std::string, size_t> module_index_;
  std::unique_ptr<Progress> bar_;
  int64_t done_ = 0;
};

// `auto` gives IQ4_NL only to rows that 256-wide blocks cannot hold: on Qwen's 256-wide rows
// IQ4_XS has its error in fewer bytes and Q4_K dominates it (results/iq_qwen/types.md); and
// `auto-speed` so gives Q4_0 (fast_decode_types says why).
bool auto_admits(bool automatic, ggml_type t, int64_t w) {
  const bool narrow_only = t == GGML_TYPE_IQ4_NL || t == GGML_TYPE_Q4_0;
  return type_admits(t, w) && !(automatic && narrow_only && w % 256 == 0);
}

// Every type must give candidates: one named by the user that cannot is refused (rather than
// a pool of F16 fallbacks); "auto" keeps those of its set that can.
Status PoolBuilder::resolve_types() {
  for (const auto& lm : model_->linear()) widths_.insert(model_->tensors()[lm.tensor].row_width());
  const bool speed = opt_.types.size() == 1 && opt_.types[0] == kAutoSpeedTypes;
  automatic_ = speed || (opt_.types.size() == 1 && opt_.types[0] == kAutoTypes);
  auto fits = [&](ggml_type t) {
    return std::any_of(widths_.begin(), widths_.end(), [&](int64_t w) { return auto_admits(automatic_, t, w); });
  };
  std::vector<std::string> asked = automatic_ ? default_candidate_types() : opt_.types;
  if (speed) asked.insert(asked.end(), fast_decode_types().begin(), fast_decode_types().end());
  for (const auto& t : asked) {
    GAMMA_ASSIGN_OR_RETURN(ggml_type gt, parse_type(t));
    const bool no_imatrix = type_needs_imatrix(gt) && opt_.imatrix_path.empty();
    if (automatic_ && (!fits(gt) || no_imatrix)) continue;
    if (!fits(gt)) {
      std::string w;
      for (int64_t x : widths_) w += (w.empty() ? "" : ", ") + std::to_string(x);
      return Status::errorf("{} fits no linear module of this model: its rows ({} wide) are not multiples of its {}-wide "
                            "blocks",
                            type_name(gt), w, ggml_blck_size(gt));
    }
    if (no_imatrix)
      return Status::errorf("{} needs an importance matrix (--imatrix FILE from llama-imatrix), as llama-quantize does",
                            type_name(gt));
    if (std::find(types_.begin(), types_.end(), gt) == types_.end()) types_.push_back(gt);
  }
  return Status::ok();
}

Status PoolBuilder::load_checked_imatrix() {
  if (opt_.imatrix_path.empty() || opt_.preview) return Status::ok();
  GAMMA_ASSIGN_OR_RETURN(im_, load_imatrix(opt_.imatrix_path));
  for (const auto& lm : model_->linear()) {
    const auto* v = im_.find(lm.name);
    const auto& t = model_->tensors()[lm.tensor];
    const bool per_expert = t.shape.size() == 3 && int64_t(v ? v->size() : 0) == t.row_width() * t.shape[2];
    if (v && int64_t(v->size()) != t.row_width() && !per_expert)
      return Status::errorf("{}: entry {} has {} values but the tensor rows have {} (imatrix of another model?)",
                            opt_.imatrix_path, lm.name, v->size(), t.row_width());
  }
  return Status::ok();
}

// The manifest without candidates: the model, its modules and its fixed tensors.
void PoolBuilder::init_manifest() {
  probe_ = model_writer(*model_, [](const TensorInfo& t) { return t.type; });  // the header does not depend on types
  man_.dir = opt_.out_dir;
  man_.model_path = fs::absolute(opt_.model_path).string();
  man_.model_fingerprint = model_->fingerprint();
  man_.arch = model_->arch();
  man_.n_layer = model_->n_layer();
  man_.imatrix_path = im_.path.empty() ? "" : fs::absolute(im_.path).string();
  man_.imatrix_sha256 = im_.sha256;
  man_.alignment = probe_->alignment();
  man_.header_bytes = probe_->meta_bytes();
  for (ggml_type t : types_) man_.types.push_back(type_name(t));
  for (const auto& lm : model_->linear()) {
    const auto& t = model_->tensors()[lm.tensor];
    ModuleEntry e;
    e.name = lm.name;
    e.layer = lm.layer;
    e.kind = lm.kind;
    e.shape = t.shape;
    e.n_params = t.n_elements();
    e.source_type = type_name(t.type);
    module_index_[e.name] = man_.modules.size();
    man_.modules.push_back(std::move(e));
  }
  for (size_t i = 0; i < model_->tensors().size(); ++i) {
    const auto& t = model_->tensors()[i];
    if (!module_index_.count(t.name)) man_.fixed.push_back({t.name, t.shape, type_name(t.type), model_->quantizable(i)});
  }
}

// A preview with --imatrix assumes the imatrix (not made yet) covers every module.
bool PoolBuilder::admits(ggml_type type, const std::string& name, const std::vector<int64_t>& shape) const {
  if (!auto_admits(automatic_, type, shape[0])) return false;
  if (auto it = opt_.only.find(name); it != opt_.only.end() &&
      std::find(it->second.begin(), it->second.end(), type_name(type)) == it->second.end())
    return false;
  return !type_needs_imatrix(type) || im_.find(name) != nullptr || (opt_.preview && !opt_.imatrix_path.empty());
}

void PoolBuilder::add_predicted(ModuleEntry& e, ggml_type type) const {
  Candidate c;
  c.id = c.type = type_name(type);
  c.bytes = uint64_t(ggml_row_size(type, e.shape[0])) * uint64_t(e.n_params / e.shape[0]);
  c.file_bytes = probe_->padded(c.bytes);
  c.bpw = 8.0 * double(c.bytes) / double(e.n_params);
  e.candidates.push_back(std::move(c));
}

// Sizes only: ggml's row sizes, no quantizing, nothing written.
Manifest PoolBuilder::preview() {
  for (auto& e : man_.modules) {
    for (ggml_type type : types_)
      if (admits(type, e.name, e.shape)) add_predicted(e, type);
    if (e.candidates.empty()) add_predicted(e, GGML_TYPE_F16);
    std::stable_sort(e.candidates.begin(), e.candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.bytes < b.bytes; });
  }
  return man_;
}

// Sizes as preview, errors from evenly spaced rows of each module.
Result<Manifest> PoolBuilder::estimate() {
  Manifest m = preview();
  for (auto& e : m.modules) {
    const auto& t = model_->tensor(e.name);
    const auto* iv = im_.find(e.name);
    const float* imat = iv ? iv->data() : nullptr;
    // Rows drawn at random, seeded by the module's name: the same rows every time and for
    // every type, so types compare on the same rows. Row norms are heavy-tailed, so the sampled
    // ratio runs a little high, alike for every type (SmolLM2: +4-5 % at 64 rows, +1 % at 256).
    // With an imatrix per expert, as many rows from each expert.
    const int64_t per_im = rows_per_imatrix(t, iv);
    const int64_t slices = per_im > 0 ? t.n_rows() / per_im : 1, slice_rows = t.n_rows() / slices;
    const int64_t m_per = std::min(slice_rows, std::max<int64_t>(1, (opt_.estimate_rows + slices - 1) / slices));
    std::mt19937_64 rng(std::hash<std::string>{}(e.name));
    std::vector<int64_t> rows;
    for (int64_t sl = 0; sl < slices; ++sl) {
      std::vector<int64_t> r(static_cast<size_t>(slice_rows));
      std::iota(r.begin(), r.end(), sl * slice_rows);
      for (int64_t k = 0; k < m_per; ++k) std::swap(r[size_t(k)], r[size_t(k + int64_t(rng() % uint64_t(slice_rows - k)))]);
      r.resize(size_t(m_per));
      std::sort(r.begin(), r.end());
      rows.insert(rows.end(), r.begin(), r.end());
    }
    const int64_t n = int64_t(rows.size());
    GAMMA_ASSIGN_OR_RETURN(std::vector<float> x, model_->read_rows_f32(t, rows));
    // ||W||^2 of the whole tensor, estimated from the rows: scales the unweighted error to sq_err.
    double x2 = 0;
    for (float v : x) x2 += double(v) * double(v);
    const double scale = x2 * double(t.n_rows()) / double(n);
    for (auto& c : e.candidates) {
      GAMMA_ASSIGN_OR_RETURN(ggml_type type, parse_type(c.type));
      c.sq_err = 0;
      if (type == t.type) continue;  // the source's own bytes: exact, as in the pool
      const auto q = quantize_rows(type, x.data(), n, t.row_width(), imat, nt_, per_im > 0 ? m_per : 0);
      c.rel_err = weighted_rel_error(type, q.data(), x.data(), n, t.row_width(), imat, nt_, per_im > 0 ? m_per : 0);
      c.sq_err = scale * weighted_rel_error(type, q.data(), x.data(), n, t.row_width(), nullptr, nt_);
    }
  }
  return m;
}

// Output directory: create, or resume into it if it holds this model's pool.
Status PoolBuilder::prepare_dir() {
  std::error_code ec;
  if (fs::exists(opt_.out_dir, ec) && !fs::is_directory(opt_.out_dir, ec))
    return Status::errorf("{} exists and is not a directory", opt_.out_dir);
  fs::create_directories(opt_.out_dir, ec);
  if (ec) return Status::errorf("cannot create {}: {}", opt_.out_dir, ec.message());
  if (fs::exists(opt_.out_dir + "/manifest.json")) {
    auto old = Manifest::load(opt_.out_dir);
    if (old.is_ok() && old->model_fingerprint != model_->fingerprint())
      return Status::errorf("{} holds a pool of another model ({}); choose another -o", opt_.out_dir, old->model_path);
  }
  return check_writable_dir(opt_.out_dir + "/manifest.json");
}

void PoolBuilder::add_candidates(const Stats& s, const std::string& file,
                                 const std::function<std::string(const std::string&)>& id_of,
                                 const std::function<ggml_type(const std::string&)>& type_of) {
  for (const auto& [name, v] : s.modules) {
    auto& e = man_.modules[module_index_.at(name)];
    Candidate c;
    c.id = id_of(name);
    c.type = type_name(type_of(name));
    c.bytes = v.first;
    c.file_bytes = probe_->padded(v.first);
    c.bpw = 8.0 * double(v.first) / double(e.n_params);
    c.rel_err = v.second;
    c.file = file;
    e.candidates.push_back(std::move(c));
  }
}

// One part file per type: `mods` are the modules quantized at `type` (resumed when an earlier
// run finished it with this model and imatrix).
Status PoolBuilder::make_part(ggml_type type, const std::vector<const LinearModule*>& mods) {
  const std::string tname = type_name(type);
  const std::string file = "cand-" + tname + ".gguf";
  const std::string gpath = opt_.out_dir + "/" + file, spath = opt_.out_dir + "/cand-" + tname + ".json";
  Stats s;
  int64_t part_params = 0;
  for (auto* lm : mods) part_params += model_->tensors()[lm->tensor].n_elements();
  if (fs::exists(gpath) && load_stats(spath, man_.model_fingerprint, im_.sha256, s) && s.modules.size() == mods.size()) {
    done_ += part_params;
    bar_->update(done_, tname + " (cached)");
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    s = Stats{man_.model_fingerprint, im_.sha256, {}, 0.0};
    GgufWriter w;
    gguf_set_val_str(w.gguf(), "gamma.pool.type", tname.c_str());
    gguf_set_val_str(w.gguf(), "gamma.model.fingerprint", man_.model_fingerprint.c_str());
    for (auto* lm : mods) {
      const auto& t = model_->tensors()[lm->tensor];
      w.add({t.name, type, t.shape});
    }
    GAMMA_RETURN_IF_ERROR(w.write(gpath, [&](size_t i, std::vector<uint8_t>& buf) -> Status {
      const auto& t = model_->tensors()[mods[i]->tensor];
      const auto* iv = im_.find(t.name);
      const float* imat = iv ? iv->data() : nullptr;
      GAMMA_ASSIGN_OR_RETURN(std::vector<float> ref, model_->read_f32(t));
      GAMMA_ASSIGN_OR_RETURN(buf, candidate_bytes(*model_, t, type, &ref, iv, nt_));
      double err = weighted_rel_error(type, buf.data(), ref.data(), t.n_rows(), t.row_width(), imat, nt_,
                                      rows_per_imatrix(t, iv));
      s.modules[t.name] = {buf.size(), err};
      done_ += t.n_elements();
      bar_->update(done_, tname + " " + t.name);
      return Status::ok();
    }));
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    GAMMA_RETURN_IF_ERROR(write_json(spath, stats_json(s)));
  }
  add_candidates(s, file, [&](const std::string&) { return tname; }, [&](const std::string&) { return type; });
  return Status::ok();
}

// An import: tensors of another GGUF of the same model, copied byte for byte.
Status PoolBuilder::add_import(const std::string& spec) {
  Import imp;
  const auto colon = spec.rfind(':');
  imp.path = colon == std::string::npos ? spec : spec.substr(0, colon);
  imp.label = sanitize_label(colon == std::string::npos ? fs::path(spec).stem().string() : spec.substr(colon + 1));
  GAMMA_ASSIGN_OR_RETURN(imp.model, Model::open(imp.path));
  if (imp.model->arch() != model_->arch() || imp.model->n_layer() != model_->n_layer())
    return Status::errorf("--import {}: a {} model with {} layers, not this {} with {}", imp.path, imp.model->arch(),
                          imp.model->n_layer(), model_->arch(), model_->n_layer());
  std::vector<std::pair<const TensorInfo*, const TensorInfo*>> pairs;  // (import, source)
  for (const auto& lm : model_->linear()) {
    int64_t k = imp.model->find(lm.name);
    if (k < 0) continue;
    const auto& it = imp.model->tensors()[size_t(k)];
    const auto& st = model_->tensors()[lm.tensor];
    if (it.shape == st.shape && ggml_get_type_traits(it.type)->to_float) pairs.push_back({&it, &st});
  }
  if (pairs.empty()) return Status::errorf("--import {}: no linear tensor matches this model's shapes", imp.path);
  const std::string file = "import-" + imp.label + ".gguf";
  const std::string gpath = opt_.out_dir + "/" + file, spath = opt_.out_dir + "/import-" + imp.label + ".json";
  Stats s;
  if (!(fs::exists(gpath) && load_stats(spath, man_.model_fingerprint, im_.sha256, s) && s.modules.size() == pairs.size())) {
    s = Stats{man_.model_fingerprint, im_.sha256, {}, 0.0};
    GgufWriter w;
    gguf_set_val_str(w.gguf(), "gamma.pool.import", imp.path.c_str());
    for (auto& [it, st] : pairs) w.add({it->name, it->type, it->shape});
    GAMMA_RETURN_IF_ERROR(w.write(gpath, [&](size_t i, std::vector<uint8_t>& buf) -> Status {
      const auto* it = pairs[i].first;
      const auto* st = pairs[i].second;
      GAMMA_RETURN_IF_ERROR(imp.model->check_fits_memory(*it));
      buf.resize(it->nbytes);
      GAMMA_RETURN_IF_ERROR(imp.model->read_raw(*it, buf.data()));
      GAMMA_ASSIGN_OR_RETURN(std::vector<float> ref, model_->read_f32(*st));
      const auto* iv = im_.find(st->name);
      s.modules[st->name] = {buf.size(), weighted_rel_error(it->type, buf.data(), ref.data(), st->n_rows(),
                                                            st->row_width(), iv ? iv->data() : nullptr, nt_,
                                                            rows_per_imatrix(*st, iv))};
      return Status::ok();
    }));
    GAMMA_RETURN_IF_ERROR(write_json(spath, stats_json(s)));
  }
  std::map<std::string, ggml_type> tmap;
  for (auto& [it, st] : pairs) tmap[st->name] = it->type;
  add_candidates(s, file, [&](const std::string& n) { return std::string(type_name(tmap.at(n))) + "@" + imp.label; },
                 [&](const std::string& n) { return tmap.at(n); });
  return Status::ok();
}

Result<Manifest> PoolBuilder::run() {
  GAMMA_ASSIGN_OR_RETURN(model_, Model::open(opt_.model_path));
  if (opt_.types.empty() && opt_.imports.empty()) return Status::error("no candidate types given (--types)");
  GAMMA_RETURN_IF_ERROR(resolve_types());
  GAMMA_RETURN_IF_ERROR(load_checked_imatrix());
  init_manifest();
  if (opt_.preview) return preview();
  if (opt_.stream && (opt_.estimate_rows <= 0 || !opt_.save_estimate))
    return Status::error("a streamed pool is an estimate's manifest: give it --estimate-rows");
  if (opt_.stream && !opt_.imports.empty())
    return Status::error("--stream makes no candidate files, and an import's candidates are one: build it without --stream");
  if (opt_.estimate_rows > 0) {
    GAMMA_ASSIGN_OR_RETURN(Manifest m, estimate());
    if (!opt_.save_estimate) return m;
    GAMMA_RETURN_IF_ERROR(prepare_dir());
    m.estimate_rows = opt_.estimate_rows;
    m.streamed = opt_.stream;
    GAMMA_RETURN_IF_ERROR(m.save());
    return m;
  }
  for (const auto& [name, types] : opt_.only) {
    if (!module_index_.count(name)) return Status::errorf("--only names {}, not a linear module of this model", name);
    for (const auto& t : types) GAMMA_RETURN_IF_ERROR(parse_type(t).status().with_context("--only " + name));
  }
  GAMMA_RETURN_IF_ERROR(prepare_dir());

  // Work list: one part file per generated type, then one per import. A module no grid type
  // fits (e.g. a 172-wide row and 32-wide blocks) falls back to F16, as llama-quantize does
  // for incompatible shapes, so every module has a candidate.
  int64_t total = 0;
  std::vector<const LinearModule*> orphans;
  for (const auto& lm : model_->linear()) {
    const auto& t = model_->tensors()[lm.tensor];
    bool any = false;
    for (ggml_type type : types_)
      if (admits(type, lm.name, t.shape)) { total += t.n_elements(); any = true; }
    if (!any) { orphans.push_back(&lm); total += t.n_elements(); }
  }
  bar_ = std::make_unique<Progress>("pool", total, opt_.quiet);
  for (ggml_type type : types_) {
    std::vector<const LinearModule*> mods;
    for (const auto& lm : model_->linear())
      if (admits(type, lm.name, model_->tensors()[lm.tensor].shape)) mods.push_back(&lm);
    if (!mods.empty()) GAMMA_RETURN_IF_ERROR(make_part(type, mods));
  }
  if (!orphans.empty()) GAMMA_RETURN_IF_ERROR(make_part(GGML_TYPE_F16, orphans));
  for (const auto& spec : opt_.imports) GAMMA_RETURN_IF_ERROR(add_import(spec));

  for (auto& e : man_.modules) {
    if (e.candidates.empty())
      return Status::errorf("module {} (row width {}) admits none of the candidate types", e.name, e.shape[0]);
    std::stable_sort(e.candidates.begin(), e.candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.bytes < b.bytes; });
  }
  bar_->finish();
  GAMMA_RETURN_IF_ERROR(man_.save());
  return man_;
}

}  // namespace

Result<Manifest> build_pool(const PoolOptions& opt) { return PoolBuilder(opt).run(); }

json only_to_json(const std::map<std::string, std::vector<std::string>>& only) {
  json j = json_header("gamma.pool.only", 1);
  j["modules"] = only;
  return j;
}

Result<std::map<std::string, std::vector<std::string>>> load_only(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(json j, read_json(path, "gamma.pool.only", 1));
  std::map<std::string, std::vector<std::string>> out;
  try {
    for (const auto& [name, types] : j.at("modules").items()) out[name] = types.get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return Status::errorf("{}: malformed candidate lists: {}", path, e.what());
  }
  return out;
}

}  // namespace gm
