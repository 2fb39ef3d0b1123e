// Loads libnvidia-ml.so.1 with dlopen and resolves the NVML symbols we use.
// A missing library or symbol is an error the caller reports and retries;
// nothing links against NVML at build time.
#pragma once

#include <memory>
#include <shared_mutex>
#include <string>

#include "devices/nvml/nvml_api.h"
#include "util/status.h"

namespace nvdra::devices {

class NvmlLibrary {
 public:
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  static Result<std::unique_ptr<NvmlLibrary>> Load(const std::string& path);

  const NvmlApi& api() const { return api_; }

  // The driver is going away: every call answers NVML_ERROR_UNINITIALIZED
  // from here on and the library is unloaded (dlclose), so nothing of the
  // old driver stays mapped. Reload loads `path` (the new driver's
  // library). Both wait until every open Session has ended (a call made
  // inside a Session never runs into an unloaded library); a thread must
  // not call them while it holds a Session itself.
  void Unload();
  Status Reload(const std::string& path);
  bool loaded() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }

  // "nvmlDeviceGetName: Not Supported (3)" style text for `rc`.
  std::string ErrorText(const char* call, nvmlReturn_t rc) const;
  // A Status for a failed call: Unavailable for errors a retry may fix
  // (driver not loaded, uninitialised, RM mismatch, timeout), Internal else.
  Status Error(const char* call, nvmlReturn_t rc) const;

  // nvmlInit for the lifetime of the guard (NVML counts init calls), and
  // the library kept loaded until it ends.
  class Session {
   public:
    Session(const NvmlLibrary* lib, std::shared_lock<std::shared_mutex> loaded)
        : lib_(lib), loaded_(std::move(loaded)) {}
    ~Session() {
      if (lib_) lib_->api().Shutdown();
    }
    Session(Session&& o) noexcept : lib_(o.lib_), loaded_(std::move(o.loaded_)) { o.lib_ = nullptr; }
    Session(const Session&) = delete;

   private:
    const NvmlLibrary* lib_;
    std::shared_lock<std::shared_mutex> loaded_;
  };
  Result<Session> Open() const;

 private:
  NvmlLibrary() = default;
  // Shared by each Session, exclusive for Unload and Reload.
  mutable std::shared_mutex load_mu_;
  void* handle_ = nullptr;
  std::string path_;
  NvmlApi api_{};
};

}  // namespace nvdra::devices
