// nvdra-discover: prints what the plugins would see and publish on this node
// (the inventory from NVML or a mock profile, the published devices, and
// optionally a CDI spec covering every device), as JSON on stdout. For
// operators checking a node, and for hardware checks of the NVML backend.
#include <CLI/CLI.hpp>
#include <stdlib.h>

#include <iostream>

#include "cdi/spec.h"
#include "computedomain/compute_domain_published_devices.h"
#include "devices/backends/open_device_lib.h"
#include "devices/device_lib.h"
#include "devices/inventory_json.h"
#include "devices/mock/mock_device_lib.h"
#include "gpu/gpu_container_edits.h"
#include "gpu/gpu_handlers.h"
#include "gpu/gpu_kind.h"
#include "gpu/gpu_published_devices.h"
#include "util/build_info.h"
#include "util/file_util.h"
#include "util/log.h"

namespace {

using namespace nvdra;
using namespace nvdra::devices;

// The hook the plugin would use: the flag, else the binary it would copy;
// "" (and a note on stderr) when there is none.
std::string HookPath(const DeviceLib& lib, const std::string& flag) {
  if (!flag.empty()) return flag;
  std::string source = lib.cdi_hook_source();
  if (PathExists(source)) return source;
  std::cerr << "note: no CDI hook at " << source
            << " and --nvidia-cdi-hook-path is not set: the plugins would refuse to start\n";
  return "";
}

// A spec with one device per published GPU device, as a claim holding all
// of them would get; shows the device nodes each one needs.
Result<cdi::Spec> AllDevicesSpec(const DeviceLib& lib, const NodeInventory& inv,
                                 std::shared_ptr<DriverFilesCache> files) {
  gpu::GpuContainerEdits edits(ContainerSources::ForLib(lib, std::move(files)));
  cdi::Spec spec;
  spec.kind = std::string("k8s.") + gpu::kDriverName + "/claim";
  NVDRA_ASSIGN_OR_RETURN(spec.edits, edits.Common());
  const auto types = gpu::RegisteredDeviceTypes(config::FeatureGates());
  // GPU by GPU in discovery order, each one's devices in that order too.
  for (const auto& g : inv.gpus) {
    for (const auto& type : types) {
      for (const auto& d : type->Devices(inv)) {
        if (d.gpu != &g) continue;
        NVDRA_ASSIGN_OR_RETURN(auto e, type->Edits(d, edits));
        spec.devices.push_back({d.name, e});
      }
    }
  }
  return spec;
}

// What --mock-swap-driver does.
struct MockSwap {
  std::string version;
  int imex_channels_major = 0;
};

void AddMockFlags(CLI::App& app, DeviceLibOptions& o, MockSwap& swap) {
  app.add_option("--mock-hardware", o.mock_hardware,
                 "built-in mock profile (h100x8, a100-mig, gb200x4) or profile file; empty uses NVML");
  app.add_option("--mock-root", o.mock_root, "directory for the mock driver root (default: a new temporary one)");
  app.add_option("--mock-layout", o.mock_layout,
                 "mock node layout: plain (the mock root is the driver root) or gpu-operator (the mock root is the "
                 "node's root, the driver under run/nvidia/driver)")
      ->check(CLI::IsMember({"plain", "gpu-operator"}));
  app.add_option("--mock-swap-driver", swap.version,
                 "swap the mock node's driver under --mock-root, as an upgrade does while the plugins run: "
                 "'gone' unloads it (files and version file removed, discovery answers driver not loaded), a "
                 "version installs that one (unloading the running one first); then prints the discovery")
      ->needs("--mock-root");
  app.add_option("--mock-imex-channels-major", swap.imex_channels_major,
                 "with --mock-swap-driver <version>: the major the new module gives nvidia-caps-imex-channels in "
                 "the mock's /proc/devices (0: keep the current one)")
      ->needs("--mock-swap-driver");
}

// --mock-swap-driver: the mock node's driver unloaded ("gone") or replaced.
Status SwapDriver(const DeviceLibOptions& o, const MockSwap& swap) {
  if (swap.version.empty()) return Status::Ok();
  if (o.mock_hardware.empty()) return InvalidArgument("--mock-swap-driver needs --mock-hardware");
  NVDRA_ASSIGN_OR_RETURN(MockProfile profile, LoadMockProfile(o.mock_hardware));
  NVDRA_ASSIGN_OR_RETURN(MockLayout layout, ParseMockLayout(o.mock_layout));
  return SwapMockDriver(o.mock_root, layout, profile, swap.version, swap.imex_channels_major);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nvdra-discover: print the GPUs, MIG devices and IMEX clique the nvdra plugins see"};
  app.set_version_flag("--version", std::string("nvdra ") + BuildVersion() + "\ncommit: " + BuildCommit() +
                                        "\ndate: " + BuildDate());
  DeviceLibOptions o;
  o.container_driver_root = "/";
  int verbosity = 0;
  int channels = 1;
  bool cdi_spec = false;
  bool common_edits = false;
  std::string hook_flag;
  MockSwap swap;
  AddMockFlags(app, o, swap);
  app.add_option("--container-driver-root", o.container_driver_root, "driver root as this process sees it")
      ->capture_default_str();
  app.add_option("--nvidia-driver-root", o.host_driver_root, "driver root as the host sees it")->capture_default_str();
  app.add_option("--proc-devices", o.proc_devices_path, "file to read instead of /proc/devices")
      ->envname("ALT_PROC_DEVICES_PATH");
  app.add_option("--sysfs-root", o.sysfs_root, "sysfs mount point")->capture_default_str();
  app.add_option("--channels", channels, "IMEX channels to list when the node is in a clique")->capture_default_str();
  app.add_flag("--cdi-spec", cdi_spec, "print a CDI spec with the edits of every GPU device instead");
  app.add_flag("--common-edits", common_edits,
               "print the spec-level edits of GPU claims instead: the driver's files, device nodes and hooks");
  app.add_option("--nvidia-cdi-hook-path", hook_flag, "host path of nvidia-cdi-hook for the hooks")
      ->envname("NVIDIA_CDI_HOOK_PATH");
  app.add_option("-v", verbosity, "log verbosity");
  CLI11_PARSE(app, argc, argv);
  InitLogging(verbosity);
  if (Status s = SwapDriver(o, swap); !s.ok() || swap.version == kMockDriverGone) {
    if (!s.ok()) std::cerr << "error: " << s.ToString() << "\n";
    return s.ok() ? 0 : 1;
  }

  std::string temp_root;
  if (!o.mock_hardware.empty() && o.mock_root.empty()) {
    char tmpl[] = "/tmp/nvdra-mock-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::cerr << "cannot create a temporary mock root: " << ErrnoText(errno) << "\n";
      return 1;
    }
    o.mock_root = temp_root = tmpl;
  }
  int rc = 0;
  auto lib = OpenDeviceLib(o);
  if (!lib.ok()) {
    std::cerr << "error: " << lib.status().ToString() << "\n";
    rc = lib.status().retryable() ? 75 : 1;
  } else if (auto inv = (*lib)->Discover(); !inv.ok()) {
    std::cerr << "error: discovery failed: " << inv.status().ToString() << "\n";
    rc = inv.status().retryable() ? 75 : 1;  // EX_TEMPFAIL: try again later
  } else if (cdi_spec || common_edits) {
    std::string version = inv->driver_version;
    auto files = std::make_shared<DriverFilesCache>((*lib)->driver_root(),
                                                    [version]() -> Result<std::string> { return version; },
                                                    HookPath(**lib, hook_flag));
    Result<cdi::Spec> spec = Internal("unset");
    if (cdi_spec) {
      spec = AllDevicesSpec(**lib, *inv, files);
    } else if (auto e = gpu::GpuContainerEdits(ContainerSources::ForLib(**lib, files)).Common(); e.ok()) {
      std::cout << cdi::RenderEditsJson(*e);
      spec = cdi::Spec{};
    } else {
      spec = e.status();
    }
    if (!spec.ok()) {
      std::cerr << "error: " << spec.status().ToString() << "\n";
      rc = 1;
    } else if (cdi_spec) {
      std::cout << cdi::RenderJson(*spec);
    }
  } else {
    std::vector<model::PublishedDevice> cd;
    if (!inv->clique_id.empty()) cd = computedomain::ComputeDomainPublishedDevices(channels);
    std::cout << RenderDiscoveryJson(*inv, gpu::GpuPublishedDevices(*inv), cd);
  }
  if (!temp_root.empty()) std::system(("rm -rf '" + temp_root + "'").c_str());
  return rc;
}
