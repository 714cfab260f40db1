// The LibTorch decoder layer against libllama (teacher-forced, every layer, and the head),
// for llama (stories260K) and synthetic qwen2 / qwen3 / gemma3 variants of it that exercise NEOX
// RoPE, q/k/v biases, QK-norm, a GGUF rope theta, and gemma3's scaled embeddings, post-norms,
// GeGLU and sliding-window layers with their own RoPE base; and the teacher activation cache.
#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ggml.h"
#include "gguf.h"
#include "gguf_model/model.h"
#include "llama/log.h"
#include "decoder/activations.h"
#include "decoder/blas.h"
#include "decoder/hparams.h"
#include "decoder/llama_runner.h"
#include "decoder/verify.h"
#include "tests/testing.h"
#include "util/files.h"

namespace fs = std::filesystem;
using namespace gm;
using gm::testing::TempDir;

namespace {

const bool quiet_logs = (gm::llama::capture_logs(), true);

std::vector<int32_t> story_tokens(const std::string& gguf, int n) {
  auto runner = LlamaRunner::open(gguf, 16, 1);
  EXPECT_TRUE(runner.is_ok()) << runner.status().message();
  auto text = read_file(gm::testing::shared_data("text/tinystories-valid-prefix.txt"));
  EXPECT_TRUE(text.is_ok());
  auto toks = (*runner)->tokenize(text->substr(0, 20000));
  EXPECT_TRUE(toks.is_ok());
  std::vector<int32_t> out(toks->begin(), toks->begin() + n);
  if ((*runner)->bos() >= 0) out[0] = (*runner)->bos();
  return out;
}

// Copies a scalar key under a new name.
void copy_key(gguf_context* dst, const gguf_context* src, int64_t id, const std::string& name) {
  switch (gguf_get_kv_type(src, id)) {
    case GGUF_TYPE_UINT32: gguf_set_val_u32(dst, name.c_str(), gguf_get_val_u32(src, id)); break;
    case GGUF_TYPE_INT32: gguf_set_val_i32(dst, name.c_str(), gguf_get_val_i32(src, id)); break;
    case GGUF_TYPE_FLOAT32: gguf_set_val_f32(dst, name.c_str(), gguf_get_val_f32(src, id)); break;
    case GGUF_TYPE_UINT64: gguf_set_val_u64(dst, name.c_str(), gguf_get_val_u64(src, id)); break;
    default: FAIL() << "unexpected key type for " << name;
  }
}

// stories260K rewritten as `arch` (qwen2: random q/k/v biases; qwen3: random QK-norm
// weights; gemma3: those and random post-norms, a sliding window of 8 tokens on every other
// layer, RoPE base 1e4 there), rope theta 1e6 from the GGUF, so every arch-specific path of the
// layer is tested against libllama without downloading a real Qwen or Gemma.
std::string make_variant(const TempDir& dir, const std::string& arch) {
  ggml_context* data = nullptr;
  gguf_init_params ip{/*no_alloc=*/false, &data};
  gguf_context* src = gguf_init_from_file(gm::testing::stories260k().c_str(), ip);
  EXPECT_NE(src, nullptr);
  gguf_context* dst = gguf_init_empty();
  gguf_set_kv(dst, src);
  for (int64_t i = 0; i < gguf_get_n_kv(src); ++i) {
    std::string k = gguf_get_key(src, i);
    if (k.rfind("llama.", 0) == 0) {
      copy_key(dst, src, i, arch + k.substr(5));
      gguf_remove_key(dst, k.c_str());
    }
  }
  gguf_set_val_str(dst, "general.architecture", arch.c_str());
  gguf_set_val_f32(dst, (arch + ".rope.freq_base").c_str(), 1e6f);
  if (arch == "gemma3") {
    gguf_set_val_u32(dst, "gemma3.attention.sliding_window", 8);
    gguf_set_val_u32(dst, "gemma3.attention.sliding_window_pattern", 2);
    gguf_set_val_f32(dst, "gemma3.rope.freq_base_swa", 1e4f);
  }
  const int64_t n_layer = gguf_get_val_u32(dst, gguf_find_key(dst, (arch + ".block_count").c_str()));
  const int64_t n_embd = gguf_get_val_u32(dst, gguf_find_key(dst, (arch + ".embedding_length").c_str()));
  const int64_t n_head = gguf_get_val_u32(dst, gguf_find_key(dst, (arch + ".attention.head_count").c_str()));
  const int64_t n_head_kv = gguf_get_val_u32(dst, gguf_find_key(dst, (arch + ".attention.head_count_kv").c_str()));
  const int64_t hd = n_embd / n_head;
  for (int64_t i = 0; i < gguf_get_n_tensors(src); ++i)
    gguf_add_tensor(dst, ggml_get_tensor(data, gguf_get_tensor_name(src, i)));
  ggml_init_params gp{size_t(64) << 20, nullptr, false};
  ggml_context* extra = ggml_init(gp);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto add = [&](const std::string& name, int64_t n, float mean, float sd) {
    ggml_tensor* t = ggml_new_tensor_1d(extra, GGML_TYPE_F32, n);
    ggml_set_name(t, name.c_str());
    for (int64_t j = 0; j < n; ++j) static_cast<float*>(t->data)[j] = mean + sd * nd(rng);
    gguf_add_tensor(dst, t);
  };
  for (int64_t il = 0; il < n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    if (arch == "qwen2") {
      add(p + "attn_q.bias", n_head * hd, 0.0f, 0.3f);
      add(p + "attn_k.bias", n_head_kv * hd, 0.0f, 0.3f);
      add(p + "attn_v.bias", n_head_kv * hd, 0.0f, 0.3f);
    } else {
      add(p + "attn_q_norm.weight", hd, 1.0f, 0.2f);
      add(p + "attn_k_norm.weight", hd, 1.0f, 0.2f);
    }
    if (arch == "gemma3") {
      add(p + "post_attention_norm.weight", n_embd, 1.0f, 0.2f);
      add(p + "post_ffw_norm.weight", n_embd, 1.0f, 0.2f);
    }
  }
  const std::string path = dir / (arch + ".gguf");
  EXPECT_TRUE(gguf_write_to_file(dst, path.c_str(), false));
  gguf_free(dst);
  gguf_free(src);
  ggml_free(data);
  ggml_free(extra);
  return path;
}

void expect_match(const std::string& gguf, const std::vector<int32_t>& toks, const std::string& label) {
  auto r = verify_against_llama(gguf, toks, 2);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::printf("[%s] %s\n", label.c_str(), r->to_json().dump().c_str());
  EXPECT_LT(r->embd_rel_err, 1e-6);
  for (size_t il = 0; il < r->layer_rel_err.size(); ++il) {
    EXPECT_LT(r->layer_rel_err[il], 1e-4) << label << " layer " << il;
    EXPECT_LT(r->layer_max_err[il], 1e-4) << label << " layer " << il;
  }
  EXPECT_LT(r->logit_rel_err, 1e-4) << label;
  EXPECT_LT(r->logit_max_err, 1e-4) << label;
}

}  // namespace

