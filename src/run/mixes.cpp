#include "run/mixes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <regex>

#include "gguf_model/model.h"
#include "pool/imatrix.h"
#include "run/pipeline.h"
#include "run/proc.h"
#include "util/proc.h"

namespace fs = std::filesystem;

namespace gm::run {

const std::vector<std::string>& standard_mixes() {
  static const std::vector<std::string> mixes = {
      "IQ1_S",  "IQ1_M",  "IQ2_XXS", "IQ2_XS", "IQ2_S",  "IQ2_M",  "Q2_K_S", "Q2_K",   "IQ3_XXS",
      "IQ3_XS", "Q3_K_S", "IQ3_S",   "IQ3_M",  "Q3_K_M", "Q3_K_L", "IQ4_XS", "Q4_0",   "Q4_K_S",
      "IQ4_NL", "Q4_K_M", "Q4_1",    "Q5_0",   "Q5_K_S", "Q5_K_M", "Q5_1",   "Q6_K",   "Q8_0"};
  return mixes;
}

bool is_standard_mix(const std::string& name) {
  const auto& m = standard_mixes();
  return std::find(m.begin(), m.end(), name) != m.end();
}

Result<uint64_t> gguf_header_bytes(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(auto t, Model::open(path));
  uint64_t data = 0;
  for (const auto& ti : t->tensors()) data += (ti.nbytes + 31) / 32 * 32;
  return t->file_size() > data ? t->file_size() - data : 0;
}

Result<MixPrediction> predict_mix(const std::string& llama_quantize, const std::string& teacher,
                                  const std::string& imatrix, const std::string& mix, uint64_t teacher_header) {
  std::vector<std::string> argv = {llama_quantize, "--dry-run"};
  if (!imatrix.empty()) argv.insert(argv.end(), {"--imatrix", imatrix});
  argv.insert(argv.end(), {teacher, mix, "1"});
  GAMMA_ASSIGN_OR_RETURN(std::string out, capture(argv));
  static const std::regex re(R"(quant size\s*=\s*([0-9.]+) MiB)");
  std::smatch m;
  if (!std::regex_search(out, m, re)) return Status::errorf("llama-quantize --dry-run {}: no \"quant size\" in its output", mix);
  MixPrediction p;
  p.file_bytes = uint64_t(std::llround(std::stod(m[1].str()) * 1048576.0)) + teacher_header;
  p.needs_imatrix = out.find("will require an imatrix") != std::string::npos;
  return p;
}

std::vector<std::string> mixes_for_budget(const std::map<std::string, uint64_t>& predicted, uint64_t budget, double near,
                                          int max_within, bool with_above) {
  std::vector<std::pair<uint64_t, std::string>> within, below, above;
  for (const auto& [name, bytes] : predicted) {
    if (bytes > budget) above.push_back({bytes, name});
    else if (double(bytes) >= near * double(budget)) within.push_back({bytes, name});
    else below.push_back({bytes, name});
  }
  std::sort(within.rbegin(), within.rend());  // largest (nearest the budget) first
  // max_within sizes, not names: mixes of one size (a model whose rows make several mixes fall
  // back to the same types) are one comparison, and which of them is best only measuring says.
  size_t keep = 0;
  for (int sizes = 0; keep < within.size(); ++keep) {
    if (keep == 0 || within[keep].first != within[keep - 1].first) ++sizes;
    if (sizes > max_within) break;
  }
  within.resize(keep);
  if (within.empty() && !below.empty()) within.push_back(*std::max_element(below.begin(), below.end()));
  if (!above.empty() && (with_above || within.empty())) within.push_back(*std::min_element(above.begin(), above.end()));
  std::sort(within.begin(), within.end());
  std::vector<std::string> out;
  for (const auto& w : within) out.push_back(w.second);
  return out;
}


// ---- in a run: the mixes built from the run's teacher and imatrix, measured like gamma's files

std::vector<std::string> quantize_cmd(const Env& e, const std::string& mix, const std::string& out) {
  std::vector<std::string> cmd = {e.o.llama_bin + "/llama-quantize"};
  if (!e.imatrix.empty()) cmd.insert(cmd.end(), {"--imatrix", e.imatrix});
  cmd.insert(cmd.end(), {e.teacher, out, mix, e.T});
  return cmd;
}

namespace {

// llama-quantize's prediction of every standard mix it can make here (cached: a dry run loads
// the teacher's header, a fraction of a second each).
Result<std::map<std::string, uint64_t>> predict_mixes(Env& e) {
  const std::string cache = e.W + "/mixes-predicted.json";
  std::map<std::string, uint64_t> out;
  if (auto j = read_json(cache, "gamma.run.mixes", 1); j.is_ok() && (*j)["imatrix"] == e.imatrix) {
    for (const auto& [k, v] : (*j)["predicted"].items()) out[k] = v.get<uint64_t>();
    return out;
  }
  GAMMA_ASSIGN_OR_RETURN(uint64_t header, gguf_header_bytes(e.teacher));
  for (const auto& mix : standard_mixes()) {
    GAMMA_ASSIGN_OR_RETURN(auto p, predict_mix(e.o.llama_bin + "/llama-quantize", e.teacher, e.imatrix, mix, header));
    if (p.needs_imatrix && e.imatrix.empty()) continue;
    out[mix] = p.file_bytes;
  }
  json j = json_header("gamma.run.mixes", 1);
  j["imatrix"] = e.imatrix;
  j["predicted"] = out;
  GAMMA_RETURN_IF_ERROR(write_json(cache, j));
  return out;
}

// Where the mixes' measurements are kept across runs: llama-quantize's output is a function of
// the teacher, the imatrix, the mix and the llama.cpp build, so its evaluation on a text is too;
// a second run of the same model (another --size, another work directory) measures none again.
// The run's part of the key, computed once for all its mixes; a mix's directory is
// ROOT/MIX-KEY (mix_cache).
Result<std::string> mix_cache_key(const Env& e) {
  GAMMA_ASSIGN_OR_RETURN(auto teacher, Model::open(e.teacher));
  // The imatrix by its values: llama-imatrix writes the calibration file's path into the file,
  // so the same importance from another work directory is another file.
  std::string imatrix = "none";
  if (!e.imatrix.empty()) {
    GAMMA_ASSIGN_OR_RETURN(Imatrix im, load_imatrix(e.imatrix));
    std::string data;
    for (const auto& [name, v] : im.values)
      data += name + ":" + std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    imatrix = sha256_hex(data.data(), data.size());
  }
  GAMMA_ASSIGN_OR_RETURN(std::string tool, sha256_file(e.o.llama_bin + "/llama-quantize"));
  return teacher->fingerprint() + " " + imatrix + " " + tool;
}

std::string mix_cache(const std::string& run_key, const std::string& mix) {
  const std::string key = run_key + " " + mix;
  return cache_dir() + "/mixes/" + mix + "-" + sha256_hex(key.data(), key.size()).substr(0, 24);
}

}  // namespace

Result<std::string> build_mix(Env& e, const std::string& mix) {
  const std::string path = e.W + "/llama-" + mix + ".gguf";
  if (file_exists(path)) return path;
  const std::string tmp = e.W + "/llama-" + mix + ".partial.gguf";
  GAMMA_RETURN_IF_ERROR(e.stage("llama-quantize " + mix + " -> " + path, mix_seconds(e.ms, mix), [&]() -> Status {
    GAMMA_RETURN_IF_ERROR(run_tool("llama-quantize", quantize_cmd(e, mix, tmp), e.W + "/llama-" + mix + ".log"));
    if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::errorf("cannot write {}", path);
    return Status::ok();
  }));
  return path;
}

namespace {

Result<MixRow> make_mix(Env& e, const std::string& mix, uint64_t predicted, const std::string& cache) {
  MixRow r;
  r.name = mix;
  r.predicted = predicted;
  r.path = e.W + "/llama-" + mix + ".gguf";
  const std::string stem = e.W + "/llama-" + mix;
  std::vector<EvalText> texts = e.valid;
  texts.push_back(e.report);
  texts.insert(texts.end(), e.also.begin(), e.also.end());
  for (const auto& t : texts) {  // measured in an earlier run: taken, not measured again
    const std::string here = e.eval_path(stem, t), kept = cache + "/" + e.eval_tag(t) + ".json";
    if (!load_eval(here).is_ok() && load_eval(kept).is_ok()) GAMMA_RETURN_IF_ERROR(copy_file(kept, here));
  }
  const bool measured = std::all_of(texts.begin(), texts.end(), [&](const EvalText& t) {
    return load_eval(e.eval_path(stem, t)).is_ok();
  });
  // With a speed or memory budget llama-bench (or libllama) measures the mix too, so its file is needed even when its
  // evaluations were kept.
  if (!measured || speed_budget(e) || memory_budget(e)) GAMMA_RETURN_IF_ERROR(build_mix(e, mix).status());
  GAMMA_ASSIGN_OR_RETURN(ValidScore v, validate(e, r.path, stem));
  r.bytes = v.file_bytes;
  r.valid_kld = v.kld;
  r.valid_err = v.err;
  GAMMA_ASSIGN_OR_RETURN(r.report, eval_file(e, r.path, stem, e.report));
  GAMMA_ASSIGN_OR_RETURN(r.also, eval_also(e, r.path, stem));
  std::error_code ec;
  fs::create_directories(cache, ec);
  for (const auto& t : texts)
    if (!ec && !file_exists(cache + "/" + e.eval_tag(t) + ".json"))
      GAMMA_RETURN_IF_ERROR(copy_file(e.eval_path(stem, t), cache + "/" + e.eval_tag(t) + ".json"));
  // Measured: the file is no longer needed (RunOptions::keep_mixes), so at most one mix is on
  // the disk at a time.
  if (!e.o.keep_mixes && !speed_budget(e) && !memory_budget(e)) fs::remove(r.path, ec);
  return r;
}

// The mixes compared at `budget`, by name.
Result<std::vector<std::string>> compared_names(Env& e, const std::map<std::string, uint64_t>& predicted, uint64_t budget) {
  const RunOptions& o = e.o;
  if (o.compare == "none") return std::vector<std::string>{};
  if (o.compare == "auto") return mixes_for_budget(predicted, budget, 0.85, o.max_mixes, o.mix_above);
  if (!predicted.count(o.compare))
    return Status::errorf("--compare {}: llama-quantize makes it only with an imatrix (not with --imatrix none)", o.compare);
  return std::vector<std::string>{o.compare};
}

}  // namespace

Result<std::vector<uint64_t>> compared_mix_sizes(Env& e, uint64_t budget) {
  std::vector<uint64_t> out;
  if (e.o.compare == "none") return out;
  GAMMA_ASSIGN_OR_RETURN(auto predicted, predict_mixes(e));
  GAMMA_ASSIGN_OR_RETURN(auto names, compared_names(e, predicted, budget));
  for (const auto& n : names) out.push_back(predicted.at(n));
  return out;
}

std::string mix_size_name(const std::string& text) {
  std::string up;
  for (char c : text) up += char(std::toupper(static_cast<unsigned char>(c)));
  return is_standard_mix(up) ? up : "";
}

Result<uint64_t> predicted_mix_size(Env& e, const std::string& mix) {
  GAMMA_ASSIGN_OR_RETURN(auto predicted, predict_mixes(e));
  if (!predicted.count(mix))
    return Status::errorf("--size {}: llama-quantize makes that mix only with an imatrix (not with --imatrix none)", mix);
  return predicted.at(mix);
}

Result<std::vector<MixRow>> compared_mixes(Env& e, uint64_t budget) {
  std::vector<MixRow> mixes;
  if (e.o.compare == "none") return mixes;
  GAMMA_ASSIGN_OR_RETURN(auto predicted, predict_mixes(e));
  GAMMA_ASSIGN_OR_RETURN(auto names, compared_names(e, predicted, budget));
  GAMMA_ASSIGN_OR_RETURN(std::string key, mix_cache_key(e));
  for (const auto& n : names) {
    GAMMA_ASSIGN_OR_RETURN(MixRow r, make_mix(e, n, predicted.at(n), mix_cache(key, n)));
    r.fits = r.bytes <= budget;
    mixes.push_back(std::move(r));
  }
  return mixes;
}

}  // namespace gm::run
