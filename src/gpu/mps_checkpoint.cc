// MPS's part of the Go driver's checkpoint: the control daemon id in a
// group's configState (always written up to v0.4.1 and omitempty since,
// then mpsApplied on main when set), and the daemon a group names imported
// into the MPS piece of the undo record.
#include <algorithm>

#include "gpu/gpu_handlers.h"
#include "gpu/mps_undo.h"
#include "ledger/go_json.h"

namespace nvdra::gpu {

namespace {

void MpsConfigState(const std::function<std::string_view(const char*)>& value_of, ledger::UpstreamRelease release,
                    const std::function<void(const char*, std::string_view)>& add) {
  using ledger::UpstreamRelease;
  std::string_view id = value_of("mpsControlDaemonID");
  if (id.empty() || id == "null") id = "\"\"";
  if (release != UpstreamRelease::kMain || id != "\"\"") add("mpsControlDaemonID", id);
  if (release == UpstreamRelease::kMain) {
    std::string_view mps = value_of("mpsApplied");
    if (!mps.empty() && mps != "null") add("mpsApplied", mps);
  }
}

// The MPS control daemon the Go driver started for the group: its id (the
// same as nvdra's for the same claim and devices), and the GPUs whose
// compute mode it set. The namespace and directory are the plugin's (the
// plug-in's CompleteImported fills them in).
void ImportMpsDaemon(const ledger::UpstreamPreparedGroup& g, GpuUndo& undo) {
  const std::string id = g.config_state.is_object() ? ledger::GoStr(g.config_state, {"mpsControlDaemonID"}) : "";
  if (id.empty()) return;
  MpsDaemonUndo d;
  d.id = id;
  d.deployment = "mps-control-daemon-" + id;
  for (const auto& dev : g.devices) {
    const nlohmann::json* info = ledger::GoField(dev.member, {dev.type == "mig" ? "concrete" : "info"});
    std::string uuid = info == nullptr ? "" : ledger::GoStr(*info, {dev.type == "mig" ? "migUUID" : "uuid"});
    if (uuid.empty()) continue;
    d.uuids.push_back(uuid);
    if (dev.type == "gpu") d.exclusive_process.push_back(uuid);
  }
  std::sort(d.uuids.begin(), d.uuids.end());
  std::sort(d.exclusive_process.begin(), d.exclusive_process.end());
  undo.Get<MpsUndo>().daemons.push_back(std::move(d));
}

}  // namespace

CheckpointPiece MpsCheckpointPiece() {
  CheckpointPiece p;
  p.empty_config_state = ",\"mpsControlDaemonID\":\"\"";
  p.config_state = MpsConfigState;
  p.import = ImportMpsDaemon;
  return p;
}

}  // namespace nvdra::gpu