TEST(Model, HParamsOfStories260K) {
  auto m = Model::open(gm::testing::stories260k());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto hp = read_hparams(**m);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  EXPECT_EQ(hp->arch, "llama");
  EXPECT_EQ(hp->n_layer, 5);
  EXPECT_EQ(hp->n_embd, 64);
  EXPECT_EQ(hp->n_head, 8);
  EXPECT_EQ(hp->n_head_kv, 4);
  EXPECT_EQ(hp->head_dim, 8);
  EXPECT_EQ(hp->n_vocab, 512);
  EXPECT_TRUE(hp->rope_type == RopeType::kNorm);
  EXPECT_FALSE(hp->qk_norm);
  EXPECT_FLOAT_EQ(hp->kq_scale, 1.0f / std::sqrt(8.0f));
}

TEST(Model, LayerMatchesLibllamaLlama) {
  const auto toks = story_tokens(gm::testing::stories260k(), 128);
  expect_match(gm::testing::stories260k(), toks, "llama stories260K");
}

TEST(Model, LayerMatchesLibllamaQwen2AndQwen3) {
  TempDir dir;
  const auto toks = story_tokens(gm::testing::stories260k(), 128);
  for (const std::string arch : {"qwen2", "qwen3"}) {
    const std::string path = make_variant(dir, arch);
    auto m = Model::open(path);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    auto hp = read_hparams(**m);
    ASSERT_TRUE(hp.is_ok()) << hp.status().message();
    EXPECT_TRUE(hp->rope_type == RopeType::kNeox);
    EXPECT_FLOAT_EQ(hp->rope_freq_base, 1e6f);
    EXPECT_EQ(hp->qk_norm, arch == "qwen3");
    expect_match(path, toks, arch + " variant");
  }
}

