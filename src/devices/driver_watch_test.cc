#include "devices/driver_watch.h"

#include <gtest/gtest.h>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

std::string VersionText(const std::string& v) {
  return "NVRM version: NVIDIA UNIX x86_64 Kernel Module  " + v +
         "  Wed Jul  2 00:29:46 UTC 2025\n"
         "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
}

TEST(DriverWatchTest, ParsesBothKernelModules) {
  EXPECT_EQ(*ParseKernelModuleVersion(VersionText("570.158.01")), "570.158.01");
  EXPECT_EQ(*ParseKernelModuleVersion(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder)\n"),
            "580.65.06");
  EXPECT_FALSE(ParseKernelModuleVersion("garbage\n").ok());
}

TEST(DriverWatchTest, KnowsNvmlsDriverNotLoadedAnswers) {
  EXPECT_TRUE(IsDriverNotLoaded(Unavailable("nvmlInit_v2: Driver Not Loaded (9)")));
  EXPECT_TRUE(IsDriverNotLoaded(Unavailable("x: NVML_ERROR_UNINITIALIZED")));
  EXPECT_FALSE(IsDriverNotLoaded(Internal("nvmlDeviceGetName: Not Supported (3)")));
  EXPECT_FALSE(IsDriverNotLoaded(Status::Ok()));
}

struct Node {
  nvdra::testing::TempDir t;
  DriverWatchPaths paths{t.path() + "/version", "", {t.path() + "/libcuda.so.570.158.01"}};
  void Load(const std::string& v) {
    ASSERT_TRUE(WriteFileAtomically(paths.version_file, VersionText(v), 0444, false).ok());
  }
  void Unload() { ::unlink(paths.version_file.c_str()); }
  void Library(bool there) {
    if (there) {
      ASSERT_TRUE(WriteFileAtomically(paths.libraries[0], "", 0755, false).ok());
    } else {
      ::unlink(paths.libraries[0].c_str());
    }
  }
};

TEST(DriverWatchTest, PresentGoneBackWithANewVersion) {
  Node n;
  n.Load("570.158.01");
  n.Library(true);
  DriverWatch w("570.158.01");
  EXPECT_EQ(w.Observe(ProbeDriver(n.paths)).what, DriverTransition::kNone);

  n.Library(false);  // the uninstaller goes first
  auto gone = w.Observe(ProbeDriver(n.paths));
  EXPECT_EQ(gone.what, DriverTransition::kGone);
  EXPECT_EQ(gone.old_version, "570.158.01");
  EXPECT_NE(gone.reason.find("libcuda.so.570.158.01 is gone"), std::string::npos);
  n.Unload();
  EXPECT_EQ(w.Observe(ProbeDriver(n.paths)).what, DriverTransition::kNone);  // still gone: reported once
  EXPECT_FALSE(w.loaded());

  n.Load("580.65.06");
  n.paths.libraries = {};  // the plugin lists the new driver's files after it acted
  auto back = w.Observe(ProbeDriver(n.paths));
  EXPECT_EQ(back.what, DriverTransition::kBack);
  EXPECT_EQ(back.old_version, "570.158.01");
  EXPECT_EQ(back.new_version, "580.65.06");
  EXPECT_EQ(w.Observe(ProbeDriver(n.paths)).what, DriverTransition::kNone);
  EXPECT_EQ(w.version(), "580.65.06");
}

TEST(DriverWatchTest, BackWithTheSameVersion) {
  Node n;
  n.Load("570.158.01");
  n.Library(true);
  DriverWatch w("570.158.01");
  n.Unload();
  auto gone = w.Observe(ProbeDriver(n.paths));
  EXPECT_EQ(gone.what, DriverTransition::kGone);
  EXPECT_NE(gone.reason.find("kernel module unloaded"), std::string::npos);
  n.Load("570.158.01");
  auto back = w.Observe(ProbeDriver(n.paths));
  EXPECT_EQ(back.what, DriverTransition::kBack);
  EXPECT_EQ(back.old_version, "570.158.01");
  EXPECT_EQ(back.new_version, "570.158.01");
}

TEST(DriverWatchTest, AVersionChangeBetweenLooksIsGoneThenBack) {
  Node n;
  n.paths.libraries = {};
  n.Load("580.65.06");
  DriverWatch w("570.158.01");
  auto gone = w.Observe(ProbeDriver(n.paths));
  EXPECT_EQ(gone.what, DriverTransition::kGone);
  EXPECT_NE(gone.reason.find("from 570.158.01 to 580.65.06"), std::string::npos);
  auto back = w.Observe(ProbeDriver(n.paths));
  EXPECT_EQ(back.what, DriverTransition::kBack);
  EXPECT_EQ(back.new_version, "580.65.06");
}

TEST(DriverWatchTest, TheOperatorsMarkerCountsWhereItsDirectoryExists) {
  Node n;
  n.paths.libraries = {};
  n.Load("570.158.01");
  n.paths.ready_marker = n.t.path() + "/validations/driver-ready";
  EXPECT_TRUE(ProbeDriver(n.paths).present);  // no operator on this node
  ASSERT_TRUE(MakeDirectories(n.t.path() + "/validations", 0755).ok());
  DriverWatch w("570.158.01");
  auto gone = w.Observe(ProbeDriver(n.paths));
  EXPECT_EQ(gone.what, DriverTransition::kGone);
  EXPECT_NE(gone.reason.find("driver-ready"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomically(n.paths.ready_marker, "IS_HOST_DRIVER=false\n", 0644, false).ok());
  EXPECT_EQ(w.Observe(ProbeDriver(n.paths)).what, DriverTransition::kBack);
}

TEST(DriverWatchTest, NvmlDriverNotLoadedIsGoneAndAFailedBackIsReportedAgain) {
  DriverWatch w("570.158.01");
  EXPECT_EQ(w.ObserveNvml(Internal("nvmlDeviceGetName: Unknown Error (999)")).what, DriverTransition::kNone);
  auto gone = w.ObserveNvml(Unavailable("nvmlInit_v2: Driver Not Loaded (9)"));
  EXPECT_EQ(gone.what, DriverTransition::kGone);
  EXPECT_EQ(w.ObserveNvml(Unavailable("nvmlInit_v2: Driver Not Loaded (9)")).what, DriverTransition::kNone);
  DriverPresence there{true, "580.65.06", ""};
  EXPECT_EQ(w.Observe(there).what, DriverTransition::kBack);
  w.BackFailed();
  auto again = w.Observe(there);
  EXPECT_EQ(again.what, DriverTransition::kBack);
  EXPECT_EQ(again.old_version, "570.158.01");
}

}  // namespace
}  // namespace nvdra::devices
