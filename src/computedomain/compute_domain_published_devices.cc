#include "computedomain/compute_domain_published_devices.h"

#include <algorithm>

#include "devices/device_names.h"

namespace nvdra::computedomain {

std::vector<model::PublishedDevice> ComputeDomainPublishedDevices(int channels, bool with_daemon) {
  std::vector<model::PublishedDevice> out;
  model::PublishedDevice daemon;
  daemon.name = kDaemonDeviceName;
  daemon.attributes["type"] = std::string(kDeviceTypeDaemon);
  daemon.attributes["id"] = int64_t{0};
  if (with_daemon) out.push_back(daemon);
  channels = std::clamp(channels, 0, devices::kMaxImexChannels);
  for (int i = 0; i < channels; ++i) {
    model::PublishedDevice c;
    c.name = devices::ImexChannelDeviceName(i);
    c.attributes["type"] = std::string(kDeviceTypeChannel);
    c.attributes["id"] = int64_t{i};
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

}  // namespace nvdra::computedomain
