// gguf_model: reading real GGUFs, refusing bad ones with one clear line, exact-size writing.
#include <filesystem>
#include <fstream>

#include "gguf.h"
#include "gguf_model/model.h"
#include "gguf_model/writer.h"
#include "testing.h"
#include "util/files.h"

using namespace gm;
using namespace gm::testing;

TEST(Model, OpensStories260K) {
  auto m = Model::open(stories260k());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->arch(), "llama");
  EXPECT_EQ((*m)->n_layer(), 5);
  EXPECT_EQ((*m)->linear().size(), 35u);
  const auto& q = (*m)->tensor("blk.0.attn_q.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{64, 64}));
  const auto& down = (*m)->tensor("blk.4.ffn_down.weight");
  EXPECT_EQ(down.shape, (std::vector<int64_t>{172, 64}));
  EXPECT_FALSE((*m)->tied_embeddings());  // stories260K stores output.weight separately
  auto w = (*m)->read_f32(q);
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->size(), 64u * 64u);
  EXPECT_EQ((*m)->fingerprint().size(), 64u);
}

TEST(Model, Admissibility) {
  EXPECT_TRUE(type_admits(GGML_TYPE_Q4_0, 64));
  EXPECT_FALSE(type_admits(GGML_TYPE_Q4_K, 64));
  EXPECT_FALSE(type_admits(GGML_TYPE_Q8_0, 172));
  EXPECT_TRUE(type_admits(GGML_TYPE_F16, 172));
  EXPECT_TRUE(type_admits(GGML_TYPE_Q2_K, 1536));
  EXPECT_FALSE(type_admits(GGML_TYPE_Q6_K, 576));
  auto t = admissible_types(576);
  EXPECT_EQ(std::count(t.begin(), t.end(), GGML_TYPE_Q5_1), 1);
  EXPECT_EQ(std::count(t.begin(), t.end(), GGML_TYPE_Q4_K), 0);
  // Q4_K: 144 bytes per 256 weights = 4.5 bpw, scales included.
  EXPECT_EQ(type_bytes(GGML_TYPE_Q4_K, 1536, 10), 10u * 6u * 144u);
  EXPECT_EQ(parse_type("q4_k").value(), GGML_TYPE_Q4_K);
  EXPECT_EQ(type_name(GGML_TYPE_Q4_K), "Q4_K");
  EXPECT_FALSE(parse_type("Q9_X").is_ok());
}

static std::string write_bytes(const TempDir& d, const std::string& name, const std::string& bytes) {
  std::ofstream(d / name, std::ios::binary) << bytes;
  return d / name;
}

TEST(Model, BadInputIsOneClearLine) {
  TempDir d;
  std::string good = read_file(stories260k()).value();
  auto err = [](const std::string& path) {
    auto m = Model::open(path);
    EXPECT_FALSE(m.is_ok());
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos) << m.status().message();
    return m.status().message();
  };
  EXPECT_NE(err(d / "missing.gguf").find("cannot open"), std::string::npos);
  EXPECT_NE(err(write_bytes(d, "magic.gguf", "GGUX" + good.substr(4))).find("bad magic"), std::string::npos);
  EXPECT_NE(err(write_bytes(d, "trunc.gguf", good.substr(0, good.size() / 2))).find("truncated"), std::string::npos);
  EXPECT_NE(err(write_bytes(d, "head.gguf", good.substr(0, 2000))).find("corrupt or truncated"), std::string::npos);
  std::string garbage = good;
  for (size_t i = 8; i < 64; ++i) garbage[i] = char(0xff);
  EXPECT_NE(err(write_bytes(d, "garbage.gguf", garbage)).find("corrupt"), std::string::npos);
  EXPECT_NE(err(write_bytes(d, "empty.gguf", "")).find("bad magic"), std::string::npos);

  // A well-formed GGUF of an architecture llama.cpp does not know.
  GgufWriter w;
  gguf_set_val_str(w.gguf(), "general.architecture", "notanarch");
  w.add({"blk.0.attn_q.weight", GGML_TYPE_F32, {32, 32}});
  ASSERT_TRUE(w.write(d / "unknown.gguf", [](size_t, std::vector<uint8_t>& b) {
    b.assign(32 * 32 * 4, 0);
    return Status::ok();
  }).is_ok());
  EXPECT_NE(err(d / "unknown.gguf").find("unsupported architecture 'notanarch' (not one llama.cpp knows)"),
            std::string::npos);
  // One it knows (gpt2 here) opens, its linear modules found by llama.cpp's tensor names.
  GgufWriter g;
  gguf_set_val_str(g.gguf(), "general.architecture", "gpt2");
  gguf_set_val_u32(g.gguf(), "gpt2.block_count", 1);
  g.add({"blk.0.attn_q.weight", GGML_TYPE_F32, {32, 32}});
  ASSERT_TRUE(g.write(d / "gpt2.gguf", [](size_t, std::vector<uint8_t>& b) {
    b.assign(32 * 32 * 4, 0);
    return Status::ok();
  }).is_ok());
  auto m = Model::open(d / "gpt2.gguf");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->arch(), "gpt2");
  ASSERT_EQ((*m)->linear().size(), 1u);
}

TEST(Writer, PredictedSizeIsWrittenSizeAndWriteIsAtomic) {
  TempDir d;
  GgufWriter w;
  gguf_set_val_str(w.gguf(), "general.architecture", "llama");
  w.add({"a", GGML_TYPE_Q4_0, {64, 3}});   // 3 rows x 36 bytes = 108: padded to 128
  w.add({"b", GGML_TYPE_F32, {5}});        // 20 bytes: padded to 32
  EXPECT_EQ(w.predicted_size(), w.meta_bytes() + 128 + 32);
  auto ok = w.write(d / "x.gguf", [&](size_t i, std::vector<uint8_t>& b) {
    b.assign(w.tensors()[i].nbytes(), 1);
    return Status::ok();
  });
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  EXPECT_EQ(file_size(d / "x.gguf").value(), w.predicted_size());
  // A producer that fails leaves no file, not even a temp file.
  auto bad = w.write(d / "y.gguf", [](size_t, std::vector<uint8_t>&) { return Status::error("boom"); });
  EXPECT_FALSE(bad.is_ok());
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator(d.str())) n += e.path().filename() != "x.gguf";
  EXPECT_EQ(n, 0u);
}
