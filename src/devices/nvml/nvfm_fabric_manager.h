// Fabric Manager through its API interface library, libnvfm.so, loaded
// with dlopen from the container driver root (nothing links against it at
// build time). As upstream, every call opens its own connection to the
// nv-fabricmanager daemon and closes it after, so a restarted daemon is
// simply reached again; fmLibInit runs once at Load, fmLibShutdown at
// destruction.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "devices/fabric_manager.h"
#include "devices/nvml/nvfm_api.h"

namespace nvdra::devices {

struct NvfmConnectOptions {
  std::string address;  // "<host>[:<port>]", or a socket path with unix_socket
  bool unix_socket = true;
  unsigned timeout_ms = 1000;  // go-nvfm's default
};

// Upstream's variables: NVIDIA_FABRICMANAGER_ADDRESS set (even empty)
// selects TCP to that host (empty: 127.0.0.1); else the unix socket
// NVIDIA_FABRICMANAGER_UNIX_SOCKET, or <container driver
// root>/run/nvidia-fabricmanager/socket. `getenv` is injected for tests.
NvfmConnectOptions NvfmConnectOptionsFromEnv(const std::string& container_driver_root,
                                             const std::function<const char*(const char*)>& getenv);

// "IN_USE" for FM_ST_IN_USE, as go-nvfm names the return codes.
std::string FmReturnName(fmReturn_t rc);

class NvfmFabricManager final : public FabricManager {
 public:
  ~NvfmFabricManager() override;
  NvfmFabricManager(const NvfmFabricManager&) = delete;
  NvfmFabricManager& operator=(const NvfmFabricManager&) = delete;

  // Loads the library at `path` and runs fmLibInit.
  static Result<std::unique_ptr<NvfmFabricManager>> Load(const std::string& path, NvfmConnectOptions options);

  Result<std::vector<FabricPartition>> Partitions() override;
  Status Activate(int partition_id) override;
  Status Deactivate(int partition_id) override;

 private:
  NvfmFabricManager() = default;
  // Connects, runs `call` on the handle, disconnects; errors name `op`.
  Status WithConnection(const char* op, const std::function<fmReturn_t(fmHandle_t)>& call);
  void* handle_ = nullptr;
  bool initialized_ = false;
  NvfmConnectOptions options_;
  NvfmApi api_{};
};

}  // namespace nvdra::devices