TEST(Model, LayerMatchesLibllamaGemma3) {
  TempDir dir;
  const auto toks = story_tokens(gm::testing::stories260k(), 128);
  const std::string path = make_variant(dir, "gemma3");
  auto m = Model::open(path);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto hp = read_hparams(**m);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  EXPECT_TRUE(hp->rope_type == RopeType::kNeox);
  EXPECT_TRUE(hp->qk_norm && hp->post_norms && hp->ffn_act == FfnAct::kGeluTanh);
  EXPECT_FLOAT_EQ(hp->embd_scale, 8.0f);  // sqrt(64)
  EXPECT_EQ(hp->n_swa, 8);
  EXPECT_EQ(hp->swa_layers, (std::vector<bool>{true, false, true, false, true}));
  expect_match(path, toks, "gemma3 variant");
  // Each gemma3 part is needed to match: without the window, the local RoPE base, the
  // post-norms or the GELU table, the layers drift far above the 1e-4 match.
  const std::vector<std::pair<std::string, std::function<void(HParams&)>>> wrong = {
      {"no sliding window", [](HParams& h) { h.n_swa = 0; }},
      {"global RoPE base on local layers", [](HParams& h) { h.rope_freq_base_swa = h.rope_freq_base; }},
      {"no post-norms", [](HParams& h) { h.post_norms = false; }},
      {"SwiGLU", [](HParams& h) { h.ffn_act = FfnAct::kSilu; }},
  };
  for (const auto& [label, tweak] : wrong) {
    auto r = verify_against_llama(path, toks, 2, tweak);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_GT(*std::max_element(r->layer_rel_err.begin(), r->layer_rel_err.end()), 1e-3) << label;
  }
}

TEST(Model, WrongRopeTypeWouldBeCaught) {
  // The match test is only meaningful if a wrong layer fails it: the qwen2 variant computed
  // with llama's NORM RoPE must be far off.
  TempDir dir;
  const std::string path = make_variant(dir, "qwen2");
  const auto toks = story_tokens(gm::testing::stories260k(), 64);
  auto r = verify_against_llama(path, toks, 2, [](HParams& h) { h.rope_type = RopeType::kNorm; });
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_GT(r->layer_rel_err[0], 1e-3);
}

