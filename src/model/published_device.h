// The neutral description of one device as it is published in a
// ResourceSlice: produced by the device kinds (from hardware discovery),
// consumed by the slice publisher. Knows nothing of NVML or of HTTP.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace nvdra::model {

// A semantic version attribute ("12.8.0"); serialised as {"version": "..."}.
struct Version {
  std::string value;
  friend bool operator==(const Version&, const Version&) = default;
};

// A list of integers (the DRAListTypeAttributes form); serialised as {"ints": [...]}.
struct IntList {
  std::vector<int64_t> values;
  friend bool operator==(const IntList&, const IntList&) = default;
};

// One attribute value: {"string": ...} | {"int": ...} | {"bool": ...} | {"version": ...} | {"ints": [...]}.
using AttributeValue = std::variant<std::string, int64_t, bool, Version, IntList>;

struct DeviceTaint {
  std::string key;     // e.g. "gpu.nvidia.com/xid"
  std::string value;   // e.g. "79"
  std::string effect;  // "NoSchedule" | "NoExecute" | "None"
  friend bool operator==(const DeviceTaint&, const DeviceTaint&) = default;
};

// A capacity's requestPolicy (resource.k8s.io DeviceCapacity): what a claim
// consumes of a device that allows multiple allocations when it asks for
// nothing (`default`), and the range it may ask for. Quantities in their
// canonical Kubernetes form ("0", "1Mi", "80Gi").
struct CapacityRequestPolicy {
  std::string default_value;
  std::string min, max, step;  // validRange
  friend bool operator==(const CapacityRequestPolicy&, const CapacityRequestPolicy&) = default;
};

// A set of counters devices consume from (KEP 4815, partitionable
// devices): e.g. one per GPU, "gpu-0-counter-set", with a counter per
// capacity dimension and one per memory slice. Values are quantities.
struct CounterSet {
  std::string name;
  std::map<std::string, std::string> counters;
  friend bool operator==(const CounterSet&, const CounterSet&) = default;
};

// What a device consumes of one counter set while allocated.
struct CounterConsumption {
  std::string counter_set;
  std::map<std::string, std::string> counters;
  friend bool operator==(const CounterConsumption&, const CounterConsumption&) = default;
};

struct PublishedDevice {
  std::string name;  // "gpu-0", "gpu-0-mig-1g10gb-19-0", "channel-0", "daemon-0"
  // Keys without a domain belong to the driver's domain; fully qualified keys
  // (resource.kubernetes.io/pciBusID) are kept as they are. std::map keeps
  // them sorted, so output is deterministic.
  std::map<std::string, AttributeValue> attributes;
  // Capacity values as Kubernetes quantities: plain integers of bytes or
  // counts ("85899345920"), or, for a device shared by consumable shares,
  // the canonical form upstream publishes ("81559Mi").
  std::map<std::string, std::string> capacity;
  // Request policies of some of the capacities above (consumable shares).
  std::map<std::string, CapacityRequestPolicy> capacity_policies;
  // allowMultipleAllocations: several claims may be allocated the device at
  // once, each consuming part of its capacity.
  bool allow_multiple_allocations = false;
  std::vector<DeviceTaint> taints;
  std::vector<CounterConsumption> consumes_counters;
  // The counter sets `consumes_counters` names, published once per pool
  // (each device that consumes from a set carries it).
  std::vector<CounterSet> counter_sets;
  // Sort key for deterministic slices (PCI bus id of the GPU, or "" for
  // devices without one); ties are broken by name.
  std::string sort_key;
  friend bool operator==(const PublishedDevice&, const PublishedDevice&) = default;
};

}  // namespace nvdra::model
