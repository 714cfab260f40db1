#include "pool/pool.h"

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <map>
#include <set>

#include "gguf.h"
#include "gguf_model/model.h"
#include "gguf_model/writer.h"
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

Result<Manifest> build_pool(const PoolOptions& opt) {
  const int nt = resolve_threads(opt.n_threads);
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(opt.model_path));
  if (opt.types.empty() && opt.imports.empty()) return Status::error("no candidate types given (--types)");

  // Every type must give candidates: one named by the user that cannot is refused (rather
  // than a pool of F16 fallbacks); "auto" keeps those of its set that can.
  std::set<int64_t> widths;
  for (const auto& lm : model->linear()) widths.insert(model->tensors()[lm.tensor].row_width());
  const bool automatic = opt.types.size() == 1 && opt.types[0] == "auto";
  // `auto` gives IQ4_NL only to rows that 256-wide blocks cannot hold: on Qwen's 256-wide
  // rows IQ4_XS has its error in fewer bytes and Q4_K dominates it (results/iq_qwen/types.md).
  auto auto_admits = [&](ggml_type t, int64_t w) {
    return type_admits(t, w) && !(automatic && t == GGML_TYPE_IQ4_NL && w % 256 == 0);
  };
  auto fits = [&](ggml_type t) {
    return std::any_of(widths.begin(), widths.end(), [&](int64_t w) { return auto_admits(t, w); });
  };
  std::vector<ggml_type> types;
  for (const auto& t : automatic ? default_candidate_types() : opt.types) {
    GAMMA_ASSIGN_OR_RETURN(ggml_type gt, parse_type(t));
    const bool no_imatrix = type_needs_imatrix(gt) && opt.imatrix_path.empty();
    if (automatic && (!fits(gt) || no_imatrix)) continue;
    if (!fits(gt)) {
      std::string w;
      for (int64_t x : widths) w += (w.empty() ? "" : ", ") + std::to_string(x);
      return Status::errorf("{} fits no linear module of this model: its rows ({} wide) are not multiples of its {}-wide "
                            "blocks",
                            type_name(gt), w, ggml_blck_size(gt));
    }
    if (no_imatrix)
      return Status::errorf("{} needs an importance matrix (--imatrix FILE from llama-imatrix), as llama-quantize does",
                            type_name(gt));
    if (std::find(types.begin(), types.end(), gt) == types.end()) types.push_back(gt);
  }

  Imatrix im;
  if (!opt.imatrix_path.empty() && !opt.preview) {
    GAMMA_ASSIGN_OR_RETURN(im, load_imatrix(opt.imatrix_path));
    for (const auto& lm : model->linear()) {
      const auto* v = im.find(lm.name);
      const auto& t = model->tensors()[lm.tensor];
      if (v && int64_t(v->size()) != t.row_width())
        return Status::errorf("{}: entry {} has {} values but the tensor rows have {} (imatrix of another model?)",
                              opt.imatrix_path, lm.name, v->size(), t.row_width());
    }
  }

  // The emitted file's header does not depend on types: measure it once.
  auto probe = model_writer(*model, [](const TensorInfo& t) { return t.type; });
  Manifest man;
  man.dir = opt.out_dir;
  man.model_path = fs::absolute(opt.model_path).string();
  man.model_fingerprint = model->fingerprint();
  man.arch = model->arch();
  man.n_layer = model->n_layer();
  man.imatrix_path = im.path.empty() ? "" : fs::absolute(im.path).string();
  man.imatrix_sha256 = im.sha256;
  man.alignment = probe->alignment();
  man.header_bytes = probe->meta_bytes();
  for (ggml_type t : types) man.types.push_back(type_name(t));

  std::map<std::string, size_t> module_index;
  for (const auto& lm : model->linear()) {
    const auto& t = model->tensors()[lm.tensor];
    ModuleEntry e;
    e.name = lm.name;
    e.layer = lm.layer;
    e.kind = lm.kind;
    e.shape = t.shape;
    e.n_params = t.n_elements();
    e.source_type = type_name(t.type);
    module_index[e.name] = man.modules.size();
    man.modules.push_back(std::move(e));
  }
  for (const auto& t : model->tensors())
    if (!module_index.count(t.name)) man.fixed.push_back({t.name, t.shape, type_name(t.type)});

  // A preview with --imatrix assumes the imatrix (not made yet) covers every module.
  auto admits = [&](ggml_type type, const std::string& name, const std::vector<int64_t>& shape) {
    if (!auto_admits(type, shape[0])) return false;
    return !type_needs_imatrix(type) || im.find(name) != nullptr || (opt.preview && !opt.imatrix_path.empty());
  };
  auto add_predicted = [&](ModuleEntry& e, ggml_type type) {
    Candidate c;
    c.id = c.type = type_name(type);
    c.bytes = uint64_t(ggml_row_size(type, e.shape[0])) * uint64_t(e.n_params / e.shape[0]);
    c.file_bytes = probe->padded(c.bytes);
    c.bpw = 8.0 * double(c.bytes) / double(e.n_params);
    e.candidates.push_back(std::move(c));
  };

  if (opt.preview) {  // sizes only: ggml's row sizes, no quantizing, nothing written
    for (auto& e : man.modules) {
      for (ggml_type type : types)
        if (admits(type, e.name, e.shape)) add_predicted(e, type);
      if (e.candidates.empty()) add_predicted(e, GGML_TYPE_F16);
      std::stable_sort(e.candidates.begin(), e.candidates.end(),
                       [](const Candidate& a, const Candidate& b) { return a.bytes < b.bytes; });
    }
    return man;
  }
  // Output directory: create, or resume into it if it holds this model's pool.
  std::error_code ec;
  if (fs::exists(opt.out_dir, ec) && !fs::is_directory(opt.out_dir, ec))
    return Status::errorf("{} exists and is not a directory", opt.out_dir);
  fs::create_directories(opt.out_dir, ec);
  if (ec) return Status::errorf("cannot create {}: {}", opt.out_dir, ec.message());
  if (fs::exists(opt.out_dir + "/manifest.json")) {
    auto old = Manifest::load(opt.out_dir);
    if (old.is_ok() && old->model_fingerprint != model->fingerprint())
      return Status::errorf("{} holds a pool of another model ({}); choose another -o", opt.out_dir, old->model_path);
  }
  GAMMA_RETURN_IF_ERROR(check_writable_dir(opt.out_dir + "/manifest.json"));

  // Work list: one part file per generated type, then one per import.
  // A module no grid type fits (e.g. a 172-wide row and 32-wide blocks) falls back to F16,
  // as llama-quantize does for incompatible shapes, so every module has a candidate.
  int64_t total = 0;
  std::vector<const LinearModule*> orphans;
  for (const auto& lm : model->linear()) {
    const auto& t = model->tensors()[lm.tensor];
    bool any = false;
    for (ggml_type type : types)
      if (admits(type, lm.name, t.shape)) { total += t.n_elements(); any = true; }
    if (!any) { orphans.push_back(&lm); total += t.n_elements(); }
  }
  Progress bar("pool", total, opt.quiet);
  int64_t done = 0;

  auto add_candidates = [&](const Stats& s, const std::string& file, const std::function<std::string(const std::string&)>& id_of,
                            const std::function<ggml_type(const std::string&)>& type_of) {
    for (const auto& [name, v] : s.modules) {
      auto& e = man.modules[module_index.at(name)];
      Candidate c;
      c.id = id_of(name);
      c.type = type_name(type_of(name));
      c.bytes = v.first;
      c.file_bytes = probe->padded(v.first);
      c.bpw = 8.0 * double(v.first) / double(e.n_params);
      c.rel_err = v.second;
      c.file = file;
      e.candidates.push_back(std::move(c));
    }
  };

  // One part file per type: `mods` are the modules quantized at `type`.
  auto make_part = [&](ggml_type type, const std::vector<const LinearModule*>& mods) -> Status {
    const std::string tname = type_name(type);
    const std::string file = "cand-" + tname + ".gguf";
    const std::string gpath = opt.out_dir + "/" + file, spath = opt.out_dir + "/cand-" + tname + ".json";
    Stats s;
    int64_t part_params = 0;
    for (auto* lm : mods) part_params += model->tensors()[lm->tensor].n_elements();
    if (fs::exists(gpath) && load_stats(spath, man.model_fingerprint, im.sha256, s) && s.modules.size() == mods.size()) {
      done += part_params;  // resumed: finished in an earlier run
      bar.update(done, tname + " (cached)");
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      s = Stats{man.model_fingerprint, im.sha256, {}, 0.0};
      GgufWriter w;
      gguf_set_val_str(w.gguf(), "gamma.pool.type", tname.c_str());
      gguf_set_val_str(w.gguf(), "gamma.model.fingerprint", man.model_fingerprint.c_str());
      for (auto* lm : mods) {
        const auto& t = model->tensors()[lm->tensor];
        w.add({t.name, type, t.shape});
      }
      GAMMA_RETURN_IF_ERROR(w.write(gpath, [&](size_t i, std::vector<uint8_t>& buf) -> Status {
        const auto& t = model->tensors()[mods[i]->tensor];
        const auto* iv = im.find(t.name);
        const float* imat = iv ? iv->data() : nullptr;
        GAMMA_ASSIGN_OR_RETURN(std::vector<float> ref, model->read_f32(t));
        if (t.type == type) {
          buf.resize(t.nbytes);  // the source's own bytes are the exact candidate
          GAMMA_RETURN_IF_ERROR(model->read_raw(t, buf.data()));
        } else {
          buf = quantize_rows(type, ref.data(), t.n_rows(), t.row_width(), imat, nt);
        }
        double err = weighted_rel_error(type, buf.data(), ref.data(), t.n_rows(), t.row_width(), imat, nt);
        s.modules[t.name] = {buf.size(), err};
        done += t.n_elements();
        bar.update(done, tname + " " + t.name);
        return Status::ok();
      }));
      s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      GAMMA_RETURN_IF_ERROR(write_json(spath, stats_json(s)));
    }
    add_candidates(s, file, [&](const std::string&) { return tname; }, [&](const std::string&) { return type; });
    return Status::ok();
  };

  for (ggml_type type : types) {
    std::vector<const LinearModule*> mods;
    for (const auto& lm : model->linear())
      if (admits(type, lm.name, model->tensors()[lm.tensor].shape)) mods.push_back(&lm);
    if (!mods.empty()) GAMMA_RETURN_IF_ERROR(make_part(type, mods));
  }
  if (!orphans.empty()) GAMMA_RETURN_IF_ERROR(make_part(GGML_TYPE_F16, orphans));

  // Imports: tensors of another GGUF of the same model, copied byte for byte.
  for (const auto& spec : opt.imports) {
    Import imp;
    const auto colon = spec.rfind(':');
    imp.path = colon == std::string::npos ? spec : spec.substr(0, colon);
    imp.label = sanitize_label(colon == std::string::npos ? fs::path(spec).stem().string() : spec.substr(colon + 1));
    GAMMA_ASSIGN_OR_RETURN(imp.model, Model::open(imp.path));
    if (imp.model->arch() != model->arch() || imp.model->n_layer() != model->n_layer())
      return Status::errorf("--import {}: a {} model with {} layers, not this {} with {}", imp.path, imp.model->arch(),
                            imp.model->n_layer(), model->arch(), model->n_layer());
    std::vector<std::pair<const TensorInfo*, const TensorInfo*>> pairs;  // (import, source)
    for (const auto& lm : model->linear()) {
      int64_t k = imp.model->find(lm.name);
      if (k < 0) continue;
      const auto& it = imp.model->tensors()[size_t(k)];
      const auto& st = model->tensors()[lm.tensor];
      if (it.shape == st.shape && ggml_get_type_traits(it.type)->to_float) pairs.push_back({&it, &st});
    }
    if (pairs.empty()) return Status::errorf("--import {}: no linear tensor matches this model's shapes", imp.path);
    const std::string file = "import-" + imp.label + ".gguf";
    const std::string gpath = opt.out_dir + "/" + file, spath = opt.out_dir + "/import-" + imp.label + ".json";
    Stats s;
    if (!(fs::exists(gpath) && load_stats(spath, man.model_fingerprint, im.sha256, s) && s.modules.size() == pairs.size())) {
      s = Stats{man.model_fingerprint, im.sha256, {}, 0.0};
      GgufWriter w;
      gguf_set_val_str(w.gguf(), "gamma.pool.import", imp.path.c_str());
      for (auto& [it, st] : pairs) w.add({it->name, it->type, it->shape});
      GAMMA_RETURN_IF_ERROR(w.write(gpath, [&](size_t i, std::vector<uint8_t>& buf) -> Status {
        const auto* it = pairs[i].first;
        const auto* st = pairs[i].second;
        buf.resize(it->nbytes);
        GAMMA_RETURN_IF_ERROR(imp.model->read_raw(*it, buf.data()));
        GAMMA_ASSIGN_OR_RETURN(std::vector<float> ref, model->read_f32(*st));
        const float* imat = im.find(st->name) ? im.find(st->name)->data() : nullptr;
        s.modules[st->name] = {buf.size(), weighted_rel_error(it->type, buf.data(), ref.data(), st->n_rows(),
                                                              st->row_width(), imat, nt)};
        return Status::ok();
      }));
      GAMMA_RETURN_IF_ERROR(write_json(spath, stats_json(s)));
    }
    std::map<std::string, ggml_type> tmap;
    for (auto& [it, st] : pairs) tmap[st->name] = it->type;
    add_candidates(s, file, [&](const std::string& n) { return std::string(type_name(tmap.at(n))) + "@" + imp.label; },
                   [&](const std::string& n) { return tmap.at(n); });
  }

  for (auto& e : man.modules) {
    if (e.candidates.empty())
      return Status::errorf("module {} (row width {}) admits none of the candidate types", e.name, e.shape[0]);
    std::stable_sort(e.candidates.begin(), e.candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.bytes < b.bytes; });
  }
  bar.finish();
  GAMMA_RETURN_IF_ERROR(man.save());
  return man;
}

}  // namespace gm
