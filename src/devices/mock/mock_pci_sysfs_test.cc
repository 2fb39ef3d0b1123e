#include "devices/mock/mock_pci_sysfs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "devices/backends/open_device_lib.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

struct MockNode {
  nvdra::testing::TempDir t;
  std::string root = t.path() + "/mock";
  std::unique_ptr<DeviceLib> lib;
  NodeInventory inv;
  MockNode() {
    DeviceLibOptions o;
    o.mock_hardware = "h100x8";
    o.mock_root = root;
    auto l = OpenDeviceLib(o);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    lib = std::move(*l);
    auto i = lib->Discover();
    EXPECT_TRUE(i.ok());
    inv = *i;
  }
  std::string Link(const std::string& rel) { return LinkBaseName(root + "/" + rel); }
};

TEST(MockPciSysfsTest, EveryGpuStartsOnNvidiaInItsOwnIommuGroup) {
  MockNode n;
  ASSERT_FALSE(n.inv.gpus.empty());
  auto iommu = n.lib->pci().IommuEnabled();
  ASSERT_TRUE(iommu.ok());
  EXPECT_TRUE(*iommu);
  for (const auto& g : n.inv.gpus) {
    auto s = n.lib->pci().Read(g.pci_bus_id);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->driver, "nvidia") << g.pci_bus_id;
    EXPECT_EQ(s->iommu_group, std::optional<int>(MockIommuGroup(g.minor)));
    EXPECT_EQ(s->num_vfs, 0);
    auto members = n.lib->pci().IommuGroupDevices(MockIommuGroup(g.minor));
    ASSERT_TRUE(members.ok());
    EXPECT_EQ(*members, std::vector<std::string>{g.pci_bus_id});
    EXPECT_FALSE(PathExists(n.root + "/dev/vfio/" + std::to_string(MockIommuGroup(g.minor))));
  }
  EXPECT_TRUE(PathExists(n.root + "/dev/vfio/vfio"));
  // pcieRoot still comes from the same links.
  EXPECT_TRUE(n.inv.gpus[0].pcie_root.has_value());
}

TEST(MockPciSysfsTest, ChangingTheDriverMovesTheLinksAsTheKernelWould) {
  MockNode n;
  const auto& g = n.inv.gpus[1];
  const std::string group = std::to_string(MockIommuGroup(g.minor));
  ASSERT_TRUE(ChangePciDriver(n.lib->pci(), g.pci_bus_id, kVfioPciDriver).ok());
  EXPECT_EQ(n.lib->pci().Read(g.pci_bus_id)->driver, "vfio-pci");
  EXPECT_EQ(*ReadFileToString(n.root + "/sys/bus/pci/devices/" + g.pci_bus_id + "/driver_override"), "vfio-pci");
  EXPECT_TRUE(PathExists(n.root + "/sys/bus/pci/drivers/vfio-pci/" + g.pci_bus_id));
  EXPECT_FALSE(PathExists(n.root + "/sys/bus/pci/drivers/nvidia/" + g.pci_bus_id));
  EXPECT_TRUE(PathExists(n.root + "/dev/vfio/" + group));
  // The other GPUs stay where they were.
  EXPECT_EQ(n.lib->pci().Read(n.inv.gpus[0].pci_bus_id)->driver, "nvidia");
  // Rebuilding the mock root (every Discover) keeps the device where it was moved.
  ASSERT_TRUE(n.lib->Discover().ok());
  EXPECT_EQ(n.lib->pci().Read(g.pci_bus_id)->driver, "vfio-pci");

  ASSERT_TRUE(ChangePciDriver(n.lib->pci(), g.pci_bus_id, kNvidiaPciDriver).ok());
  EXPECT_EQ(n.lib->pci().Read(g.pci_bus_id)->driver, "nvidia");
  EXPECT_EQ(*ReadFileToString(n.root + "/sys/bus/pci/devices/" + g.pci_bus_id + "/driver_override"), "\n");
  EXPECT_FALSE(PathExists(n.root + "/dev/vfio/" + group));
  EXPECT_TRUE(PathExists(n.root + "/sys/bus/pci/drivers/nvidia/" + g.pci_bus_id));
}

