#include "gpu/mps_config.h"

#include <algorithm>
#include <charconv>

#include "gpu/gpu_config_kinds.h"
#include "gpu/mig_config.h"

namespace nvdra::gpu {
namespace {

using config::ConfigWalker;
using config::JsonValue;
using config::Quantity;
using namespace config::fields;

void Decode(ConfigWalker& w, const JsonValue& v, MpsConfig& c) {
  w.Struct(v, "MpsConfig",
           {
               {"defaultActiveThreadPercentage",
                [&](const JsonValue& x) { OptInt(w, x, c.default_active_thread_percentage); }},
               {"defaultPinnedDeviceMemoryLimit",
                [&](const JsonValue& x) { OptQuantity(w, x, c.default_pinned_device_memory_limit); }},
               {"defaultPerDevicePinnedMemoryLimit",
                [&](const JsonValue& x) {
                  c.default_per_device_pinned_memory_limit.clear();
                  if (!ExpectObject(w, x, "v1beta1.MpsPerDevicePinnedMemoryLimit")) return;
                  w.Map(x, [&](const std::string& key, const JsonValue& q) {
                    if (q.type == JsonValue::Type::kNull) {
                      c.default_per_device_pinned_memory_limit[key] = Quantity();
                      return;
                    }
                    if (auto parsed = ParseQuantityValue(w, q)) c.default_per_device_pinned_memory_limit[key] = *parsed;
                  });
                }},
               {"multiUser", [&](const JsonValue& x) { OptBool(w, x, c.multi_user); }},
           });
}

Status Validate(const MpsConfig& c) {
  if (c.default_active_thread_percentage) {
    if (*c.default_active_thread_percentage < 0) {
      return InvalidArgument("active thread percentage must not be negative");
    }
    if (*c.default_active_thread_percentage > 100) {
      return InvalidArgument("active thread percentage must not be greater than 100");
    }
  }
  // Upstream finds these only when starting the MPS daemon; checking here
  // keeps a doomed claim from reaching the ledger.
  if (c.default_pinned_device_memory_limit && !c.default_pinned_device_memory_limit->HasPositiveMegabytes()) {
    return InvalidArgument("invalid limit: default value set too low: " + c.default_pinned_device_memory_limit->text());
  }
  for (const auto& [key, q] : c.default_per_device_pinned_memory_limit) {
    if (!q.HasPositiveMegabytes()) {
      return InvalidArgument("invalid limit: value set too low: " + key + ": " + q.text());
    }
  }
  return Status::Ok();
}

void Write(const MpsConfig& c, nlohmann::ordered_json& j) {
  if (c.default_active_thread_percentage) j["defaultActiveThreadPercentage"] = *c.default_active_thread_percentage;
  if (c.default_pinned_device_memory_limit)
    j["defaultPinnedDeviceMemoryLimit"] = c.default_pinned_device_memory_limit->text();
  if (!c.default_per_device_pinned_memory_limit.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, q] : c.default_per_device_pinned_memory_limit) m[k] = q.text();
    j["defaultPerDevicePinnedMemoryLimit"] = std::move(m);
  }
}

// Upstream's webhook checks pinned memory limits only when the MPS daemon
// starts, so they are left to Prepare.
void UpstreamView(MpsConfig& c) {
  c.default_pinned_device_memory_limit.reset();
  c.default_per_device_pinned_memory_limit.clear();
}

}  // namespace

Result<std::map<std::string, std::string>> MpsConfig::PinnedLimitsFor(const std::vector<std::string>& uuids) const {
  std::map<std::string, std::string> limits;
  if (default_pinned_device_memory_limit && !uuids.empty()) {
    if (!default_pinned_device_memory_limit->HasPositiveMegabytes()) {
      return InvalidArgument("invalid limit: default value set too low: " + default_pinned_device_memory_limit->text());
    }
    for (const auto& uuid : uuids) limits[uuid] = default_pinned_device_memory_limit->Megabytes();
  }
  for (const auto& [key, q] : default_per_device_pinned_memory_limit) {
    std::string id;
    if (std::find(uuids.begin(), uuids.end(), key) != uuids.end()) {
      id = key;
    } else {
      // Go's strconv.Atoi: optional sign, decimal digits.
      std::string_view digits = key;
      if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
      long long index = 0;
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
        return InvalidArgument("invalid device: unable to parse key as an integer: " + key);
      }
      if (index < 0 || index >= static_cast<long long>(uuids.size())) {
        return InvalidArgument("invalid device: invalid device index: " + std::to_string(index));
      }
      id = uuids[static_cast<size_t>(index)];
    }
    if (!q.HasPositiveMegabytes()) {
      return InvalidArgument("invalid limit: value set too low: " + key + ": " + q.text());
    }
    limits[id] = q.Megabytes();
  }
  return limits;
}

const SharingBlockKind& MpsConfig::BlockKind() {
  static const SharingBlockKind kind = [] {
    SharingBlockDefinition<MpsConfig> d;
    d.strategy = std::string(kMpsStrategy);
    d.gate = config::Gate::kMPSSupport;
    d.json_key = "mpsConfig";
    d.go_type = "MpsConfig";
    d.config_kinds = {kGpuConfigKind, kMigDeviceConfigKind};
    d.decode = Decode;
    d.validate = Validate;
    d.write_fields = Write;
    d.upstream_admission_view = UpstreamView;
    return DefineSharingBlock(d);
  }();
  return kind;
}

}  // namespace nvdra::gpu