TEST(Model, BadInputsFailWithOneLine) {
  TempDir dir;
  const std::string junk = dir / "junk.gguf";
  std::ofstream(junk) << "not a gguf at all";
  auto r = verify_against_llama(junk, {1, 2, 3}, 1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  auto r2 = verify_against_llama(gm::testing::stories260k(), {1, 99999}, 1);
  ASSERT_FALSE(r2.is_ok());
  EXPECT_NE(r2.status().message().find("vocabulary"), std::string::npos) << r2.status().message();
}

// A calibration of `n_seq` sequences of 64 tokens of stories260K, cached under `root`.
CalibOptions small_calib(int n_seq, const std::string& root) {
  CalibOptions opt;
  opt.calib_tokens = n_seq * 64;
  opt.seq_len = 64;
  opt.n_threads = 2;
  opt.quiet = true;
  opt.cache_root = root;
  return opt;
}

TEST(Model, ActivationCacheMatchesLibllamaAndResumes) {
  TempDir dir;
  CalibOptions opt = small_calib(4, dir / "a");
  auto c = ActivationCache::open_or_build(gm::testing::stories260k(), opt);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const auto& cache = **c;
  ASSERT_EQ(cache.n_seq(), 4);
  ASSERT_EQ(cache.n_layer(), 5);
  // Half the sequences from each default file, each starting with BOS.
  auto runner = LlamaRunner::open(gm::testing::stories260k(), 64, 2);
  ASSERT_TRUE(runner.is_ok());
  EXPECT_EQ(cache.tokens()[0], (*runner)->bos());
  // Boundary b of sequence 2 equals libllama's hidden state up to F16 rounding.
  std::vector<int32_t> seq(cache.tokens().begin() + 2 * 64, cache.tokens().begin() + 3 * 64);
  LlamaRunner::Capture cap;
  ASSERT_TRUE((*runner)->run(seq, &cap, true, false).is_ok());
  std::vector<float> got(64 * 64);
  for (int b = 0; b <= 5; ++b) {
    ASSERT_TRUE(cache.read(b, {2}, got.data()).is_ok());
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      num += (got[i] - cap.hidden[size_t(b)][i]) * (got[i] - cap.hidden[size_t(b)][i]);
      den += cap.hidden[size_t(b)][i] * cap.hidden[size_t(b)][i];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-3) << "boundary " << b;
  }
  EXPECT_FALSE(cache.read(6, {0}, got.data()).is_ok());
  EXPECT_FALSE(cache.read(0, {4}, got.data()).is_ok());

  // Reopening reuses it; another seq_len is another key.
  auto again = ActivationCache::open_or_build(gm::testing::stories260k(), opt);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->dir(), cache.dir());
  CalibOptions other = opt;
  other.seq_len = 32;
  auto c2 = ActivationCache::open_or_build(gm::testing::stories260k(), other);
  ASSERT_TRUE(c2.is_ok());
  EXPECT_NE((*c2)->dir(), cache.dir());

  // Resume: a .partial copy claiming 2 finished sequences, with sequence 0 marked: the rerun
  // keeps sequences 0-1 as they are and computes 2-3.
  CalibOptions res = opt;
  res.cache_root = dir / "b";
  const std::string part = res.cache_root + "/" + cache.key() + ".partial";
  fs::create_directories(part);
  const uint64_t seq_bytes = 64 * 64 * 2;
  for (int b = 0; b <= 5; ++b) {
    const std::string name = "/h" + std::to_string(b) + ".bin";
    auto bytes = read_file(cache.dir() + name);
    ASSERT_TRUE(bytes.is_ok());
    std::string s = *bytes;
    std::memset(&s[0], 0, 16);                               // the mark in sequence 0
    std::memset(&s[2 * seq_bytes], 0x7b, 2 * seq_bytes);     // garbage where 2-3 go
    ASSERT_TRUE(write_file_atomic(part + name, s).is_ok());
  }
  ASSERT_TRUE(write_file_atomic(part + "/done", "2").is_ok());
  auto c3 = ActivationCache::open_or_build(gm::testing::stories260k(), res);
  ASSERT_TRUE(c3.is_ok()) << c3.status().message();
  EXPECT_FALSE(fs::exists(part));
  for (int b = 0; b <= 5; ++b) {
    const std::string name = "/h" + std::to_string(b) + ".bin";
    auto want = read_file(cache.dir() + name);
    auto have = read_file((*c3)->dir() + name);
    ASSERT_TRUE(want.is_ok() && have.is_ok());
    EXPECT_EQ(have->substr(0, 16), std::string(16, '\0')) << "sequence 0 was recomputed";
    EXPECT_EQ(have->substr(16), want->substr(16)) << "boundary " << b;
  }

  // Too little text for the sequences asked for: one-line error, nothing published.
  CalibOptions small = opt;
  small.cache_root = dir / "c";
  small.text_files = {dir / "tiny.txt"};
  ASSERT_TRUE(write_file_atomic(small.text_files[0], "Once upon a time.\n").is_ok());
  auto bad = ActivationCache::open_or_build(gm::testing::stories260k(), small);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("too short"), std::string::npos) << bad.status().message();
}

