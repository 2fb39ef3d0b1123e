#include "config/config_decoder.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "config/json_tree.h"
#include "util/parse_number.h"

namespace nvdra::config {
namespace {

// Walks a JsonValue against the schema of one config kind, collecting errors
// the way sigs.k8s.io/json does: the first type error is fatal (reported
// alone), strict errors are collected in document order, de-duplicated and
// capped at 100.
class Walker {
 public:
  explicit Walker(bool strict) : strict_(strict) {}

  struct Field {
    std::string_view name;
    std::function<void(const JsonValue&)> decode;
  };

  // Decodes the members of an object into the given fields. `go_struct` is the
  // Go type name, used in type errors to match upstream's wording.
  void Struct(const JsonValue& v, std::string_view go_struct, const std::vector<Field>& fields) {
    std::vector<bool> seen(fields.size(), false);
    for (const auto& [key, value] : v.members) {
      size_t i = 0;
      while (i < fields.size() && fields[i].name != key) ++i;
      if (i == fields.size()) {
        StrictError("unknown field", key);
        continue;
      }
      if (seen[i]) StrictError("duplicate field", key);
      seen[i] = true;
      Push(key, go_struct);
      fields[i].decode(value);
      Pop();
    }
  }

  // Members of a map-typed field (string keys).
  void Map(const JsonValue& v, const std::function<void(const std::string&, const JsonValue&)>& decode) {
    std::set<std::string> seen;
    for (const auto& [key, value] : v.members) {
      if (!seen.insert(key).second) StrictError("duplicate field", key);
      Push(key, struct_stack_.empty() ? "" : struct_stack_.back());
      decode(key, value);
      Pop();
    }
  }

  // Reports that `v` cannot be stored in a field of Go type `go_type`.
  // Returns false so callers can `return TypeError(...)`.
  bool TypeError(const JsonValue& v, std::string_view go_type) {
    if (fatal_) return false;
    std::string what(v.TypeName());
    if (v.type == JsonValue::Type::kNumber && go_type == "int") what = "number " + v.text;
    std::string field;
    for (const auto& p : path_) field += (field.empty() ? "" : ".") + p;
    fatal_ = "json: cannot unmarshal " + what + " into Go struct field " +
             (struct_stack_.empty() ? std::string() : struct_stack_.back()) + "." + field + " of type " +
             std::string(go_type);
    return false;
  }

  void Fatal(std::string message) {
    if (!fatal_) fatal_ = std::move(message);
  }

  std::string Path() const {
    std::string out;
    for (const auto& p : path_) out += (out.empty() ? "" : ".") + p;
    return out;
  }

  bool strict() const { return strict_; }
  bool failed() const { return fatal_.has_value(); }

  Status Finish() const {
    if (fatal_) return InvalidArgument(*fatal_);
    if (strict_errors_.empty()) return Status::Ok();
    std::string msg = "strict decoding error: ";
    for (size_t i = 0; i < strict_errors_.size(); ++i) msg += (i ? ", " : "") + strict_errors_[i];
    return InvalidArgument(msg);
  }

 private:
  void Push(const std::string& key, std::string_view go_struct) {
    path_.push_back(key);
    struct_stack_.emplace_back(go_struct);
  }
  void Pop() {
    path_.pop_back();
    struct_stack_.pop_back();
  }

  void StrictError(std::string_view type, const std::string& key) {
    if (!strict_) return;
    std::string path = Path();
    path += (path.empty() ? "" : ".") + key;
    std::string err = std::string(type) + " \"" + path + "\"";
    if (strict_errors_.size() >= 100 || !seen_errors_.insert(err).second) return;
    strict_errors_.push_back(std::move(err));
  }

  bool strict_;
  std::vector<std::string> path_;
  std::vector<std::string> struct_stack_;
  std::vector<std::string> strict_errors_;
  std::set<std::string> seen_errors_;
  std::optional<std::string> fatal_;
};

using Type = JsonValue::Type;

// JSON null leaves a Go value untouched (or clears a pointer), which is what
// every helper below does for kNull.

void String(Walker& w, const JsonValue& v, std::string& out, std::string_view go_type = "string") {
  if (v.type == Type::kNull) return;
  if (v.type != Type::kString) {
    w.TypeError(v, go_type);
    return;
  }
  out = v.text;
}

void OptString(Walker& w, const JsonValue& v, std::optional<std::string>& out, std::string_view go_type) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  if (v.type != Type::kString) {
    w.TypeError(v, go_type);
    return;
  }
  out = v.text;
}

void OptInt(Walker& w, const JsonValue& v, std::optional<int64_t>& out) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  Result<int64_t> n = v.type == Type::kNumber && v.is_integer
                          ? ParseInt64(v.text)
                          : Result<int64_t>(InvalidArgument("not an integer"));
  if (!n.ok()) {
    // Beyond int64 too: Go reports an overflow with the same message.
    w.TypeError(v, "int");
    return;
  }
  out = *n;
}

void OptBool(Walker& w, const JsonValue& v, std::optional<bool>& out) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  if (v.type != Type::kBool) {
    w.TypeError(v, "bool");
    return;
  }
  out = v.boolean;
}

