#include "eval/plan_kld.h"

#include <filesystem>

#include "emit/emit.h"
#include "eval/eval.h"

namespace gm::eval {

Result<double> plan_kld(const PlanKldRequest& r, const Plan& plan) {
  GAMMA_ASSIGN_OR_RETURN(EmitResult er, emit(r.pool, plan, r.gguf, r.threads, r.input ? r.first_layer : 0));
  EvalRequest q;
  q.model = r.gguf;
  q.teacher = r.teacher;
  q.kld_base = r.kld_base;
  q.text = r.text;
  q.n_ctx = r.n_ctx;
  q.n_chunks = r.chunks;
  q.n_threads = r.threads;
  q.progress = false;
  q.n_batch = r.n_batch;
  q.capture = r.capture;
  q.input = r.input;
  q.input_boundary = r.input ? r.first_layer : 0;
  auto res = run_eval(q);
  std::error_code ec;
  std::filesystem::remove(r.gguf, ec);
  std::filesystem::remove(er.tensor_types_path, ec);
  if (!res.is_ok()) return res.status();
  if (!res->kld || !res->kld->mean) return Status::errorf("the evaluation of {} gave no KLD", r.gguf);
  return *res->kld->mean;
}

}  // namespace gm::eval