// A finished job drops the activation entries it made (gamma run, once its scorers are ready):
// never while another process builds or opens the entry (the builders' lock, shared by readers
// while they open it), and a reader that opened it keeps reading; the next open builds it again.
TEST(Model, ActivationCacheIsDroppedOnlyWhenNoOneHoldsIt) {
  TempDir dir;
  CalibOptions opt = small_calib(2, dir / "a");
  auto c = ActivationCache::open_or_build(gm::testing::stories260k(), opt);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const std::string key = (*c)->key(), entry = (*c)->dir();
  EXPECT_EQ(activation_cache_keys(opt.cache_root), std::vector<std::string>{key});
  std::vector<float> before(64 * 64), after(64 * 64);
  ASSERT_TRUE((*c)->read(3, {1}, before.data()).is_ok());
  {
    auto reader = FileLock::acquire_shared(entry + ".lock");  // as open_or_build holds it while opening
    ASSERT_TRUE(reader.is_ok());
    auto held = drop_activation_cache(opt.cache_root, key);
    ASSERT_TRUE(held.is_ok()) << held.status().message();
    EXPECT_FALSE(*held);
    EXPECT_TRUE(fs::exists(entry + "/meta.json"));
  }
  auto dropped = drop_activation_cache(opt.cache_root, key);
  ASSERT_TRUE(dropped.is_ok()) << dropped.status().message();
  EXPECT_TRUE(*dropped);
  EXPECT_FALSE(fs::exists(entry));
  EXPECT_TRUE(activation_cache_keys(opt.cache_root).empty());
  ASSERT_TRUE((*c)->read(3, {1}, after.data()).is_ok());  // opened before: its files are still its own
  EXPECT_EQ(before, after);
  EXPECT_FALSE(*drop_activation_cache(opt.cache_root, key));    // none there
  EXPECT_FALSE(*drop_activation_cache(opt.cache_root, "../a"));  // not a key
  auto rebuilt = ActivationCache::open_or_build(gm::testing::stories260k(), opt);
  ASSERT_TRUE(rebuilt.is_ok()) << rebuilt.status().message();
  EXPECT_EQ((*rebuilt)->dir(), entry);
  ASSERT_TRUE((*rebuilt)->read(3, {1}, after.data()).is_ok());
  EXPECT_EQ(before, after);
}

