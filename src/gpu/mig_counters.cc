#include "gpu/mig_counters.h"

#include <algorithm>
#include <cctype>

#include "devices/device_names.h"

namespace nvdra::gpu {

namespace {

// Capacity name to counter name, as upstream's camelToDNSName: "copyEngines" -> "copy-engines".
std::string CounterName(const std::string& capacity) {
  std::string out;
  for (size_t i = 0; i < capacity.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(capacity[i]);
    if (std::isupper(c) && i > 0) out.push_back('-');
    out.push_back(static_cast<char>(std::tolower(c)));
  }
  return out;
}

std::map<std::string, uint64_t> RawCapacities(const devices::MigProfileInfo& p) {
  return {{"multiprocessors", p.multiprocessors},
          {"copyEngines", p.copy_engines},
          {"decoders", p.decoders},
          {"encoders", p.encoders},
          {"jpegEngines", p.jpeg_engines},
          {"ofaEngines", p.ofa_engines},
          {"memory", p.memory_bytes}};
}

}  // namespace

std::string BinarySiQuantity(uint64_t n) {
  static const char* kSuffixes[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  int k = 0;
  while (n != 0 && n % 1024 == 0 && k < 6) {
    n /= 1024;
    ++k;
  }
  return std::to_string(n) + (k == 0 ? "" : kSuffixes[k - 1]);
}

std::map<std::string, std::string> MigProfileCapacities(const devices::MigProfileInfo& profile) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : RawCapacities(profile)) out[k] = BinarySiQuantity(v);
  return out;
}

std::map<std::string, std::string> MaxMigCapacities(const devices::GpuInfo& gpu) {
  std::map<std::string, uint64_t> max;
  for (const auto& p : gpu.mig_profiles) {
    for (const auto& [k, v] : RawCapacities(p)) max[k] = std::max(max[k], v);
  }
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : max) out[k] = BinarySiQuantity(v);
  return out;
}

std::string CounterSetName(const devices::GpuInfo& gpu) { return devices::GpuDeviceName(gpu.minor) + "-counter-set"; }

model::CounterConsumption Consumption(const devices::GpuInfo& gpu, const std::map<std::string, std::string>& capacities,
                                      int start, int size) {
  model::CounterConsumption c;
  c.counter_set = CounterSetName(gpu);
  for (const auto& [k, v] : capacities) c.counters[CounterName(k)] = v;
  for (int i = start; i < start + size; ++i) c.counters["memory-slice-" + std::to_string(i)] = "1";
  return c;
}

model::CounterSet GpuCounterSet(const devices::GpuInfo& gpu) {
  model::CounterConsumption all = Consumption(gpu, MaxMigCapacities(gpu), 0, devices::MemorySliceCount(gpu));
  return {all.counter_set, std::move(all.counters)};
}

std::string MemorySliceResource(int minor, int i) {
  return devices::GpuDeviceName(minor) + " memory-slice-" + std::to_string(i);
}

}  // namespace nvdra::gpu
