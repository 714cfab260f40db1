// Bad input through the CLI: one line on stderr, a non-zero exit, and no file left behind.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ggml.h"
#include "gguf.h"
#include "gguf_model/writer.h"
#include "testing.h"
#include "util/files.h"

using namespace gm;
using namespace gm::testing;
namespace fs = std::filesystem;

namespace {

// The error line, after checking the exit code and that it is exactly one line.
std::string fails(const std::string& args) {
  auto r = gamma(args);
  EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  EXPECT_EQ(r.output.rfind("gamma: error: ", 0), 0u) << r.output;
  return r.output;
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for (auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

struct Fixture : ::testing::Test {
  TempDir d;
  void SetUp() override {
    auto r = gamma("pool " + stories260k() + " --types Q4_0,Q8_0 -o " + (d / "pool"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = gamma("plan " + (d / "pool") + " --uniform Q8_0 -o " + (d / "plan.json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    fs::create_directories(d / "out");
  }
  void edit_plan(const std::string& from, const std::string& to, const std::string& dst) {
    std::string s = read_file(d / "plan.json").value();
    auto pos = s.find(from);
    ASSERT_NE(pos, std::string::npos);
    s.replace(pos, from.size(), to);
    std::ofstream(dst) << s;
  }
};

}  // namespace

TEST_F(Fixture, BadModels) {
  std::string good = read_file(stories260k()).value();
  std::ofstream(d / "trunc.gguf", std::ios::binary) << good.substr(0, good.size() - 1000);
  std::ofstream(d / "magic.gguf", std::ios::binary) << "GGML" << good.substr(4);
  EXPECT_NE(fails("inspect " + (d / "trunc.gguf")).find("truncated"), std::string::npos);
  EXPECT_NE(fails("pool " + (d / "magic.gguf") + " -o " + (d / "p2")).find("bad magic"), std::string::npos);
  EXPECT_NE(fails("dequantize " + (d / "trunc.gguf") + " -o " + (d / "out/t.gguf")).find("truncated"), std::string::npos);
  GgufWriter w;
  gguf_set_val_str(w.gguf(), "general.architecture", "notanarch");
  w.add({"blk.0.attn_q.weight", GGML_TYPE_F32, {32, 32}});
  ASSERT_TRUE(w.write(d / "unknown.gguf", [](size_t, std::vector<uint8_t>& b) {
    b.assign(32 * 32 * 4, 0);
    return Status::ok();
  }).is_ok());
  EXPECT_NE(fails("inspect " + (d / "unknown.gguf")).find("unsupported architecture 'notanarch'"), std::string::npos);
  EXPECT_EQ(files_in(d / "out"), 0u);
}

TEST_F(Fixture, BadPoolOptions) {
  EXPECT_NE(fails("pool " + stories260k() + " --types Q4_0,Q9_Z -o " + (d / "p3")).find("unknown type 'Q9_Z'"),
            std::string::npos);
  EXPECT_NE(fails("pool " + stories260k() + " --imatrix " + stories260k() + " -o " + (d / "p4")).find("imatrix"),
            std::string::npos);
  // A type no module row can hold, as a plan: named, with the way out.
  EXPECT_NE(fails("plan " + (d / "pool") + " --uniform Q4_K -o " + (d / "out/p.json")).find("no Q4_K candidate"),
            std::string::npos);
  EXPECT_EQ(files_in(d / "out"), 0u);
}

TEST_F(Fixture, BadPlans) {
  const std::string out = d / "out/x.gguf";
  edit_plan("\"blk.0.attn_q.weight\"", "\"blk.0.attn_qq.weight\"", d / "unknown.json");
  EXPECT_NE(fails("emit " + (d / "pool") + " " + (d / "unknown.json") + " -o " + out).find("unknown module 'blk.0.attn_qq.weight'"),
            std::string::npos);
  edit_plan("\"blk.0.attn_q.weight\": \"Q8_0\"", "\"blk.0.attn_q.weight\": \"Q4_K\"", d / "cannot.json");
  EXPECT_NE(fails("emit " + (d / "pool") + " " + (d / "cannot.json") + " -o " + out).find("no candidate 'Q4_K'"),
            std::string::npos);
  std::ofstream(d / "broken.json") << "{\"schema\": \"gamma.plan\", \"version\": 1, \"modules\": {";
  EXPECT_NE(fails("emit " + (d / "pool") + " " + (d / "broken.json") + " -o " + out).find("malformed JSON"),
            std::string::npos);
  edit_plan("\"gamma.plan\"", "\"gamma.scores\"", d / "schema.json");
  EXPECT_NE(fails("emit " + (d / "pool") + " " + (d / "schema.json") + " -o " + out).find("expected gamma.plan"),
            std::string::npos);
  EXPECT_EQ(files_in(d / "out"), 0u);
}

TEST_F(Fixture, PoolOfAnotherModel) {
  // A second model: the uniform Q8_0 emitted from the first pool (same shapes, other bytes).
  ASSERT_EQ(gamma("emit " + (d / "pool") + " " + (d / "plan.json") + " -o " + (d / "q8.gguf")).exit_code, 0);
  ASSERT_EQ(gamma("pool " + (d / "q8.gguf") + " --types Q4_0 -o " + (d / "pool2")).exit_code, 0);
  EXPECT_NE(fails("emit " + (d / "pool2") + " " + (d / "plan.json") + " -o " + (d / "out/x.gguf")).find("another model"),
            std::string::npos);
  // ... and building a pool of one model into another model's pool directory.
  EXPECT_NE(fails("pool " + (d / "q8.gguf") + " --types Q4_0 -o " + (d / "pool")).find("another model"),
            std::string::npos);
  EXPECT_EQ(files_in(d / "out"), 0u);
}

TEST_F(Fixture, UnwritableOrFullOutput) {
  EXPECT_NE(fails("emit " + (d / "pool") + " " + (d / "plan.json") + " -o /nonexistent/dir/x.gguf").find("does not exist"),
            std::string::npos);
  // A full disk, simulated by a 64 KiB file-size limit: the write fails cleanly, no partial file.
  auto r = run("ulimit -f 64; " + gamma_cli() + " emit " + (d / "pool") + " " + (d / "plan.json") + " -o " +
               (d / "out/x.gguf"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gamma: error: cannot write"), std::string::npos) << r.output;
  EXPECT_EQ(files_in(d / "out"), 0u);
}

// The error contract holds for LibTorch too: an exception escaping gamma-learn (c10::Error,
// whose text carries a multi-line backtrace) is one line and exit 1; so is a usage error.
TEST_F(Fixture, LibTorchExceptionInGammaLearnIsOneLine) {
  const std::string args = "learn " + (d / "pool") + " --teacher " + stories260k() + " -o " + (d / "out/s.json") + " --steps 1";
  ::setenv("GAMMA_FAULT", "torch", 1);
  const std::string out = fails(args);
  ::unsetenv("GAMMA_FAULT");
  EXPECT_NE(out.find("shape '[3]' is invalid for input of size 2"), std::string::npos) << out;
  EXPECT_EQ(files_in(d / "out"), 0u);
  fails("learn " + (d / "pool") + " --teacher " + stories260k() + " -o " + (d / "out/s.json") + " --steps banana");
  fails("hawq " + (d / "pool") + " --teacher " + stories260k());  // -o missing
}

// Inputs libFuzzer found (scripts/fuzz.sh, results/fuzz.json): llama.cpp's gguf reader loads
// an out-of-range u32 into an enum (a KV's gguf_type; a tensor's ggml_type) before its own check
// rejects it (UBSan). gamma refuses them before gguf.cpp sees them (gguf_model/header_check.h):
// one line, exit 1, nothing written. And llama.cpp's legacy imatrix reader trusts its lengths.
TEST_F(Fixture, FuzzerFoundInputsAreRefusedInOneLine) {
  const std::string data = GAMMA_TEST_DATA "/fuzz/";
  EXPECT_NE(fails("inspect " + data + "gguf-kv-type-out-of-range.gguf").find("invalid GGUF type"), std::string::npos);
  // A header that ends where a key's type would be: gguf.cpp then compared the type it failed
  // to read, its enum holding -1 (fuzz_gguf_header; results/fuzz_gguf_header.md).
  EXPECT_NE(fails("inspect " + data + "gguf-header-ends-inside-a-key-type.gguf").find("the header ends inside key"),
            std::string::npos);
  const std::string imx = fails("pool " + stories260k() + " --types Q8_0 --imatrix " + data +
                                "imatrix-tensor-type-out-of-range.gguf -o " + (d / "p2"));
  EXPECT_NE(imx.find("not a readable imatrix file"), std::string::npos) << imx;
  EXPECT_FALSE(fs::exists(d / "p2"));
  EXPECT_NE(imx.find("has invalid ggml type 1024"), std::string::npos) << imx;
  // Not a GGUF, so llama.cpp reads it as a legacy .dat imatrix, whose negative name length
  // threw std::length_error out of the loader (the process aborted).
  EXPECT_NE(fails("pool " + stories260k() + " --types Q8_0 --imatrix " + data + "imatrix-legacy-negative-length.dat -o " +
                  (d / "p3"))
                .find("not a readable imatrix file"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(d / "p3"));
  // An imatrix header claiming a 2^36-float tensor in a file of a few hundred bytes: llama.cpp's
  // loader allocates every tensor before reading, and aborted (SIGABRT). Refused from the header.
  {
    ggml_init_params ip = {ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context* ctx = ggml_init(ip);
    ggml_tensor* t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, int64_t(1) << 36);
    ggml_set_name(t, "blk.0.ffn_up.weight.in_sum2");
    gguf_context* g = gguf_init_empty();
    gguf_set_val_str(g, "general.type", "imatrix");
    gguf_add_tensor(g, t);
    ASSERT_TRUE(gguf_write_to_file(g, (d / "huge-imatrix.gguf").c_str(), /*only_meta=*/true));
    gguf_free(g);
    ggml_free(ctx);
  }
  EXPECT_NE(fails("pool " + stories260k() + " --types Q8_0 --imatrix " + (d / "huge-imatrix.gguf") + " -o " + (d / "p4"))
                .find("bytes but the file has"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(d / "p4"));
  // A manifest whose byte count is the float 4e52: nlohmann's get<uint64_t>() cast it (UBSan,
  // fuzz_manifest); integer fields are read by int_at now.
  EXPECT_NE(fails("solve --pool " + data + "manifest-float-byte-count --score-from-manifest --bpw 8 -o " + (d / "out/p.json"))
                .find("\"bytes\" is not an integer in range: 4e+52"),
            std::string::npos);
}

// Resource limits are errors, not crashes: absurd budgets, an empty or a 10 GB text (sparse,
// so the test costs no disk), a GGUF whose last tensor claims 2^36 elements in a file extended
// (sparsely) to match. One line, a non-zero exit, nothing written.
TEST_F(Fixture, ResourceLimitsAreOneLineErrors) {
  const std::string pool = d / "pool", out = d / "out";
  EXPECT_NE(fails("solve --pool " + pool + " --score-from-manifest --bpw 0 -o " + out + "/p.json").find("(0, 32]"),
            std::string::npos);
  EXPECT_NE(fails("solve --pool " + pool + " --score-from-manifest --bpw 1e30 -o " + out + "/p.json").find("(0, 32]"),
            std::string::npos);
  EXPECT_NE(fails("solve --pool " + pool + " --score-from-manifest --size 0 -o " + out + "/p.json").find("smallest feasible"),
            std::string::npos);
  EXPECT_NE(fails("solve --pool " + pool + " --score-from-manifest --size 1e30 -o " + out + "/p.json").find("too large"),
            std::string::npos);
  EXPECT_NE(fails("run " + stories260k() + " --size 0 --dry-run -w " + out + "/w").find("feasible range"),
            std::string::npos);
  // Time budgets: a speed table is needed, with a file-size budget, and must be one.
  EXPECT_NE(fails("solve --pool " + pool + " --score-from-manifest --size 1MiB --min-decode 10 -o " + out + "/p.json")
                .find("need --speed"),
            std::string::npos);
  EXPECT_NE(fails("solve --pool " + pool + " --score-from-manifest --bpw 4 --speed " + pool + "/manifest.json -o " + out +
                  "/p.json")
                .find("file-size budget"),
            std::string::npos);
  EXPECT_NE(fails("solve --pool " + pool + " --score-from-manifest --size 1MiB --speed " + pool +
                  "/manifest.json --min-decode 10 -o " + out + "/p.json")
                .find("gamma.speed"),
            std::string::npos);
  EXPECT_NE(fails("speed " + out + "/missing.gguf").find("no such file"), std::string::npos);
  // "As fast as each size's mix" needs every size to be a mix's name.
  EXPECT_EQ(fails("run " + stories260k() + " --size Q4_0,330000 --min-decode mix --dry-run -w " + out + "/w"),
            "gamma: error: --min-decode mix: every --size must be a llama.cpp mix's name (--size 330000 is not)\n");
  EXPECT_EQ(fails("run " + stories260k() + " --size Q4_0,Q8_0 --min-decode 20,30 --dry-run -w " + out + "/w"),
            "gamma: error: --min-decode: a list of speeds goes with one --size (a target per speed at that size)\n");

  std::ofstream(d / "empty.txt").close();
  std::ofstream(d / "huge.txt").close();
  fs::resize_file(d / "huge.txt", 10ull << 30);
  const std::string model = stories260k();
  for (const char* t : {"empty.txt", "huge.txt"}) {
    const std::string why = std::string(t) == "empty.txt" ? "is empty" : "is 10.0 GiB; gamma reads texts up to 1 GiB";
    EXPECT_NE(fails("eval " + model + " --text " + (d / t) + " -q").find(why), std::string::npos) << t;
    EXPECT_NE(fails("learn " + pool + " --teacher " + model + " --bpw 9 --calib " + (d / t) + " --steps 1 -q -o " + out +
                    "/s.json --cache-dir " + (d / "act"))
                  .find(why),
              std::string::npos)
        << t;
    EXPECT_NE(fails("run " + model + " --bpw 8 --calib " + (d / t) + " --dry-run -w " + out + "/w").find(why),
              std::string::npos)
        << t;
  }

  // The hostile GGUF: blk.4.ffn_norm.weight (the last tensor's data) from 64 to 2^36 floats.
  std::string bytes = read_file(model).value();
  const std::string name = "blk.4.ffn_norm.weight";
  const size_t at = bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  int64_t ne0 = 0;
  std::memcpy(&ne0, &bytes[at + name.size() + 4], 8);  // after the name: n_dims (u32), ne[0]
  ASSERT_EQ(ne0, 64);
  const int64_t huge = int64_t(1) << 36;
  std::memcpy(&bytes[at + name.size() + 4], &huge, 8);
  const std::string bad = d / "huge-tensor.gguf";
  std::ofstream(bad, std::ios::binary) << bytes;
  fs::resize_file(bad, bytes.size() - 64 * 4 + uint64_t(huge) * 4);
  EXPECT_NE(fails("dequantize " + bad + " -o " + out + "/t.gguf").find("needs 512.0 GiB of memory"), std::string::npos);
  EXPECT_NE(fails("eval " + bad + " --text " + shared_data("text/wiki.test.raw") + " -q").find("wrong shape"),
            std::string::npos);
  EXPECT_EQ(files_in(out), 0u);
}

// Two `gamma run`s in one work directory would write the same files: while one holds the work
// directory's lock (here flock(1), as a running gamma run does), another is refused in one line.
TEST_F(Fixture, SecondRunInTheSameWorkDirectoryIsRefused) {
  const std::string w = d / "w";
  fs::create_directories(w);
  auto r = run("flock " + w + "/.gamma-run.lock " + gamma_cli() + " run " + stories260k() + " --bpw 8 -q -w " + w +
               " 2>&1 | tail -n 1");
  EXPECT_NE(r.output.find("gamma: error: work directory " + w + " is in use by another gamma run"), std::string::npos)
      << r.output;
}