// resource.Quantity accepts a JSON string or a bare number.
std::optional<Quantity> ParseQuantityValue(Walker& w, const JsonValue& v) {
  if (v.type != Type::kString && v.type != Type::kNumber) {
    if (w.strict()) w.Fatal("invalid quantity at \"" + w.Path() + "\": expected a string such as \"10Gi\", got " + std::string(v.TypeName()));
    return std::nullopt;
  }
  auto q = Quantity::Parse(v.text);
  if (!q.ok()) {
    if (w.strict()) w.Fatal("invalid quantity \"" + v.text + "\" at \"" + w.Path() + "\": " + q.status().message());
    return std::nullopt;
  }
  return *q;
}

void OptQuantity(Walker& w, const JsonValue& v, std::optional<Quantity>& out) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  if (auto q = ParseQuantityValue(w, v)) out = *q;
}

bool ExpectObject(Walker& w, const JsonValue& v, std::string_view go_type) {
  if (v.type == Type::kObject) return true;
  if (v.type != Type::kNull) w.TypeError(v, go_type);
  return false;
}

void DecodeMps(Walker& w, const JsonValue& v, std::optional<MpsConfig>& out) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  if (!ExpectObject(w, v, "v1beta1.MpsConfig")) return;
  MpsConfig c;
  w.Struct(v, "MpsConfig",
           {
               {"defaultActiveThreadPercentage", [&](const JsonValue& x) { OptInt(w, x, c.default_active_thread_percentage); }},
               {"defaultPinnedDeviceMemoryLimit", [&](const JsonValue& x) { OptQuantity(w, x, c.default_pinned_device_memory_limit); }},
               {"defaultPerDevicePinnedMemoryLimit",
                [&](const JsonValue& x) {
                  c.default_per_device_pinned_memory_limit.clear();
                  if (!ExpectObject(w, x, "v1beta1.MpsPerDevicePinnedMemoryLimit")) return;
                  w.Map(x, [&](const std::string& key, const JsonValue& q) {
                    if (q.type == Type::kNull) {
                      c.default_per_device_pinned_memory_limit[key] = Quantity();
                      return;
                    }
                    if (auto parsed = ParseQuantityValue(w, q)) c.default_per_device_pinned_memory_limit[key] = *parsed;
                  });
                }},
               {"multiUser", [&](const JsonValue& x) { OptBool(w, x, c.multi_user); }},
           });
  out = std::move(c);
}

void DecodeGpuConfig(Walker& w, const JsonValue& root, GpuConfig& c) {
  std::string ignored;
  w.Struct(root, "GpuConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"sharing",
                [&](const JsonValue& x) {
                  if (x.type == Type::kNull) {
                    c.sharing.reset();
                    return;
                  }
                  if (!ExpectObject(w, x, "v1beta1.GpuSharing")) return;
                  GpuSharing s;
                  w.Struct(x, "GpuSharing",
                           {
                               {"strategy", [&](const JsonValue& y) { String(w, y, s.strategy, "v1beta1.GpuSharingStrategy"); }},
                               {"timeSlicingConfig",
                                [&](const JsonValue& y) {
                                  if (y.type == Type::kNull) {
                                    s.time_slicing_config.reset();
                                    return;
                                  }
                                  if (!ExpectObject(w, y, "v1beta1.TimeSlicingConfig")) return;
                                  TimeSlicingConfig t;
                                  w.Struct(y, "TimeSlicingConfig",
                                           {{"interval", [&](const JsonValue& z) { OptString(w, z, t.interval, "v1beta1.TimeSliceInterval"); }}});
                                  s.time_slicing_config = std::move(t);
                                }},
                               {"mpsConfig", [&](const JsonValue& y) { DecodeMps(w, y, s.mps_config); }},
                           });
                  c.sharing = std::move(s);
                }},
           });
}

void DecodeMigDeviceConfig(Walker& w, const JsonValue& root, MigDeviceConfig& c) {
  std::string ignored;
  w.Struct(root, "MigDeviceConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"sharing",
                [&](const JsonValue& x) {
                  if (x.type == Type::kNull) {
                    c.sharing.reset();
                    return;
                  }
                  if (!ExpectObject(w, x, "v1beta1.MigDeviceSharing")) return;
                  MigDeviceSharing s;
                  w.Struct(x, "MigDeviceSharing",
                           {
                               {"strategy", [&](const JsonValue& y) { String(w, y, s.strategy, "v1beta1.GpuSharingStrategy"); }},
                               {"mpsConfig", [&](const JsonValue& y) { DecodeMps(w, y, s.mps_config); }},
                           });
                  c.sharing = std::move(s);
                }},
           });
}

void DecodeVfioDeviceConfig(Walker& w, const JsonValue& root, VfioDeviceConfig& c) {
  std::string ignored;
  w.Struct(root, "VfioDeviceConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"iommu",
                [&](const JsonValue& x) {
                  if (x.type == Type::kNull) {
                    c.iommu.reset();
                    return;
                  }
                  if (!ExpectObject(w, x, "v1beta1.IOMMUConfig")) return;
                  IommuConfig i;
                  w.Struct(x, "IOMMUConfig",
                           {
                               {"backendPolicy", [&](const JsonValue& y) { String(w, y, i.backend_policy, "v1beta1.IOMMUBackendPolicy"); }},
                               {"enableAPIDevice", [&](const JsonValue& y) { OptBool(w, y, i.enable_api_device); }},
                           });
                  c.iommu = std::move(i);
                }},
           });
}

