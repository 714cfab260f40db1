#include "eval/tasks.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/data.h"
#include "util/parallel.h"
#include "util/progress.h"

namespace gm::eval {
namespace {

bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string stem(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.size() > 6 && base.compare(base.size() - 6, 6, ".jsonl") == 0) base.resize(base.size() - 6);
  return base;
}

// Python's str.rstrip() set for ASCII.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Characters as Python's len() counts them (code points of UTF-8 text).
size_t utf8_len(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

Result<std::vector<std::string>> string_array(const nlohmann::json& j, const char* key, size_t min_size) {
  auto it = j.find(key);
  if (it == j.end()) return Status::errorf("missing \"{}\"", key);
  if (!it->is_array()) return Status::errorf("\"{}\" is not an array", key);
  if (it->size() < min_size) return Status::errorf("\"{}\" has {} entries, need at least {}", key, it->size(), min_size);
  std::vector<std::string> out;
  for (const auto& e : *it) {
    if (!e.is_string()) return Status::errorf("\"{}\" holds a non-string", key);
    out.push_back(e.get<std::string>());
  }
  return out;
}

Result<McItem> parse_item(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::error("not valid JSON");
  if (!j.is_object()) return Status::error("not a JSON object");
  McItem item;
  if (j.contains("choices")) {
    GAMMA_ASSIGN_OR_RETURN(item.continuations, string_array(j, "choices", 2));
    auto q = j.find("query");
    if (q == j.end() || !q->is_string()) return Status::error("missing string \"query\"");
    item.contexts = {q->get<std::string>()};
    for (const auto& c : item.continuations)
      if (c.empty()) return Status::error("empty choice");
  } else if (j.contains("context_options")) {
    GAMMA_ASSIGN_OR_RETURN(item.contexts, string_array(j, "context_options", 2));
    auto c = j.find("continuation");
    if (c == j.end() || !c->is_string() || c->get<std::string>().empty())
      return Status::error("missing non-empty string \"continuation\"");
    item.continuations = {c->get<std::string>()};
  } else {
    return Status::error("neither \"query\"/\"choices\" nor \"context_options\"/\"continuation\"");
  }
  auto g = j.find("gold");
  if (g == j.end() || !g->is_number_integer()) return Status::error("missing integer \"gold\"");
  const int64_t gold = g->get<int64_t>();
  if (gold < 0 || gold >= item.n_options())
    return Status::errorf("\"gold\" {} out of range for {} options", gold, item.n_options());
  item.gold = int(gold);
  return item;
}

// One option of one item, tokenized.
struct Request {
  std::vector<llama_token> tokens;  // context + continuation
  int cont_start = 0;               // first continuation token
  double loglik = 0;
};

// lm-eval's _encode_pair: whole = tok(ctx + cont); ctx_enc = tok(ctx); cont = whole[len(ctx_enc):].
Result<Request> encode(const llama::LlamaModel& model, std::string context, std::string continuation) {
  size_t keep = context.size();
  while (keep > 0 && is_space(context[keep - 1])) --keep;
  continuation = context.substr(keep) + continuation;
  context.resize(keep);
  GAMMA_ASSIGN_OR_RETURN(auto whole, model.tokenize(context + continuation, true));
  GAMMA_ASSIGN_OR_RETURN(auto ctx_enc, model.tokenize(context, true));
  Request r;
  if (ctx_enc.empty()) {
    // Nothing to condition on (no BOS, empty context): lm-eval conditions on the EOT token.
    llama_token t = model.bos() != LLAMA_TOKEN_NULL ? model.bos() : llama_vocab_eos(model.vocab());
    ctx_enc = {t};
    whole.insert(whole.begin(), t);
  }
  if (whole.size() > ctx_enc.size()) {
    r.tokens = std::move(whole);
  } else {
    // The merged tokenization swallowed the continuation: score it tokenized on its own.
    GAMMA_ASSIGN_OR_RETURN(auto cont, model.tokenize(continuation, false));
    if (cont.empty()) return Status::error("continuation tokenizes to nothing");
    r.tokens = ctx_enc;
    r.tokens.insert(r.tokens.end(), cont.begin(), cont.end());
  }
  r.cont_start = int(ctx_enc.size());
  return r;
}

struct ItemPlan {
  std::vector<Request> options;
  int shared = 0;  // tokens common to every option (decoded once for all of them)
  int n_tokens() const {
    int n = shared;
    for (const auto& o : options) n += int(o.tokens.size()) - shared;
    return n;
  }
};

}  // namespace

std::string default_tasks_dir() { return shared_data_dir() + "/tasks"; }

Result<std::string> resolve_task(const std::string& name_or_path, const std::string& tasks_dir) {
  if (name_or_path.empty()) return Status::error("empty task name");
  if (is_file(name_or_path)) return name_or_path;
  const bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                               (name_or_path.size() > 6 && name_or_path.compare(name_or_path.size() - 6, 6, ".jsonl") == 0);
  if (!looks_like_path) {
    std::string p = tasks_dir + "/" + name_or_path + ".jsonl";
    if (is_file(p)) return p;
    return Status::errorf("unknown task '{}': no file {} (give a .jsonl path or set --tasks-dir)", name_or_path, p);
  }
  return Status::errorf("task file not found: {}", name_or_path);
}

std::string default_delimiter(const std::string& name) {
  // llm-foundry's tasks_v0.3.yaml continuation_delimiter for these; its default otherwise.
  static const char* answer_tasks[] = {"arc_easy", "arc_challenge", "piqa", "boolq", "mmlu"};
  for (const char* t : answer_tasks)
    if (name == t) return "\nAnswer: ";
  return " ";
}

Result<McTask> load_task(const std::string& path, const std::optional<std::string>& delimiter, int limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf("cannot read task file {}", path);
  McTask task;
  task.path = path;
  task.name = stem(path);
  task.delimiter = delimiter ? *delimiter : default_delimiter(task.name);
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (std::all_of(line.begin(), line.end(), is_space)) continue;
    auto item = parse_item(line);
    if (!item) return item.status().with_context(fmt::format("{}:{}", path, lineno));
    ++task.n_in_file;
    if (limit <= 0 || int(task.items.size()) < limit) task.items.push_back(std::move(item.value()));
  }
  if (in.bad()) return Status::errorf("error reading {}", path);
  if (task.items.empty()) return Status::errorf("{}: no items", path);
  return task;
}