// A layer-sharded job's rank needs only the boundaries of its layers: an entry built for a
// range holds just those files, a later range adds the rest to the same entry, a part copied
// from another machine is read as it is, and every file equals the whole cache's.
TEST(Model, ActivationCacheByRanges) {
  TempDir dir;
  CalibOptions opt = small_calib(3, dir / "whole");
  auto whole = ActivationCache::open_or_build(gm::testing::stories260k(), opt);
  ASSERT_TRUE(whole.is_ok()) << whole.status().message();
  const std::string key = (*whole)->key();
  auto h = [](const std::string& d, int b) { return d + "/h" + std::to_string(b) + ".bin"; };

  CalibOptions r = opt;
  r.cache_root = dir / "ranged";
  r.first_boundary = 0;
  r.last_boundary = 2;
  auto lo = ActivationCache::open_or_build(gm::testing::stories260k(), r);
  ASSERT_TRUE(lo.is_ok()) << lo.status().message();
  EXPECT_EQ((*lo)->key(), key);
  for (int b = 0; b <= 5; ++b) EXPECT_EQ(fs::exists(h((*lo)->dir(), b)), b <= 2) << b;
  std::vector<float> x(64 * 64);
  EXPECT_TRUE((*lo)->read(2, {1}, x.data()).is_ok());
  auto outside = (*lo)->read(3, {1}, x.data());
  ASSERT_FALSE(outside.is_ok());
  EXPECT_NE(outside.message().find("not in this activation cache's part (0..2)"), std::string::npos) << outside.message();
  r.first_boundary = 2;
  r.last_boundary = -1;
  auto hi = ActivationCache::open_or_build(gm::testing::stories260k(), r);
  ASSERT_TRUE(hi.is_ok()) << hi.status().message();
  EXPECT_EQ((*hi)->dir(), (*lo)->dir());
  EXPECT_FALSE(fs::exists((*hi)->dir() + ".partial"));
  for (int b = 0; b <= 5; ++b) EXPECT_EQ(*read_file(h((*hi)->dir(), b)), *read_file(h((*whole)->dir(), b))) << b;

  // A part copied from elsewhere (meta, tokens and boundaries 3..4) is used as it is.
  const std::string copy = dir / "copy" + "/" + key;
  fs::create_directories(copy);
  for (const std::string f : {"/meta.json", "/tokens.bin", "/h3.bin", "/h4.bin"})
    fs::copy_file((*whole)->dir() + f, copy + f);
  std::string marked = *read_file(h(copy, 3));
  marked[0] ^= 1;
  ASSERT_TRUE(write_file_atomic(h(copy, 3), marked).is_ok());
  CalibOptions c = opt;
  c.cache_root = dir / "copy";
  c.first_boundary = 3;
  c.last_boundary = 4;
  auto part = ActivationCache::open_or_build(gm::testing::stories260k(), c);
  ASSERT_TRUE(part.is_ok()) << part.status().message();
  EXPECT_EQ(*read_file(h(copy, 3)), marked) << "the copied part was not rebuilt";
  EXPECT_FALSE(fs::exists(h(copy, 2)));

  for (auto [a, b] : {std::pair{3, 2}, std::pair{-1, 2}, std::pair{0, 6}}) {
    c.first_boundary = a;
    c.last_boundary = b;
    auto bad = ActivationCache::open_or_build(gm::testing::stories260k(), c);
    ASSERT_FALSE(bad.is_ok()) << a << ".." << b;
    EXPECT_NE(bad.status().message().find("outside the teacher's 0..5"), std::string::npos) << bad.status().message();
  }
}

// OpenBLAS's kernel choice (decoder/blas.h): an older set than the CPU runs is replaced, the
// library's own modern choice stays, and a CPU without AVX2 or a BLAS that is not OpenBLAS is left alone.
TEST(Blas, BetterKernelOnlyReplacesAnOlderSet) {
  const gm::CpuVectorUnits avx512{true, true}, avx2{true, false}, old{false, false};
  EXPECT_EQ(gm::better_blas_kernel("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(gm::better_blas_kernel("Prescott", avx2), "Haswell");
  EXPECT_EQ(gm::better_blas_kernel("Nehalem", avx2), "Haswell");
  EXPECT_EQ(gm::better_blas_kernel("Sandybridge", avx512), "SkylakeX");
  EXPECT_EQ(gm::better_blas_kernel("Prescott", old), "");
  for (const char* k : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SAPPHIRERAPIDS"})
    EXPECT_EQ(gm::better_blas_kernel(k, avx512), "") << k;
  EXPECT_EQ(gm::better_blas_kernel("", avx512), "");
}

// gamma-learn runs the kernels this CPU can use, whatever OpenBLAS picked when it loaded (on the
// project's Xeon it picked Prescott: 5x slower sgemm); a kernel the user sets stays.
TEST(Blas, GammaLearnRunsTheCpusKernels) {
  const std::string learn = (fs::path(gm::testing::gamma_cli()).parent_path() / "gamma-learn").string();
  auto kernel = [&](const std::string& env) {
    auto r = gm::testing::run(env + " " + learn + " --blas-kernel");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::string k = r.output;
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r')) k.pop_back();
    return k;
  };
  const std::string chosen = kernel("env -u OPENBLAS_CORETYPE");
  if (chosen.empty()) GTEST_SKIP() << "LibTorch's BLAS is not OpenBLAS here";
  EXPECT_EQ(gm::better_blas_kernel(chosen, gm::cpu_vector_units()), "") << chosen;
  EXPECT_EQ(kernel("OPENBLAS_CORETYPE=Prescott"), "Prescott");
}
