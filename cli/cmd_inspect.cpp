// gamma inspect: a GGUF's architecture, linear modules (shape, type, bytes, candidate types) and
// totals; or, given a pool directory, the pool's per-type table (pool/type_table.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "decoder/hparams.h"
#include "gguf_model/inspect.h"
#include "gguf_model/model.h"
#include "pool/pool.h"
#include "pool/type_table.h"
#include "util/json.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gm::cli {
namespace {

// The allocators per architecture: HAWQ-V2 and Stage I (gamma) need gamma's LibTorch decoder
// layer; the static proxy and static-cal (the proxy rescaled by gamma layers' measured KLDs)
// need only libllama; none where llama.cpp lists the name but builds no model for it.
void print_architectures(bool as_json) {
  const auto& dec = decoder_architectures();
  json rows = json::array();
  for (const auto& a : llama_architectures()) {
    std::vector<std::string> s;
    if (a.has_model) s = {"static", "static-cal"};
    if (a.has_model && check_decoder_architecture(a.name).is_ok()) s = {"static", "static-cal", "hawq", "gamma"};
    rows.push_back({{"architecture", a.name}, {"llama_cpp_model", a.has_model}, {"scorers", s}});
  }
  if (as_json) {
    std::printf("%s\n", rows.dump(1).c_str());
    return;
  }
  int n = 0;
  for (const auto& r : rows) {
    std::string sc;
    for (const auto& x : r["scorers"]) sc += (sc.empty() ? "" : ",") + x.get<std::string>();
    std::printf("%-20s %s\n", r["architecture"].get<std::string>().c_str(),
                sc.empty() ? "(llama.cpp has no model for it)" : sc.c_str());
    n += !sc.empty();
  }
  std::printf("%d of %zu architectures: every stage but HAWQ-V2 and Stage I through libllama; those two for %zu (%s)\n",
              n, rows.size(), dec.size(), fmt::format("{}", fmt::join(dec, ", ")).c_str());
}

void add_inspect(CLI::App& app) {
  struct Opts {
    std::string path, imatrix;
    std::vector<std::string> types = {"auto"};
    bool json = false, errors = false, archs = false;
    double share = 0.9;
    int64_t rows = 64;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand(
      "inspect", "a GGUF: architecture, linear modules (shape, type, bytes, candidate types), totals; a pool directory: its per-type table");
  auto* model = c->add_option("model", o->path, "GGUF file, or a pool directory (gamma pool -o)");
  c->add_flag("--architectures", o->archs,
              "every architecture llama.cpp knows, and the allocators gamma has for each")->excludes(model);
  c->add_flag("--json", o->json, "machine-readable output");
  c->add_option("--share", o->share, "pool table: share of the modules on which a dominating type must win")
      ->check(CLI::Range(0.5, 1.0))->capture_default_str();
  c->add_flag("--errors", o->errors,
              "a GGUF: the per-type table a pool would give, each candidate's error estimated from --rows rows of "
              "each module (seconds, no files)");
  c->add_option("--imatrix", o->imatrix, "--errors: importance matrix weighting the errors (as gamma pool)");
  c->add_option("--types", o->types, "--errors: candidate types, comma-separated (as gamma pool)")
      ->delimiter(',')->capture_default_str();
  c->add_option("--rows", o->rows, "--errors: rows sampled per module")->check(CLI::Range(int64_t(1), int64_t(1) << 40))
      ->capture_default_str();
  c->add_option("-t,--threads", o->threads, "--errors: threads (default: all cores)");
  c->callback([o] {
    std::error_code ec;
    if (o->archs) {
      print_architectures(o->json);
      return;
    }
    if (o->path.empty()) fail_if(Status::error("inspect needs a GGUF file or a pool directory (or --architectures)"));
    if (o->errors) {
      if (std::filesystem::is_directory(o->path, ec)) fail_if(Status::error("--errors reads a GGUF, not a pool directory"));
      PoolOptions po;
      po.model_path = o->path;
      po.imatrix_path = o->imatrix;
      po.estimate_rows = o->rows;
      po.n_threads = o->threads;
      for (const auto& t : o->types)
        if (!t.empty()) po.types.push_back(t);
      TypeTable t = type_table(value_or_fail(build_pool(po)), o->share);
      if (o->json) {
        json j = t.to_json();
        j["sampled_rows"] = o->rows;
        std::printf("%s\n", j.dump(1).c_str());
      } else {
        std::printf("Estimated from %lld rows of each module (gamma inspect --errors).\n%s", (long long)o->rows,
                    t.markdown().c_str());
      }
      return;
    }
    if (std::filesystem::is_directory(o->path, ec)) {
      const TypeTable t = type_table(value_or_fail(Manifest::load(o->path)), o->share);
      std::printf("%s", o->json ? (t.to_json().dump(1) + "\n").c_str() : t.markdown().c_str());
      return;
    }
    auto m = value_or_fail(Model::open(o->path));
    const json j = describe_model(*m, o->path);
    const json& mods = j["linear"];
    const json& tot = j["totals"];
    if (o->json) { std::printf("%s\n", j.dump(1).c_str()); return; }
    std::printf("%s: %s '%s', %d layers, %zu tensors, %llu bytes\n", o->path.c_str(), m->arch().c_str(),
                m->name().c_str(), m->n_layer(), m->tensors().size(), (unsigned long long)m->file_size());
    std::printf("%-28s %-14s %-6s %12s %6s  %s\n", "module", "shape", "type", "bytes", "bpw", "candidate types");
    for (const auto& x : mods) {
      std::string shape = std::to_string(x["shape"][0].get<int64_t>()) + "x" + std::to_string(x["shape"][1].get<int64_t>());
      std::string cands;
      for (const auto& c : x["candidates"]) cands += (cands.empty() ? "" : ",") + c.get<std::string>();
      std::printf("%-28s %-14s %-6s %12llu %6.3f  %s\n", x["name"].get<std::string>().c_str(), shape.c_str(),
                  x["type"].get<std::string>().c_str(), (unsigned long long)x["bytes"].get<uint64_t>(),
                  x["bpw"].get<double>(), cands.c_str());
    }
    std::printf("total: %zu linear modules, %lld params, %llu bytes (%.4f bpw); all tensors %lld params, %llu bytes\n",
                mods.size(), (long long)tot["linear_params"].get<int64_t>(),
                (unsigned long long)tot["linear_bytes"].get<uint64_t>(), tot["linear_bpw"].get<double>(),
                (long long)tot["params"].get<int64_t>(), (unsigned long long)tot["tensor_bytes"].get<uint64_t>());
  });
}

}  // namespace
GAMMA_COMMAND(11, add_inspect);
}  // namespace gm::cli