double mean_stderr(const std::vector<double>& x) {
  const size_t n = x.size();
  if (n < 2) return 0;
  double mu = 0;
  for (double v : x) mu += v;
  mu /= n;
  double ss = 0;
  for (double v : x) ss += (v - mu) * (v - mu);
  return std::sqrt(ss / (n - 1)) / std::sqrt(double(n));
}

Result<McResult> score_task(const llama::LlamaModel& model, const McTask& task, const McOptions& opt,
                            Progress* progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n_vocab = model.n_vocab();
  const int threads = resolve_threads(opt.n_threads);

  // Tokenize every option first: it sizes the context and catches problems before decoding.
  std::vector<ItemPlan> plans(task.items.size());
  int max_item = 0, max_opts = 0;
  for (size_t i = 0; i < task.items.size(); ++i) {
    const McItem& item = task.items[i];
    ItemPlan& p = plans[i];
    for (int o = 0; o < item.n_options(); ++o) {
      auto r = encode(model, item.context(o) + task.delimiter, item.continuation(o));
      if (!r) return r.status().with_context(fmt::format("{} item {} option {}", task.name, i + 1, o));
      p.options.push_back(std::move(r.value()));
    }
    size_t lcp = p.options[0].tokens.size();
    for (const auto& o : p.options) {
      size_t k = 0;
      while (k < lcp && k < o.tokens.size() && o.tokens[k] == p.options[0].tokens[k]) ++k;
      lcp = k;
    }
    p.shared = int(lcp);
    max_item = std::max(max_item, p.n_tokens());
    max_opts = std::max(max_opts, int(p.options.size()));
  }
  if (max_opts > opt.n_seq)
    return Status::errorf("{}: an item has {} options, more than the {} sequences per batch", task.name, max_opts,
                          opt.n_seq);
  const int n_batch = std::max(opt.n_batch, max_item);

  llama::ContextOptions co;
  co.n_ctx = n_batch;
  co.n_batch = n_batch;
  co.n_seq = opt.n_seq;
  co.n_threads = opt.n_threads;
  co.kv_unified = true;  // options of one item share their prefix cells
  GAMMA_ASSIGN_OR_RETURN(auto ctx, llama::LlamaContext::create(model, co));
  llama::Batch batch(n_batch, max_opts);

  McResult res;
  struct Need {
    int item, option, out_row;
    llama_token tok;
  };
  std::vector<Need> needs;
  std::vector<int> out_row_of;  // batch index -> output row, -1 if none
  std::vector<double> lp;
  std::vector<llama_seq_id> seqs(max_opts);

  size_t next = 0;
  while (next < plans.size()) {
    // Pack whole items while tokens and sequences fit.
    size_t end = next;
    int tokens = 0, n_seqs = 0;
    while (end < plans.size() && tokens + plans[end].n_tokens() <= n_batch &&
           n_seqs + int(plans[end].options.size()) <= opt.n_seq) {
      tokens += plans[end].n_tokens();
      n_seqs += int(plans[end].options.size());
      ++end;
    }
    batch.clear();
    needs.clear();
    out_row_of.clear();
    int n_out = 0;
    int seq_base = 0;
    for (size_t it = next; it < end; ++it) {
      const ItemPlan& p = plans[it];
      const int n_opt = int(p.options.size());
      // Logits at position q predict token q+1; option o needs q in [cont_start-1, size-2].
      auto needed = [&](int o, int q) {
        const Request& r = p.options[o];
        return q >= r.cont_start - 1 && q <= int(r.tokens.size()) - 2;
      };
      std::vector<int> shared_idx(p.shared);
      for (int o = 0; o < n_opt; ++o) seqs[o] = seq_base + o;
      for (int q = 0; q < p.shared; ++q) {
        bool out = false;
        for (int o = 0; o < n_opt; ++o) out = out || needed(o, q);
        shared_idx[q] = batch.add(p.options[0].tokens[q], q, seqs.data(), n_opt, out);
        out_row_of.push_back(out ? n_out++ : -1);
      }
      for (int o = 0; o < n_opt; ++o) {
        const Request& r = p.options[o];
        std::vector<int> idx(r.tokens.size());
        for (int q = 0; q < p.shared; ++q) idx[q] = shared_idx[q];
        for (int q = p.shared; q < int(r.tokens.size()); ++q) {
          const bool out = needed(o, q);
          idx[q] = batch.add(r.tokens[q], q, seq_base + o, out);
          out_row_of.push_back(out ? n_out++ : -1);
        }
        for (int q = r.cont_start; q < int(r.tokens.size()); ++q)
          needs.push_back({int(it), o, out_row_of[idx[q - 1]], r.tokens[q]});
      }
      seq_base += n_opt;
    }
    ctx->clear_memory();
    GAMMA_RETURN_IF_ERROR(ctx->decode(batch.get()));
    const float* logits = llama_get_logits(ctx->get());
    lp.assign(needs.size(), 0.0);
    parallel_for(int64_t(needs.size()), threads, 4, [&](int64_t k, int) {
      const float* row = logits + size_t(needs[k].out_row) * n_vocab;
      float mx = row[0];
      for (int v = 1; v < n_vocab; ++v) mx = std::max(mx, row[v]);
      double sum = 0;
      for (int v = 0; v < n_vocab; ++v) sum += expf(row[v] - mx);
      lp[k] = double(row[needs[k].tok] - mx) - std::log(sum);
    });
    for (size_t k = 0; k < needs.size(); ++k) plans[needs[k].item].options[needs[k].option].loglik += lp[k];
    res.n_tokens += uint64_t(batch.size());
    next = end;
    if (progress) progress->update(int64_t(next));
  }

  std::vector<double> acc, acc_norm;
  for (size_t i = 0; i < plans.size(); ++i) {
    const McItem& item = task.items[i];
    const ItemPlan& p = plans[i];
    int best = 0, best_norm = 0;
    double bn = 0;
    std::vector<double> lls;
    for (int o = 0; o < int(p.options.size()); ++o) {
      const double ll = p.options[o].loglik;
      const double norm = ll / double(std::max<size_t>(1, utf8_len(item.continuation(o))));
      lls.push_back(ll);
      if (o == 0 || ll > lls[best]) best = o;
      if (o == 0 || norm > bn) {
        bn = norm;
        best_norm = o;
      }
    }
    acc.push_back(best == item.gold ? 1.0 : 0.0);
    acc_norm.push_back(best_norm == item.gold ? 1.0 : 0.0);
    res.correct += best == item.gold ? '1' : '0';
    res.correct_norm += best_norm == item.gold ? '1' : '0';
    res.loglik.push_back(std::move(lls));
  }
  res.n = int(acc.size());
  for (double v : acc) res.acc += v;
  for (double v : acc_norm) res.acc_norm += v;
  res.acc /= res.n;
  res.acc_norm /= res.n;
  res.acc_stderr = mean_stderr(acc);
  res.acc_norm_stderr = mean_stderr(acc_norm);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace gm::eval
