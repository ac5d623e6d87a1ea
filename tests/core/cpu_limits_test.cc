// The CPUs a process may use (core/cpu_info.h): cgroup v2 and v1 quotas read from fake trees
// (nested limits, "max", missing files), how the default thread count follows from the affinity
// mask, the quota and OMP_NUM_THREADS, and this process's own mask against sched_getaffinity.
#include <gtest/gtest.h>
#include <sched.h>

#include <map>
#include <optional>
#include <string>

#include "core/cpu_info.h"

namespace kiln {
namespace {

struct FakeTree {
  std::map<std::string, std::string> files;
  std::optional<std::string> operator()(const std::string& path) const {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  }
};

double Quota(const std::string& proc, const FakeTree& tree, std::string* source = nullptr) {
  return CgroupQuotaCpus(proc, std::cref(tree), source);
}

TEST(CpuLimitsTest, CgroupV2QuotaAndNestedLimits) {
  FakeTree t;
  t.files["/sys/fs/cgroup/cpu.max"] = "max 100000\n";
  t.files["/sys/fs/cgroup/kubepods/cpu.max"] = "400000 100000\n";
  t.files["/sys/fs/cgroup/kubepods/pod1/cpu.max"] = "150000 100000\n";
  t.files["/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max"] = "max 100000\n";
  std::string source;
  EXPECT_DOUBLE_EQ(Quota("0::/kubepods/pod1/ctr\n", t, &source), 1.5);
  EXPECT_EQ(source, "/sys/fs/cgroup/kubepods/pod1/cpu.max");
  // The smallest along the ancestors wins, whichever level sets it.
  t.files["/sys/fs/cgroup/kubepods/cpu.max"] = "50000 100000\n";
  EXPECT_DOUBLE_EQ(Quota("0::/kubepods/pod1/ctr\n", t), 0.5);
  // No quota anywhere, or no files (a cgroup namespace whose path is not mounted): none.
  EXPECT_EQ(Quota("0::/\n", FakeTree{{{"/sys/fs/cgroup/cpu.max", "max 100000"}}}), 0);
  EXPECT_EQ(Quota("0::/a/b\n", FakeTree{}), 0);
  EXPECT_EQ(Quota("", t), 0);
  EXPECT_EQ(Quota("garbage without colons\n", t), 0);
}

TEST(CpuLimitsTest, CgroupV1Quota) {
  FakeTree t;
  t.files["/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us"] = "200000\n";
  t.files["/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us"] = "100000\n";
  t.files["/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"] = "-1\n";
  t.files["/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us"] = "100000\n";
  const std::string proc = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n";
  std::string source;
  EXPECT_DOUBLE_EQ(Quota(proc, t, &source), 2.0);
  EXPECT_EQ(source, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us");
  // -1 is "no quota"; a controller list without cpu is not read.
  t.files["/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us"] = "-1\n";
  EXPECT_EQ(Quota(proc, t), 0);
  EXPECT_EQ(Quota("3:cpuset:/docker/abc\n", t), 0);
}

TEST(CpuLimitsTest, DefaultThreadsFollowTheLimits) {
  // 64 physical cores, a 2-CPU quota: 2 threads, not 64 (ONNX Runtime issue #29510's collapse).
  CpuLimits l = MakeCpuLimits(64, 128, 2.0, "/sys/fs/cgroup/cpu.max", nullptr);
  EXPECT_EQ(l.usable_cpus, 2);
  EXPECT_EQ(l.default_threads, 2);
  EXPECT_NE(l.default_reason.find("cgroup quota 2.00 CPUs"), std::string::npos) << l.default_reason;
  // Rounded down, at least 1.
  EXPECT_EQ(MakeCpuLimits(64, 128, 2.9, "", nullptr).default_threads, 2);
  EXPECT_EQ(MakeCpuLimits(64, 128, 0.5, "", nullptr).default_threads, 1);
  // taskset -c 0-3 on a 64-core host: 4.
  l = MakeCpuLimits(64, 4, 0, "", nullptr);
  EXPECT_EQ(l.default_threads, 4);
  EXPECT_NE(l.default_reason.find("affinity mask 4"), std::string::npos);
  // No limit below the physical cores: the physical cores (hyper-threads not counted).
  l = MakeCpuLimits(8, 16, 0, "", nullptr);
  EXPECT_EQ(l.default_threads, 8);
  EXPECT_EQ(l.usable_cpus, 16);
  // OMP_NUM_THREADS wins over everything; a malformed value is ignored.
  EXPECT_EQ(MakeCpuLimits(64, 4, 2.0, "", "6").default_threads, 6);
  EXPECT_EQ(MakeCpuLimits(64, 4, 2.0, "", "6x").default_threads, 2);
  EXPECT_EQ(MakeCpuLimits(64, 4, 2.0, "", "0").default_threads, 2);
  EXPECT_EQ(MakeCpuLimits(64, 4, 2.0, "", "").default_threads, 2);
}

TEST(CpuLimitsTest, ThisProcessMatchesSchedGetaffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const CpuLimits& l = GetCpuLimits();
  EXPECT_EQ(l.affinity_cpus, CPU_COUNT(&set));
  EXPECT_GE(l.usable_cpus, 1);
  EXPECT_LE(l.usable_cpus, CPU_COUNT(&set));
  EXPECT_GE(l.default_threads, 1);
}

}  // namespace
}  // namespace kiln
