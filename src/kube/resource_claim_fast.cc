// The fast path of DecodeResourceClaim: one pass of a strict pull parser
// straight into the typed claim, skipping what a node plugin does not read
// (spec, managedFields, the status parts it ignores) without building a
// document tree. It takes only what it is sure of: any error, or a repeated
// member that it reads, leaves the text to the tree-based reading, which
// words every error message.
#include <cstdint>

#include "kube/json_pull.h"
#include "kube/resource_claim.h"

namespace nvdra::kube {
namespace {

// The members of one object already read: the tree reading keeps the last
// of repeated members, this one refuses them.
class SeenMembers {
 public:
  bool First(int bit) {
    uint32_t m = uint32_t{1} << bit;
    if ((bits_ & m) != 0) return false;
    bits_ |= m;
    return true;
  }

 private:
  uint32_t bits_ = 0;
};

// Calls `member(name)` for each member of the object at the cursor; it must
// read the member's value. The name may live in the parser's scratch buffer:
// compare it before reading the value.
template <typename F>
bool ForMembers(JsonPull& in, F&& member) {
  if (!in.ObjectBegin()) return false;
  std::string_view key;
  bool done = false;
  for (;;) {
    if (!in.ObjectKey(key, done)) return false;
    if (done) return true;
    if (!member(key)) return false;
  }
}

template <typename F>
bool ForItems(JsonPull& in, F&& item) {
  if (!in.ArrayBegin()) return false;
  bool done = false;
  for (;;) {
    if (!in.ArrayItem(done)) return false;
    if (done) return true;
    if (!item()) return false;
  }
}

// A null member reads as an absent one, as in util/json_reader.h.
bool NullNext(JsonPull& in) { return in.Next() == JsonToken::kNull; }

bool ReadOptString(JsonPull& in, std::string& out) { return NullNext(in) ? in.Null() : in.String(out); }

bool ReadOptBool(JsonPull& in, bool& out) { return NullNext(in) ? in.Null() : in.Bool(out); }

// The value's text as it stands in the document.
bool ReadRaw(JsonPull& in, std::string& out) {
  in.Next();
  size_t begin = in.Offset();
  if (!in.Skip()) return false;
  out.assign(in.Slice(begin, in.Offset()));
  return true;
}

bool ReadConsumedCapacity(JsonPull& in, std::map<std::string, std::string>& out) {
  if (NullNext(in)) return in.Null();
  return ForMembers(in, [&](std::string_view key) {
    std::string name(key);
    std::string quantity;
    return in.String(quantity) && out.emplace(std::move(name), std::move(quantity)).second;
  });
}

bool ReadResult(JsonPull& in, DeviceRequestAllocationResult& r) {
  SeenMembers seen;
  bool ok = ForMembers(in, [&](std::string_view key) {
    if (key == "request") return seen.First(0) && in.String(r.request);
    if (key == "driver") return seen.First(1) && in.String(r.driver);
    if (key == "pool") return seen.First(2) && in.String(r.pool);
    if (key == "device") return seen.First(3) && in.String(r.device);
    if (key == "adminAccess") return seen.First(4) && ReadOptBool(in, r.admin_access);
    if (key == "shareID") return seen.First(5) && ReadOptString(in, r.share_id);
    if (key == "consumedCapacity") return seen.First(6) && ReadConsumedCapacity(in, r.consumed_capacity);
    return in.Skip();
  });
  // The four names of the device are required, and not empty.
  return ok && !r.request.empty() && !r.driver.empty() && !r.pool.empty() && !r.device.empty();
}

bool ReadRequests(JsonPull& in, std::vector<std::string>& out) {
  if (NullNext(in)) return in.Null();
  return ForItems(in, [&] { return in.String(out.emplace_back()); });
}

bool ReadOpaque(JsonPull& in, std::optional<OpaqueDeviceConfig>& out) {
  if (NullNext(in)) return in.Null();
  OpaqueDeviceConfig o;
  SeenMembers seen;
  bool ok = ForMembers(in, [&](std::string_view key) {
    if (key == "driver") return seen.First(0) && ReadOptString(in, o.driver);
    if (key == "parameters") return seen.First(1) && ReadRaw(in, o.parameters);
    return in.Skip();
  });
  if (ok) out = std::move(o);
  return ok;
}

bool ReadConfig(JsonPull& in, DeviceAllocationConfiguration& c) {
  SeenMembers seen;
  return ForMembers(in, [&](std::string_view key) {
    if (key == "source") return seen.First(0) && ReadOptString(in, c.source);
    if (key == "requests") return seen.First(1) && ReadRequests(in, c.requests);
    if (key == "opaque") return seen.First(2) && ReadOpaque(in, c.opaque);
    return in.Skip();
  });
}

bool ReadDevices(JsonPull& in, ResourceClaim& c) {
  if (NullNext(in)) return in.Null();
  SeenMembers seen;
  return ForMembers(in, [&](std::string_view key) {
    if (key == "results") {
      if (!seen.First(0)) return false;
      if (NullNext(in)) return in.Null();
      return ForItems(in, [&] { return ReadResult(in, c.results.emplace_back()); });
    }
    if (key == "config") {
      if (!seen.First(1)) return false;
      if (NullNext(in)) return in.Null();
      return ForItems(in, [&] { return ReadConfig(in, c.configs.emplace_back()); });
    }
    return in.Skip();
  });
}

bool ReadAllocation(JsonPull& in, ResourceClaim& c) {
  if (NullNext(in)) return in.Null();
  c.allocated = true;
  SeenMembers seen;
  return ForMembers(in, [&](std::string_view key) {
    if (key == "devices") return seen.First(0) && ReadDevices(in, c);
    return in.Skip();
  });
}

bool ReadConsumerReference(JsonPull& in, ResourceClaimConsumerReference& ref) {
  SeenMembers seen;
  return ForMembers(in, [&](std::string_view key) {
    if (key == "apiGroup") return seen.First(0) && ReadOptString(in, ref.api_group);
    if (key == "resource") return seen.First(1) && ReadOptString(in, ref.resource);
    if (key == "name") return seen.First(2) && ReadOptString(in, ref.name);
    if (key == "uid") return seen.First(3) && ReadOptString(in, ref.uid);
    return in.Skip();
  });
}

bool ReadStatus(JsonPull& in, ResourceClaim& c) {
  if (NullNext(in)) return in.Null();
  size_t begin = in.Offset();
  SeenMembers seen;
  bool ok = ForMembers(in, [&](std::string_view key) {
    if (key == "allocation") return seen.First(0) && ReadAllocation(in, c);
    if (key == "reservedFor") {
      if (!seen.First(1)) return false;
      if (NullNext(in)) return in.Null();
      return ForItems(in, [&] { return ReadConsumerReference(in, c.reserved_for.emplace_back()); });
    }
    return in.Skip();
  });
  if (ok) c.status_json.assign(in.Slice(begin, in.Offset()));
  return ok;
}

// Best effort, as in the tree reading: an annotation of another type, or
// annotations that are no object, are ignored.
bool ReadAnnotations(JsonPull& in, ResourceClaim& c) {
  if (in.Next() != JsonToken::kObject) return in.Skip();
  SeenMembers seen;
  return ForMembers(in, [&](std::string_view key) {
    if (key != "resource.kubernetes.io/pod-claim-name") return in.Skip();
    if (!seen.First(0)) return false;
    if (in.Next() != JsonToken::kString) return in.Skip();
    return in.String(c.pod_claim_name.emplace());
  });
}

bool ReadMetadata(JsonPull& in, ResourceClaim& c) {
  if (NullNext(in)) return in.Null();
  SeenMembers seen;
  return ForMembers(in, [&](std::string_view key) {
    if (key == "namespace") return seen.First(0) && ReadOptString(in, c.namespace_name);
    if (key == "name") return seen.First(1) && ReadOptString(in, c.name);
    if (key == "uid") return seen.First(2) && ReadOptString(in, c.uid);
    if (key == "resourceVersion") return seen.First(3) && ReadOptString(in, c.resource_version);
    if (key == "annotations") return seen.First(4) && ReadAnnotations(in, c);
    return in.Skip();
  });
}

}  // namespace

std::optional<ResourceClaim> DecodeResourceClaimFast(std::string_view text) {
  JsonPull in(text);
  ResourceClaim c;
  SeenMembers seen;
  bool ok = ForMembers(in, [&](std::string_view key) {
    if (key == "kind") {
      // Byte for byte: the tree reading refuses any other spelling.
      std::string kind;
      std::string_view raw;
      return seen.First(0) && in.String(kind, &raw) && raw == "\"ResourceClaim\"";
    }
    if (key == "apiVersion") return seen.First(1) && ReadOptString(in, c.api_version);
    if (key == "metadata") return seen.First(2) && ReadMetadata(in, c);
    if (key == "status") return seen.First(3) && ReadStatus(in, c);
    return in.Skip();
  });
  if (!ok || !in.AtEnd()) return std::nullopt;
  return c;
}

}  // namespace nvdra::kube
