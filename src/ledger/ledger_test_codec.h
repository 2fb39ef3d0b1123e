// A KindCodec for ledger tests: devices "channel-<n>" hold "channel <n>"
// (every one of kChannels for a config {"kind":"ChannelConfig",
// "allocationMode":"All"}), other devices their name. It stands in for the
// kinds' codecs (gpu/, computedomain/), which the ledger must not know.
#pragma once

#include <string>
#include <vector>

#include "ledger/go_json.h"
#include "ledger/kind_codec.h"

namespace nvdra::ledger::testing {

class TestKindCodec final : public KindCodec {
 public:
  static constexpr int kChannels = 2048;
  explicit TestKindCodec(std::string driver) : driver_(std::move(driver)) {}

  std::string driver_name() const override { return driver_; }

  std::vector<std::string> HeldResources(const std::string& device,
                                         const std::vector<nlohmann::json>& params) const override {
    if (device.rfind("channel-", 0) != 0) return {device};
    bool all = false;
    for (const auto& p : params) {
      if (GoStr(p, {"kind"}).find("ChannelConfig") != std::string::npos) all = GoStr(p, {"allocationMode"}) == "All";
    }
    if (!all) return {"channel " + device.substr(8)};
    std::vector<std::string> held;
    for (int i = 0; i < kChannels; ++i) held.push_back("channel " + std::to_string(i));
    return held;
  }

  // Every prepared device as a group of its own.
  std::optional<std::string> UpstreamPreparedDevices(const ClaimEntry& e) const override {
    std::string out;
    for (const auto& d : e.prepared) {
      out += (out.empty() ? "" : ",") + std::string("{\"devices\":[{\"dev\":{\"device\":") + GoCheckpointedDevice(d) +
             "}}]}";
    }
    return "[" + out + "]";
  }

 private:
  std::string driver_;
};

}  // namespace nvdra::ledger::testing
