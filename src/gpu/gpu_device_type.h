// One type of device the GPU kind serves (the types are listed in
// gpu_handlers.cc). A type says
// which of the node's hardware it publishes under which names, how it is
// published, which opaque config kind applies to it, and what a container
// of a claim on one of its devices gets, and, for a type with node-side
// work (one that creates its device, or moves the GPU to another driver),
// what Prepare does and Unprepare reverses. GpuKind holds no
// per-type code: a new type is a new file plus one line in gpu_handlers.cc.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cdi/container_edits.h"
#include "config/feature_gates.h"
#include "config/opaque_config.h"
#include "devices/device_info.h"
#include "gpu/gpu_config_kinds.h"
#include "gpu/gpu_container_edits.h"
#include "gpu/gpu_undo.h"
#include "model/published_device.h"
#include "util/status.h"

namespace nvdra::gpu {

class GpuDeviceType;

// What a type knows of one of its devices beyond what every device has
// (where inside its GPU it lies, say): set by the type that serves the
// device and read by that type alone (DetailOf), so that no other file
// needs to know it.
struct GpuDeviceDetail {
  virtual ~GpuDeviceDetail() = default;
};

// One device of the node as a type publishes it.
struct GpuDevice {
  std::string name;                       // as published: "gpu-0", ...
  const devices::GpuInfo* gpu = nullptr;  // the physical GPU
  const GpuDeviceType* type = nullptr;
  // A partition of `gpu` (a device of its own inside it) rather than all
  // of it: the sharing strategies set a GPU's own settings only on a whole
  // GPU.
  bool partition = false;
  // The device's own UUID: the GPU's, or the partition's; empty for a
  // partition that Prepare creates.
  std::string uuid = {};
  // The type's own detail (null: none).
  std::shared_ptr<const GpuDeviceDetail> detail = {};
  // A second name of the same hardware under another type, which a claim
  // on either holds too, so that a claim that holds only the other name
  // (one imported from the Go driver's checkpoint) still refuses it. Empty
  // without one.
  std::string twin = {};
};

// `device`'s detail, which its type set as a T (only that type calls this,
// for a device it serves, so the cast is checked by construction and costs
// nothing).
template <class T>
const T& DetailOf(const GpuDevice& device) {
  return static_cast<const T&>(*device.detail);
}

// The claim's devices by name, as Plan sees them.
class GpuDeviceLookup {
 public:
  virtual ~GpuDeviceLookup() = default;
  virtual const GpuDevice* Find(const std::string& name) const = 0;
};

class GpuDeviceType {
 public:
  virtual ~GpuDeviceType() = default;

  // "gpu", ...: the published `type` attribute, and the type the
  // config resolver and upstream's errors use.
  virtual std::string_view name() const = 0;
  // The config kind that applies to this type (config::KindOf).
  virtual std::string_view config_kind() const = 0;
  // The config that applies when no class or claim config does; nullopt
  // leaves the type without one (its devices then need an explicit config).
  virtual std::optional<config::Config> DefaultConfig(const config::FeatureGates& gates) const = 0;

  // This type's devices among the node's hardware. The pointers point into
  // `inventory`, which must outlive them.
  virtual std::vector<GpuDevice> Devices(const devices::NodeInventory& inventory) const = 0;
  // How `device` (one of Devices()) is published in the ResourceSlice.
  virtual model::PublishedDevice Publish(const GpuDevice& device) const = 0;
  // What a container of a claim on `device` gets (the claim-wide edits are
  // GpuContainerEdits::Common).
  virtual Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuContainerEdits& edits) const = 0;
  // The same for a prepared claim whose undo record is `undo` (a type that
  // creates its device at Prepare finds what it created there).
  virtual Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuUndo& undo,
                                            const GpuContainerEdits& edits) const {
    return Edits(device, edits);
  }
  // The exclusive resources the ledger records for a claim on `device`
  // (two claims never hold one): the device's name, and for partitionable
  // devices the memory slices it occupies.
  virtual std::vector<std::string> Held(const GpuDevice& device) const { return {device.name}; }

  // Node-side work, in three steps as a sharing strategy's: at Plan, before
  // anything durable, what Prepare will do for the claim's `devices` of this
  // type, recorded in `undo` (so that a crash at any later step leaves a
  // record Unprepare can act on); at Prepare, doing it (idempotent: it runs
  // again after a failure, a crash or a reboot); at Unprepare, reversing it
  // from the record alone. Most types have none.
  virtual Status Plan(const std::vector<const GpuDevice*>& devices, GpuUndo& undo) const { return Status::Ok(); }
  // Apply may complete the record (what it created); the record is written
  // again with PrepareCompleted.
  virtual Status Apply(GpuUndo& undo) { return Status::Ok(); }
  virtual Status Undo(const std::string& claim_uid, const GpuUndo& undo) { return Status::Ok(); }
};

}  // namespace nvdra::gpu