void DecodeChannelConfig(Walker& w, const JsonValue& root, ComputeDomainChannelConfig& c) {
  std::string ignored;
  w.Struct(root, "ComputeDomainChannelConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"domainID", [&](const JsonValue& x) { String(w, x, c.domain_id); }},
               {"allocationMode", [&](const JsonValue& x) { String(w, x, c.allocation_mode); }},
           });
}

void DecodeDaemonConfig(Walker& w, const JsonValue& root, ComputeDomainDaemonConfig& c) {
  std::string ignored;
  w.Struct(root, "ComputeDomainDaemonConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"domainID", [&](const JsonValue& x) { String(w, x, c.domain_id); }},
           });
}

// Keeps error messages that quote the document readable.
std::string Excerpt(std::string_view json) {
  constexpr size_t kMax = 256;
  if (json.size() <= kMax) return std::string(json);
  return std::string(json.substr(0, kMax)) + "...";
}

struct TypeMeta {
  std::string api_version;
  std::string kind;
};

// The Kubernetes meta factory's first pass: find apiVersion and kind (last
// occurrence wins, as in encoding/json) before choosing a type.
Result<TypeMeta> Interpret(const JsonValue& root) {
  if (root.type != Type::kObject) {
    return InvalidArgument("couldn't get version/kind; json parse error: json: cannot unmarshal " +
                           std::string(root.TypeName()) + " into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }");
  }
  TypeMeta meta;
  for (const auto& [key, value] : root.members) {
    if (key != "apiVersion" && key != "kind") continue;
    if (value.type == Type::kNull) continue;
    if (value.type != Type::kString) {
      return InvalidArgument("couldn't get version/kind; json parse error: json: cannot unmarshal " +
                             std::string(value.TypeName()) + " into Go struct field ." + key + " of type string");
    }
    (key == "kind" ? meta.kind : meta.api_version) = value.text;
  }
  return meta;
}

Result<Config> Decode(std::string_view json, bool strict) {
  JsonParseLimits limits;
  if (!strict) limits.max_bytes = 64 << 20;  // our own records: never refuse on size
  auto parsed = ParseJson(json, limits);
  if (!parsed.ok()) {
    return InvalidArgument("couldn't get version/kind; " + parsed.status().message());
  }
  const JsonValue& root = *parsed;
  NVDRA_ASSIGN_OR_RETURN(TypeMeta meta, Interpret(root));
  if (std::count(meta.api_version.begin(), meta.api_version.end(), '/') > 1) {
    return InvalidArgument("unexpected GroupVersion string: " + meta.api_version);
  }
  if (meta.kind.empty()) return InvalidArgument("Object 'Kind' is missing in '" + Excerpt(json) + "'");
  if (meta.api_version.empty()) return InvalidArgument("Object 'apiVersion' is missing in '" + Excerpt(json) + "'");
  if (meta.api_version != kApiVersion) {
    return InvalidArgument("no kind \"" + meta.kind + "\" is registered for version \"" + meta.api_version +
                           "\"; opaque configs of this driver use apiVersion \"" + std::string(kApiVersion) + "\"");
  }

  Walker w(strict);
  Config config;
  if (meta.kind == kGpuConfigKind) {
    GpuConfig c;
    DecodeGpuConfig(w, root, c);
    config = std::move(c);
  } else if (meta.kind == kMigDeviceConfigKind) {
    MigDeviceConfig c;
    DecodeMigDeviceConfig(w, root, c);
    config = std::move(c);
  } else if (meta.kind == kVfioDeviceConfigKind) {
    VfioDeviceConfig c;
    DecodeVfioDeviceConfig(w, root, c);
    config = std::move(c);
  } else if (meta.kind == kComputeDomainChannelConfigKind) {
    ComputeDomainChannelConfig c;
    DecodeChannelConfig(w, root, c);
    config = std::move(c);
  } else if (meta.kind == kComputeDomainDaemonConfigKind) {
    ComputeDomainDaemonConfig c;
    DecodeDaemonConfig(w, root, c);
    config = std::move(c);
  } else {
    return InvalidArgument("no kind \"" + meta.kind + "\" is registered for version \"" + meta.api_version +
                           "\"; known kinds: GpuConfig, MigDeviceConfig, VfioDeviceConfig, "
                           "ComputeDomainChannelConfig, ComputeDomainDaemonConfig");
  }
  if (strict) NVDRA_RETURN_IF_ERROR(w.Finish());
  return config;
}

}  // namespace

Result<Config> DecodeStrict(std::string_view json) { return Decode(json, /*strict=*/true); }

Result<Config> DecodeLenient(std::string_view json) { return Decode(json, /*strict=*/false); }

}  // namespace nvdra::config
