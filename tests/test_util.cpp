// util: the error contract's pieces (Status codes, Result's guarded value, one-line errors).
#include <cerrno>
#include <stdexcept>

#include "testing.h"
#include "util/files.h"
#include "util/json.h"
#include "util/main_guard.h"
#include "util/status.h"

using namespace gm;
using namespace gm::testing;

TEST(Status, CodesTellMissingFromCorruptFromIo) {
  TempDir d;
  EXPECT_EQ(read_file(d / "nope.json").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(read_json(d / "nope.json", "gamma.plan", 1).status().code(), Status::Code::kNotFound);
  ASSERT_TRUE(write_file_atomic(d / "bad.json", "{\"schema\": ").is_ok());
  EXPECT_EQ(read_json(d / "bad.json", "gamma.plan", 1).status().code(), Status::Code::kCorrupt);
  ASSERT_TRUE(write_file_atomic(d / "other.json", "{\"schema\": \"gamma.eval\", \"version\": 1}").is_ok());
  EXPECT_EQ(read_json(d / "other.json", "gamma.plan", 1).status().code(), Status::Code::kCorrupt);
  EXPECT_EQ(read_file(d.str()).status().code(), Status::Code::kIo);  // a directory: readable name, unreadable file
  EXPECT_EQ(write_file_atomic(d / "no/such/dir/x", "x").code(), Status::Code::kIo);
  EXPECT_EQ(Status::errorf("bad {}", 1).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Status::errorf("bad").with_context("ctx").message(), "ctx: bad");
  EXPECT_EQ(read_file(d / "nope").status().with_context("x").code(), Status::Code::kNotFound);
  EXPECT_EQ(Status::ok().code(), Status::Code::kOk);
}

TEST(ResultDeathTest, ValueOfAnErrorAbortsWithItsMessage) {
  Result<int> r = Status::errorf("the reason {}", 42);
  EXPECT_DEATH((void)r.value(), "gamma: fatal: the value of an error was read: the reason 42");
  EXPECT_DEATH((void)*r, "the reason 42");
  Result<int> ok = 7;
  EXPECT_EQ(ok.value(), 7);
}

TEST(MainGuard, AnyExceptionIsOneLineAndExit1) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(guarded_main([]() -> int { throw std::runtime_error("first\nbacktrace line 2\nline 3"); }), 1);
  EXPECT_EQ(guarded_main([]() -> int { throw 5; }), 1);
  EXPECT_EQ(guarded_main([] { return 3; }), 3);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "gamma: error: first\ngamma: error: unknown exception\n");
}