TEST(MockPciSysfsTest, TheKernelRefusesWhatLinuxRefuses) {
  MockNode n;
  const std::string bdf = n.inv.gpus[0].pci_bus_id;
  // Bound already: a bind is refused before anything is written.
  EXPECT_EQ(n.lib->pci().Bind(bdf, kVfioPciDriver).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(n.lib->pci().Unbind(bdf).ok());
  EXPECT_EQ(n.lib->pci().Read(bdf)->driver, "");
  EXPECT_TRUE(n.lib->pci().Unbind(bdf).ok()) << "no driver: nothing to unbind";
  // driver_override names another driver: the kernel's bind fails.
  SysfsWriteHook kernel = MockPciKernel(n.root);
  ASSERT_TRUE(WriteFileAtomically(n.root + "/sys/bus/pci/devices/" + bdf + "/driver_override", "nvidia\n").ok());
  Status s = kernel(n.root + "/sys/bus/pci/drivers/vfio-pci/bind", bdf);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(n.lib->pci().Read(bdf)->driver, "");
  // An unknown device.
  EXPECT_FALSE(kernel(n.root + "/sys/bus/pci/drivers/nvidia/bind", "0000:ff:00.0").ok());
  // Bind sets the override itself.
  ASSERT_TRUE(n.lib->pci().Bind(bdf, kVfioPciDriver).ok());
  EXPECT_EQ(n.lib->pci().Read(bdf)->driver, "vfio-pci");
}

// Each step of a change of driver can be cut short (a kill); the repeated
// call finishes it: a device on no driver is bound, and an override left set
// after a bind to nvidia is cleared. As NVML, the mock does not see a GPU on
// no driver.
TEST(MockPciSysfsTest, ARepeatedChangeOfDriverFinishesOneCutShort) {
  MockNode n;
  const auto& g = n.inv.gpus[2];
  const std::string override_file = n.root + "/sys/bus/pci/devices/" + g.pci_bus_id + "/driver_override";
  for (const char* point : {"pci-after-unbind", "pci-after-driver-override"}) {
    SCOPED_TRACE(point);
    ASSERT_TRUE(FailPoints::Process().Load(std::string(point) + "=error").ok());
    EXPECT_FALSE(ChangePciDriver(n.lib->pci(), g.pci_bus_id, kVfioPciDriver).ok());
    FailPoints::Process().Clear();
    EXPECT_EQ(n.lib->pci().Read(g.pci_bus_id)->driver, "");
    auto seen = n.lib->Discover();
    ASSERT_TRUE(seen.ok());
    EXPECT_EQ(seen->gpus.size(), n.inv.gpus.size() - 1);
    ASSERT_TRUE(ChangePciDriver(n.lib->pci(), g.pci_bus_id, kVfioPciDriver).ok());
    EXPECT_EQ(n.lib->pci().Read(g.pci_bus_id)->driver, "vfio-pci");
    ASSERT_TRUE(ChangePciDriver(n.lib->pci(), g.pci_bus_id, kNvidiaPciDriver).ok());
  }
  ASSERT_TRUE(FailPoints::Process().Load("pci-before-override-clear=error").ok());
  ASSERT_TRUE(ChangePciDriver(n.lib->pci(), g.pci_bus_id, kVfioPciDriver).ok());
  EXPECT_FALSE(ChangePciDriver(n.lib->pci(), g.pci_bus_id, kNvidiaPciDriver).ok());
  FailPoints::Process().Clear();
  EXPECT_EQ(n.lib->pci().Read(g.pci_bus_id)->driver, "nvidia");
  EXPECT_EQ(n.lib->pci().Read(g.pci_bus_id)->driver_override, "nvidia");
  ASSERT_TRUE(ChangePciDriver(n.lib->pci(), g.pci_bus_id, kNvidiaPciDriver).ok());
  EXPECT_EQ(*ReadFileToString(override_file), "\n");
  EXPECT_EQ(n.lib->pci().Read(g.pci_bus_id)->driver_override, "");
  // The kernel shows an unset override as "(null)".
  ASSERT_TRUE(WriteFileAtomically(override_file, "(null)\n").ok());
  EXPECT_EQ(n.lib->pci().Read(g.pci_bus_id)->driver_override, "");
}

TEST(PciDriverControlTest, RealSysfsShapes) {
  nvdra::testing::TempDir t;
  SysfsPciDriverControl pci(t.path());
  auto iommu = pci.IommuEnabled();
  ASSERT_TRUE(iommu.ok());
  EXPECT_FALSE(*iommu) << "no kernel/iommu_groups";
  ASSERT_TRUE(MakeDirectories(t.path() + "/kernel/iommu_groups", 0755).ok());
  EXPECT_FALSE(*pci.IommuEnabled()) << "empty kernel/iommu_groups";
  EXPECT_EQ(pci.Read("0000:3b:00.0").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(pci.Read("../x").status().code(), StatusCode::kInvalidArgument);
  const std::string dev = t.path() + "/bus/pci/devices/0000:3b:00.0";
  ASSERT_TRUE(MakeDirectories(dev, 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(dev + "/sriov_numvfs", "4\n").ok());
  auto s = pci.Read("0000:3b:00.0");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->num_vfs, 4);
  EXPECT_FALSE(s->iommu_group.has_value());
  // Without a kernel behind it the write lands but nothing binds: Bind says so.
  ASSERT_TRUE(MakeDirectories(t.path() + "/bus/pci/drivers/vfio-pci", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(t.path() + "/bus/pci/drivers/vfio-pci/bind", "").ok());
  ASSERT_TRUE(WriteFileAtomically(dev + "/driver_override", "").ok());
  Status b = pci.Bind("0000:3b:00.0", kVfioPciDriver);
  EXPECT_EQ(b.code(), StatusCode::kInternal) << b.ToString();
  EXPECT_EQ(*ReadFileToString(t.path() + "/bus/pci/drivers/vfio-pci/bind"), "0000:3b:00.0");
  // A missing sysfs file is never created.
  EXPECT_FALSE(pci.Bind("0000:3b:00.0", "nvidia").ok());
  EXPECT_FALSE(PathExists(t.path() + "/bus/pci/drivers/nvidia/bind"));
}

}  // namespace
}  // namespace nvdra::devices

namespace nvdra::devices {
namespace {

TEST(PciDriverControlTest, AddressableMemoryIsTheRoundedSumOf64BitBars) {
  // An H100's regions: BAR0 16 MiB 32-bit, BAR1 128 GiB and BAR3 32 MiB 64-bit.
  const std::string res = "0x00000000a0000000 0x00000000a0ffffff 0x0000000000040200\n"
                          "0x0000200000000000 0x0000201fffffffff 0x000000000014220c\n"
                          "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                          "0x0000202000000000 0x0000202001ffffff 0x000000000014220c\n"
                          "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                          "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                          "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                          "0x0000000000000000 0x0000202fffffffff 0x000000000014220c\n";
  EXPECT_EQ(AddressableMemoryFromResource(res), uint64_t{256} << 30);
  EXPECT_EQ(AddressableMemoryFromResource(""), 0u);
}

TEST(MockPciSysfsTest, VendorDeviceAndBarsAreReadBack) {
  MockNode n;
  auto s = n.lib->pci().Read(n.inv.gpus[0].pci_bus_id);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->vendor_id, "0x10de");
  EXPECT_EQ(s->device_id, "0x2330");
  EXPECT_GT(s->addressable_memory_bytes, *n.inv.gpus[0].memory_bytes);
  EXPECT_EQ(s->iommufd_cdev, "");
}

}  // namespace
}  // namespace nvdra::devices
