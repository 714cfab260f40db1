// gamma speed: how fast files decode and process prompts on this machine, predicted from the
// kernel time of each weight (src/speed/speed.h), optionally beside llama-bench's measurement;
// or, with --pool, the gamma.speed table Stage II budgets time with.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "cli/command.h"
#include "gguf_model/model.h"
#include "llama/backend.h"
#include "pool/manifest.h"
#include "speed/memory.h"
#include "speed/speed.h"
#include "util/files.h"
#include "util/threads.h"

namespace gm::cli {
namespace {

struct SpeedOpts {
  std::vector<std::string> files;
  std::string reference, pool, out, llama_bin;
  bool bench = false, memory_only = false;
  int reps = 2, rounds = 3, threads = 0, ctx = 0;
  std::string kv_type;
};

std::string llama_bench(const SpeedOpts& o) {
  std::string bin = o.llama_bin;
  if (bin.empty()) {
    const char* env = std::getenv("GAMMA_LLAMA_BIN");
    bin = env && *env ? env : exe_dir() + "/../bin";
  }
  return bin + "/llama-bench";
}

void run_pool(const SpeedOpts& o, speed::CostModel& cm) {
  if (o.out.empty()) throw Failure("--pool needs --out (the gamma.speed file to write)");
  for (const auto& f : o.files)
    if (!file_exists(f)) throw Failure(fmt::format("{}: no such file", f));
  fail_if(check_writable_dir(o.out));
  Manifest m = value_or_fail(Manifest::load(o.pool));
  speed::CostTable t = value_or_fail(speed::cost_table(m, cm, llama_bench(o), o.reference));
  // Files named with --pool are priced at their own types too: what gamma solve --min-decode FILE
  // reads when FILE's types are not among the candidates.
  for (const auto& f : o.files) value_or_fail(speed::price_file(t, m, f, cm));
  fail_if(t.save(o.out));
  std::printf("speed table: %zu modules, rest %.0f us/token decode, %.0f us/batch prompt (%s) -> %s\n", t.cost.size(),
              t.rest.decode_us, t.rest.prefill_us, t.rest.reference.c_str(), o.out.c_str());
  if (const std::string n = llama::cpu_note(); !n.empty()) std::printf("note: %s\n", n.c_str());
}

void run_files(const SpeedOpts& o, speed::CostModel& cm) {
  if (o.files.empty()) throw Failure("give GGUF files, or --pool");
  for (const auto& f : o.files)
    if (!file_exists(f)) throw Failure(fmt::format("{}: no such file", f));
  if (!o.out.empty()) fail_if(check_writable_dir(o.out));
  const std::string ref = o.reference.empty() ? o.files.front() : o.reference;
  if (!file_exists(ref)) throw Failure(fmt::format("{}: no such file", ref));
  // Every file must be the model the rest is measured on (same weights and shapes); all kernel
  // times are measured before any llama-bench run.
  std::vector<std::string> files = {ref};
  for (const auto& f : o.files)
    if (f != ref) files.push_back(f);
  const auto ref_w = value_or_fail(speed::weights_of(*value_or_fail(Model::open(ref))));
  std::vector<std::vector<speed::Weight>> weights;
  std::vector<uint64_t> sizes;
  for (const auto& f : files) {
    auto model = value_or_fail(Model::open(f));
    auto ws = value_or_fail(speed::weights_of(*model));
    bool same = ws.size() == ref_w.size();
    for (const auto& w : ws) {
      auto it = std::find_if(ref_w.begin(), ref_w.end(), [&](const speed::Weight& r) { return r.name == w.name; });
      same = same && it != ref_w.end() && it->n_in == w.n_in && it->n_out == w.n_out;
    }
    if (!same) throw Failure(fmt::format("{} is not the model of the reference {} (other weights)", f, ref));
    if (!o.memory_only) value_or_fail(cm.weights_time(ws));
    weights.push_back(std::move(ws));
    sizes.push_back(model->file_size());
  }
  // The rest and every type's probe factor (speed.h). With --bench, measured again with the
  // files in the same round-robin rounds (each round measures every file once, each against the
  // reference measured beside it): this machine has slow phases of tens of seconds to minutes (10-25 %) that
  // consecutive measurements share, and the model's inputs measured in another phase than the
  // files moved every prediction by that much (SmolLM2, results/speed_model/).
  std::vector<speed::Speed> best(files.size());
  if (o.memory_only) {
    if (o.ctx < 1 || o.bench) throw Failure("--memory-only takes --ctx N and no --bench");
  } else {
    std::set<std::string> types;
    for (const auto& ws : weights)
      for (const auto& w : ws)
        if (!w.head) types.insert(w.type);
    std::vector<speed::Speed> measured;
    const std::vector<std::string> check =
        o.bench ? std::vector<std::string>(files.begin() + 1, files.end()) : std::vector<std::string>();
    fail_if(cm.calibrate(llama_bench(o), ref, o.reps, std::vector<std::string>(types.begin(), types.end()), o.rounds, check,
                         &measured));
    if (o.bench) {
      best[0] = cm.rest().reference_bench;
      std::copy(measured.begin(), measured.end(), best.begin() + 1);
    }
  }
  // A reference whose kernels timed alone are slower than llama-bench's whole graph gives a
  // negative rest (Qwen's F32 teacher on an AMD EPYC: -22.6 ms a token), and a file with cheaper
  // weights then has no positive prediction. With --bench the measurements are what a check is
  // for (gamma run's speed check reads them, its predictions come from its own table): kept,
  // the file's prediction left out. Without --bench there is nothing else to say: an error.
  std::vector<Result<speed::Speed>> preds;
  for (size_t i = 0; i < files.size() && !o.memory_only; ++i) {
    preds.push_back(cm.predict(weights[i]));
    if (!preds.back().is_ok() && !o.bench) fail_if(preds.back().status());  // before any row is printed
  }
  json rows = json::array();
  if (!o.memory_only) {
    std::printf("%-40s %14s %10s %10s", "file", "bytes", "tg128 pred", "pp512 pred");
    if (o.bench) std::printf(" %10s %10s %7s %7s", "tg128", "pp512", "tg err", "pp err");
    std::printf("\n");
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (o.memory_only) {
      rows.push_back({{"file", files[i]}, {"bytes", sizes[i]}});
      continue;
    }
    const Result<speed::Speed>& pred = preds[i];
    json row = {{"file", files[i]}, {"bytes", sizes[i]}};
    const std::string name = std::filesystem::path(files[i]).filename().string();
    if (pred.is_ok()) {
      row["predicted_tg128"] = pred->decode_tps;
      row["predicted_pp512"] = pred->prefill_tps;
      std::printf("%-40s %14llu %10.2f %10.2f", name.c_str(), static_cast<unsigned long long>(sizes[i]), pred->decode_tps,
                  pred->prefill_tps);
    } else {
      std::printf("%-40s %14llu %10s %10s", name.c_str(), static_cast<unsigned long long>(sizes[i]), "-", "-");
      std::fprintf(stderr, "note: %s: no prediction (%s; rest %.0f us a token on %s)\n", name.c_str(), pred.status().message().c_str(),
                   cm.rest().decode_us, ref.c_str());
    }
    if (o.bench) {
      const speed::Speed& b = best[i];
      row["tg128"] = b.decode_tps;
      row["pp512"] = b.prefill_tps;
      std::printf(" %10.2f %10.2f", b.decode_tps, b.prefill_tps);
      if (pred.is_ok()) {
        const double etg = 100.0 * (pred->decode_tps / b.decode_tps - 1), epp = 100.0 * (pred->prefill_tps / b.prefill_tps - 1);
        row["tg128_error_pct"] = etg;
        row["pp512_error_pct"] = epp;
        std::printf(" %+6.1f%% %+6.1f%%", etg, epp);
      }
    }
    std::printf("\n");
    rows.push_back(row);
  }
  // --ctx: each file's memory as llama.cpp allocates it, beside what --memory predicts for it
  // from the reference's context, compute and model-part overhead (speed/memory.h).
  if (o.ctx > 0) {
    const speed::MemoryUse ref_use = value_or_fail(speed::memory_use(ref, o.ctx, o.kv_type, cm.threads()));
    std::printf("\nmemory at %d tokens of context (llama.cpp's own accounting; MiB):\n%-40s %10s %10s %10s %10s %10s %7s\n",
                o.ctx, "file", "model", "KV cache", "compute", "total", "predicted", "err");
    for (size_t i = 0; i < files.size(); ++i) {
      const speed::MemoryUse u = i == 0 ? ref_use : value_or_fail(speed::memory_use(files[i], o.ctx, o.kv_type, cm.threads()));
      // What --memory assumes for this file: the reference's context, compute and metadata, the
      // file's own size and repacked weights.
      const double pred = speed::predicted_total(ref_use, u.file_bytes, u.repacked);
      const double err = 100.0 * (pred / double(u.total()) - 1);
      std::printf("%-40s %10.1f %10.1f %10.1f %10.1f %10.1f %+6.2f%%\n",
                  std::filesystem::path(files[i]).filename().string().c_str(), u.model / 1048576.0, u.context / 1048576.0,
                  u.compute / 1048576.0, u.total() / 1048576.0, pred / 1048576.0, err);
      rows[i]["memory"] = u.to_json();
      rows[i]["memory"]["predicted_total"] = pred;
      rows[i]["memory"]["predicted_error_pct"] = err;
    }
  }
  if (!o.out.empty()) {
    json j = json_header("gamma.speed.check", 1);
    j["machine"] = speed::kernel_signature();
    j["threads"] = cm.threads();
    j["reference"] = ref;
    j["speed"] = !o.memory_only;
    j["rest_decode_us"] = cm.rest().decode_us;
    j["rest_prefill_us"] = cm.rest().prefill_us;
    // What the rest was calibrated on: the reference as llama-bench measured it then (its
    // prediction equals that; the check's own rounds measure it again like any other file).
    j["reference_calibrated"] = {{"tg128", cm.rest().reference_bench.decode_tps},
                                 {"pp512", cm.rest().reference_bench.prefill_tps}};
    json f = json::object();
    for (const auto& [t, k] : cm.factors()) f[t] = {{"decode", k.decode_us}, {"prefill", k.prefill_us}};
    j["probe_factors"] = f;
    j["llama_bench_reps"] = o.reps;
    j["rounds"] = o.bench ? o.rounds : 0;
    j["files"] = rows;
    if (o.ctx > 0) j["memory_ctx"] = o.ctx, j["kv_type"] = o.kv_type.empty() ? "f16" : o.kv_type;
    fail_if(write_json(o.out, j));
  }
}

void add_speed(CLI::App& app) {
  auto o = std::make_shared<SpeedOpts>();
  auto* c = app.add_subcommand("speed", "predict files' tokens/s on this machine (or --pool: the speed table for solve)");
  c->add_option("files", o->files, "GGUF files of one model");
  c->add_option("--pool", o->pool, "write the pool's speed table (gamma.speed) instead; files given beside it are priced at their own types too");
  c->add_option("--reference", o->reference, "the file llama-bench measures the rest of the graph on (default: the first file, or the pool's source)");
  c->add_flag("--bench", o->bench, "also measure each file with llama-bench and print the prediction's error");
  c->add_option("--rounds", o->rounds, "with --bench: llama-bench rounds over all files, each file's median ratio to the reference beside it kept")->capture_default_str();
  c->add_option("--reps", o->reps, "llama-bench repetitions")->capture_default_str();
  c->add_option("-o,--out", o->out, "JSON output");
  c->add_option("--llama-bin", o->llama_bin, "directory of llama-bench (default: $GAMMA_LLAMA_BIN, else beside gamma)");
  c->add_option("--ctx", o->ctx, "also each file's memory as llama.cpp allocates it with this many tokens of context, beside what gamma solve --memory predicts");
  c->add_option("--kv-type", o->kv_type, "with --ctx: the KV cache's type (default f16)");
  c->add_flag("--memory-only", o->memory_only, "with --ctx: only the memory (no kernel timing, no llama-bench)");
  c->add_option("-t,--threads", o->threads, "threads (default: all cores)");
  c->callback([o] {
    if (o->reps < 1 || o->rounds < 1) throw Failure("--reps and --rounds must be positive");
    speed::CostModel cm = value_or_fail(speed::CostModel::open(resolve_threads(o->threads)));
    if (!o->pool.empty())
      run_pool(*o, cm);
    else
      run_files(*o, cm);
  });
}

}  // namespace
GAMMA_COMMAND(85, add_speed);
}  // namespace gm::cli
