// The GPU kind's KindCodec (ledger/kind_codec.h): its devices hold
// themselves (by name), and whole GPUs are described to the Go driver's
// checkpoint.json as its "gpu" groups; a plug-in's devices that cannot be
// described so are its own to say (CheckpointPiece). An imported claim's
// undo record names the whole GPUs whose time slice the Go driver set, so
// Unprepare resets them as it would have, and each plug-in adds what its
// piece of the record holds of the Go driver's group.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/gpu_undo.h"
#include "ledger/kind_codec.h"

namespace nvdra::gpu {

// A plug-in's part of the Go driver's checkpoint (described in docs/, in the
// guide to moving between the Go driver and nvdra). The built-in ones are
// listed with the plug-ins (BuiltinCheckpointPieces in gpu_handlers.h).
// Every member may be left empty.
struct CheckpointPiece {
  // Whether `device` is one of the plug-in's that the checkpoint cannot
  // describe (a claim with one is not written to it).
  std::function<bool(const std::string& device)> undescribable;
  // Members a whole GPU's PreparedDevice carries for the plug-in, each
  // after a comma (",\"name\":null").
  std::string whole_gpu_members;
  // The members of the configState of a group this driver prepared, each
  // after a comma.
  std::string empty_config_state;
  // Appends, through `add`, the configState members the plug-in owns, as
  // `release` marshals them; `value_of` reads a member of the stored
  // configState as written ("" when absent).
  std::function<void(const std::function<std::string_view(const char*)>& value_of, ledger::UpstreamRelease release,
                     const std::function<void(const char*, std::string_view)>& add)>
      config_state;
  // Adds to `undo` what group `group` says the Go driver did for the
  // plug-in.
  std::function<void(const ledger::UpstreamPreparedGroup& group, GpuUndo& undo)> import;
  // Adds to `held` the parts of devices (ledger::HeldShare) the imported
  // entry `e` holds through the plug-in.
  std::function<void(const ledger::ClaimEntry& e, std::vector<ledger::HeldShare>& held)> import_held;
};
using CheckpointPieces = std::vector<CheckpointPiece>;

class GpuCheckpointCodec final : public ledger::KindCodec {
 public:
  // `pieces`: the plug-ins' parts (outlive the codec); the built-in ones
  // when not given.
  GpuCheckpointCodec();
  explicit GpuCheckpointCodec(const CheckpointPieces& pieces) : pieces_(pieces) {}

  std::string driver_name() const override;
  std::vector<std::string> HeldResources(const std::string& device,
                                         const std::vector<nlohmann::json>& config_parameters) const override {
    return {device};
  }
  std::optional<std::string> UpstreamPreparedDevices(const ledger::ClaimEntry& e) const override;
  // DeviceConfigState as each release marshals it (as the guide in docs/ to
  // moving off the Go driver describes it): the plug-ins' members, then
  // timeSliceApplied (v0.4.1 on) when set.
  std::string UpstreamConfigState(std::string_view raw, ledger::UpstreamRelease release) const override;
  nlohmann::json ImportUndo(const ledger::ClaimEntry& e, const ledger::UpstreamClaim& claim) const override;
  // What the plug-ins say the entry holds (CheckpointPiece::import_held).
  std::vector<ledger::HeldShare> ImportHeldCapacity(const ledger::ClaimEntry& e) const override;
  // A requested device another claim holds is refused in upstream's words
  // (its overlap check, validateNoOverlappingPreparedDevices): "requested
  // device <name> is already allocated to different claim <uid>". Upstream
  // has no words for what nvdra checks beyond it (a part of a GPU two of
  // its devices share, the PCI function of a GPU's twin): those keep the
  // ledger's sentence, which names the resource.
  std::string HeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                 const std::vector<std::string>& requested) const override;

 private:
  const CheckpointPieces& pieces_;
};

}  // namespace nvdra::gpu
