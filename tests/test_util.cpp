// util: the error contract's pieces (Status codes, Result's guarded value, one-line errors), and
// the CPU accounting that tells a stage's own time from other jobs'.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <stdexcept>

#include "testing.h"
#include "util/dir_peak.h"
#include "util/files.h"
#include "util/json.h"
#include "util/main_guard.h"
#include "util/proc.h"
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

// A file made and removed inside the sampler's life counts in its peak, though neither end sees
// it (what gamma run's stage-end figure missed); two directories add up. Sparse files: a GiB of
// apparent size (what dir_bytes counts) costs no disk.
TEST(DirPeak, SeesAFileMadeAndRemovedBetweenItsEnds) {
  TempDir d;
  std::filesystem::create_directories(d / "a");
  std::filesystem::create_directories(d / "b");
  ASSERT_TRUE(write_file_atomic(d / "b/kept", std::string(1000, 'x')).is_ok());
  const uint64_t gib = uint64_t{1} << 30;
  uint64_t peak = 0;
  {
    DirPeak sampler({d / "a", d / "b"}, std::chrono::milliseconds(5));
    EXPECT_EQ(sampler.peak(), 1000u);
    { std::ofstream(d / "a/transient"); }
    std::filesystem::resize_file(d / "a/transient", gib);
    const auto t0 = std::chrono::steady_clock::now();
    while (sampler.peak() < gib && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::filesystem::remove(d / "a/transient");
    peak = sampler.peak();
  }
  EXPECT_EQ(peak, gib + 1000);
  EXPECT_EQ(dir_bytes(d / "a") + dir_bytes(d / "b"), 1000u);
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

// /proc/stat against getrusage: a waited-for child's CPU is this process's own; a process
// running beside it (not waited for while measured) is what another job takes. The children spin
// on their own CPU clock, so a loaded machine (other tests beside this one) only makes them
// take longer. Other tests may add to what other jobs take, so only this test's part is bounded.
TEST(CpuTimes, AWaitedChildIsOwnTimeAndAProcessBesideItIsNot) {
  auto spin_child = [](double cpu_s) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      timespec ts{};
      do ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      while (double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec) < cpu_s);
      ::_exit(0);
    }
    return pid;
  };
  int ws = 0;
  const CpuTimes a = cpu_times();
  ASSERT_GE(a.machine_busy, 0) << "no /proc/stat";
  const pid_t waited = spin_child(0.4);
  ASSERT_GT(waited, 0);
  ASSERT_EQ(::waitpid(waited, &ws, 0), waited);
  const CpuTimes b = cpu_times();
  EXPECT_GT(b.own - a.own, 0.35);
  EXPECT_GE(b.machine_busy - a.machine_busy, 0.8 * (b.own - a.own));

  const pid_t beside = spin_child(3.0);
  ASSERT_GT(beside, 0);
  ::usleep(200000);
  const CpuTimes c = cpu_times();
  ::usleep(1500000);  // the child spins, this process sleeps
  const CpuTimes d = cpu_times();
  ::kill(beside, SIGKILL);
  ASSERT_EQ(::waitpid(beside, &ws, 0), beside);
  EXPECT_LT(d.own - c.own, 0.1);
  EXPECT_GT(other_cores(c, d, 1.5), 0.5);
}
