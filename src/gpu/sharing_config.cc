#include "gpu/sharing_config.h"

#include <algorithm>

#include "util/mutex.h"

namespace nvdra::gpu {
namespace {

using config::FeatureGates;

struct Registry {
  SharedMutex mu;
  std::vector<const SharingBlockKind*> kinds GUARDED_BY(mu);
};

// Built on first use, so registering from a static initializer is safe.
Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// The blocks a config of `scope` has, in registration order.
std::vector<const SharingBlockKind*> BlocksOf(const SharingScope& scope) {
  std::vector<const SharingBlockKind*> out;
  for (const SharingBlockKind* k : RegisteredSharingBlocks()) {
    if (std::find(k->config_kinds.begin(), k->config_kinds.end(), scope.config_kind) != k->config_kinds.end()) {
      out.push_back(k);
    }
  }
  return out;
}

// The strategy's block kind (whether or not the scope has the block), or null.
const SharingBlockKind* StrategyKind(std::string_view strategy) {
  for (const SharingBlockKind* k : RegisteredSharingBlocks()) {
    if (k->strategy == strategy) return k;
  }
  return nullptr;
}

Status ValidateStrategy(const std::string& strategy, const FeatureGates& gates) {
  if (const SharingBlockKind* k = StrategyKind(strategy)) {
    if (gates.Enabled(k->gate)) return Status::Ok();
    return InvalidArgument(Quote(strategy) + " is selected as the GPU sharing strategy, but the " +
                           Quote(FeatureGates::Name(k->gate)) + " feature gate is not enabled");
  }
  std::string supported;
  for (const SharingBlockKind* k : RegisteredSharingBlocks()) {
    supported += (supported.empty() ? "" : ", ") + k->strategy;
  }
  return InvalidArgument("unknown GPU sharing strategy: " + strategy +
                         ", supported GPU sharing strategies: " + supported);
}

}  // namespace

namespace sharing_internal {
bool DecodeBlockObject(config::ConfigWalker& w, const config::JsonValue& v, std::string_view go_type) {
  return config::fields::ExpectObject(w, v, "v1beta1." + std::string(go_type));
}
}  // namespace sharing_internal

SharingSettings::SharingSettings(const SharingSettings& other) {
  for (const auto& [key, slot] : other.slots_) slots_.emplace(key, slot->Clone());
}

SharingSettings& SharingSettings::operator=(const SharingSettings& other) {
  if (this != &other) *this = SharingSettings(other);
  return *this;
}

bool operator==(const SharingSettings& a, const SharingSettings& b) {
  auto covered = [](const SharingSettings& x, const SharingSettings& y) {
    for (const auto& [key, slot] : x.slots_) {
      auto it = y.slots_.find(key);
      if (it == y.slots_.end()) {
        if (slot->HasValue()) return false;
      } else if (!slot->Equal(*it->second)) {
        return false;
      }
    }
    return true;
  };
  return covered(a, b) && covered(b, a);
}

Status RegisterSharingBlock(const SharingBlockKind& kind) {
  if (kind.strategy.empty() || kind.json_key.empty() || !kind.decode) {
    return InvalidArgument("a sharing settings block needs a strategy, a JSON key and a decoder");
  }
  Registry& r = TheRegistry();
  WriterMutexLock lock(r.mu);
  for (const SharingBlockKind* k : r.kinds) {
    if (k == &kind) return Status::Ok();
    if (k->strategy == kind.strategy || k->json_key == kind.json_key) {
      return AlreadyExists("sharing settings of strategy " + kind.strategy + " are registered already");
    }
  }
  r.kinds.push_back(&kind);
  return Status::Ok();
}

std::vector<const SharingBlockKind*> RegisteredSharingBlocks() {
  Registry& r = TheRegistry();
  ReaderMutexLock lock(r.mu);
  return r.kinds;
}

void DecodeSharing(config::ConfigWalker& w, const config::JsonValue& v, std::optional<GpuSharing>& out,
                   const SharingScope& scope) {
  if (v.type == config::JsonValue::Type::kNull) {
    out.reset();
    return;
  }
  if (!config::fields::ExpectObject(w, v, "v1beta1." + std::string(scope.go_struct))) return;
  GpuSharing s;
  std::vector<config::ConfigWalker::Field> fields;
  fields.push_back({"strategy", [&](const config::JsonValue& y) {
                      config::fields::String(w, y, s.strategy, "v1beta1.GpuSharingStrategy");
                    }});
  for (const SharingBlockKind* k : BlocksOf(scope)) {
    fields.push_back({k->json_key, [&w, &s, k](const config::JsonValue& y) { k->decode(w, y, s); }});
  }
  w.Struct(v, scope.go_struct, fields);
  out = std::move(s);
}

void NormalizeSharing(GpuSharing& s, const FeatureGates& gates, const SharingScope& scope) {
  for (const SharingBlockKind* k : BlocksOf(scope)) {
    if (k->strategy == s.strategy && gates.Enabled(k->gate)) k->fill_defaults(s);
  }
}

Status ValidateSharing(const GpuSharing& s, const FeatureGates& gates, const SharingScope& scope) {
  NVDRA_RETURN_IF_ERROR(ValidateStrategy(s.strategy, gates));
  const std::vector<const SharingBlockKind*> blocks = BlocksOf(scope);
  for (const SharingBlockKind* k : blocks) {
    if (k->strategy != s.strategy && k->present(s)) {
      return InvalidArgument("cannot use " + k->go_type + " with the '" + s.strategy + "' strategy");
    }
  }
  for (const SharingBlockKind* k : blocks) {
    if (k->strategy == s.strategy) return k->validate(s);
  }
  return Status::Ok();
}

nlohmann::ordered_json SharingToJson(const GpuSharing& s, const SharingScope& scope) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["strategy"] = s.strategy;
  for (const SharingBlockKind* k : BlocksOf(scope)) k->write(s, j);
  return j;
}

void UpstreamSharingView(GpuSharing& s, const SharingScope& scope) {
  const std::vector<const SharingBlockKind*> blocks = BlocksOf(scope);
  if (StrategyKind(s.strategy) != nullptr) {
    for (const SharingBlockKind* k : blocks) {
      if (k->strategy != s.strategy) k->reset(s);
    }
  }
  for (const SharingBlockKind* k : blocks) k->upstream_admission_view(s);
}

}  // namespace nvdra::gpu
