// The `sharing` block of the GPU kind's configs (GpuConfig and the device
// types' config kinds that share their devices) and the open registry of
// sharing strategies' settings. A strategy plug-in defines its settings block
// beside its own code (its strategy name, the gate that enables it, its JSON
// key inside `sharing`, its Go type, the config kinds that carry it, how it
// is decoded, defaulted, validated and written, what upstream's webhook
// leaves out of it) and registers it here; GpuSharing holds the blocks of one
// config by value and the configs decode, default, validate and write them
// without naming any strategy. A block's definition is typed:
//
//   struct FooSettings {
//     int level = 0;
//     static const SharingBlockKind& BlockKind();
//     friend bool operator==(const FooSettings&, const FooSettings&) = default;
//   };
//   const SharingBlockKind& FooSettings::BlockKind() {
//     static const SharingBlockKind kind = DefineSharingBlock<FooSettings>({
//         .strategy = "Foo", .gate = Gate::kFoo, .json_key = "fooConfig", .go_type = "FooConfig",
//         .config_kinds = {kGpuConfigKind},
//         .decode = DecodeFoo, .write_fields = WriteFoo});
//     return kind;
//   }
//   ...
//   NVDRA_RETURN_IF_ERROR(RegisterSharingBlock(FooSettings::BlockKind()));
#pragma once

#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config_walker.h"
#include "config/feature_gates.h"
#include "util/status.h"

namespace nvdra::gpu {

class SharingBlockKind;

// A settings block's value: a plain struct that names its kind with
// `static const SharingBlockKind& BlockKind()`.
template <class T>
concept SharingBlockValue = requires {
  { T::BlockKind() } -> std::same_as<const SharingBlockKind&>;
}
&&std::copy_constructible<T>&& std::equality_comparable<T>;

// The settings blocks of one `sharing`, by value (copies are deep), each
// absent until set. Two are equal when every block is (an absent one equals
// an absent one).
class SharingSettings {
 public:
  SharingSettings() = default;
  SharingSettings(const SharingSettings& other);
  SharingSettings& operator=(const SharingSettings& other);
  SharingSettings(SharingSettings&&) = default;
  SharingSettings& operator=(SharingSettings&&) = default;
  ~SharingSettings() = default;

  template <SharingBlockValue T>
  std::optional<T>& Of();
  template <SharingBlockValue T>
  const std::optional<T>& Of() const;

  friend bool operator==(const SharingSettings& a, const SharingSettings& b);

 private:
  struct Slot {
    virtual ~Slot() = default;
    virtual std::unique_ptr<Slot> Clone() const = 0;
    virtual bool HasValue() const = 0;
    virtual bool Equal(const Slot& other) const = 0;
  };
  template <class T>
  struct TypedSlot final : Slot {
    std::optional<T> value;
    std::unique_ptr<Slot> Clone() const override { return std::make_unique<TypedSlot>(*this); }
    bool HasValue() const override { return value.has_value(); }
    bool Equal(const Slot& other) const override { return value == static_cast<const TypedSlot&>(other).value; }
  };
  // Keyed by the block's JSON key.
  std::map<std::string, std::unique_ptr<Slot>, std::less<>> slots_;
};

// The `sharing` of a GPU kind's config: the chosen strategy and
// the strategies' settings blocks. Built like upstream's struct, one block
// (or std::nullopt) after the strategy: GpuSharing{"Foo", FooSettings{}}.
struct GpuSharing {
  std::string strategy;
  SharingSettings settings;

  GpuSharing() = default;
  template <class... Blocks>
  explicit GpuSharing(std::string strategy_name, Blocks&&... blocks) : strategy(std::move(strategy_name)) {
    (Put(std::forward<Blocks>(blocks)), ...);
  }

  // The block of type T, absent when the config has none.
  template <SharingBlockValue T>
  std::optional<T>& Settings() {
    return settings.Of<T>();
  }
  template <SharingBlockValue T>
  const std::optional<T>& Settings() const {
    return settings.Of<T>();
  }

  friend bool operator==(const GpuSharing&, const GpuSharing&) = default;

 private:
  void Put(std::nullopt_t) {}
  template <SharingBlockValue T>
  void Put(std::optional<T> block) {
    if (block) settings.Of<T>() = std::move(*block);
  }
  template <class T>
  requires SharingBlockValue<std::decay_t<T>>
  void Put(T&& block) { settings.Of<std::decay_t<T>>() = std::forward<T>(block); }
};

// A strategy's settings block with its operations on a GpuSharing. Made by
// DefineSharingBlock; lives for the whole program (a static of the value
// type's BlockKind()).
class SharingBlockKind {
 public:
  // The strategy ("sharing.strategy") whose settings the block holds, and
  // the gate without which choosing it is refused.
  std::string strategy;
  config::Gate gate{};
  // The block's member of `sharing`, and its Go type (in decoding errors
  // and in "cannot use <type> with the '<strategy>' strategy").
  std::string json_key;
  std::string go_type;
  // The config kinds whose `sharing` has the block (elsewhere a strict
  // decode refuses it).
  std::vector<std::string_view> config_kinds;

  // Decodes the block's member (null: no block) into `sharing`.
  std::function<void(config::ConfigWalker&, const config::JsonValue&, GpuSharing&)> decode;
  // The block exists and carries its implied defaults (the strategy is
  // chosen and its gate is on).
  std::function<void(GpuSharing&)> fill_defaults;
  // The block's own rules, when it is there.
  std::function<Status(const GpuSharing&)> validate;
  // Adds the block's member to `out` when it is there.
  std::function<void(const GpuSharing&, nlohmann::ordered_json& out)> write;
  std::function<bool(const GpuSharing&)> present;
  std::function<void(GpuSharing&)> reset;
  // Takes out of the block what upstream's webhook leaves to Prepare.
  std::function<void(GpuSharing&)> upstream_admission_view;
};

// What a strategy's author writes; typed on the block T. Only decode (which
// gets the block's object, its type already checked) is required.
template <class T>
struct SharingBlockDefinition {
  std::string strategy;
  config::Gate gate{};
  std::string json_key;
  std::string go_type;
  std::vector<std::string_view> config_kinds;
  void (*decode)(config::ConfigWalker&, const config::JsonValue&, T&) = nullptr;
  void (*fill_defaults)(T&) = nullptr;
  Status (*validate)(const T&) = nullptr;
  void (*write_fields)(const T&, nlohmann::ordered_json&) = nullptr;
  void (*upstream_admission_view)(T&) = nullptr;
};

namespace sharing_internal {
bool DecodeBlockObject(config::ConfigWalker& w, const config::JsonValue& v, std::string_view go_type);
}  // namespace sharing_internal

template <SharingBlockValue T>
SharingBlockKind DefineSharingBlock(const SharingBlockDefinition<T>& d) {
  SharingBlockKind k;
  k.strategy = d.strategy;
  k.gate = d.gate;
  k.json_key = d.json_key;
  k.go_type = d.go_type;
  k.config_kinds = d.config_kinds;
  k.decode = [decode = d.decode, go_type = d.go_type](config::ConfigWalker& w, const config::JsonValue& v,
                                                      GpuSharing& s) {
    if (v.type == config::JsonValue::Type::kNull) {
      s.Settings<T>().reset();
      return;
    }
    if (!sharing_internal::DecodeBlockObject(w, v, go_type)) return;
    T value{};
    decode(w, v, value);
    s.Settings<T>() = std::move(value);
  };
  k.fill_defaults = [f = d.fill_defaults](GpuSharing& s) {
    if (!s.Settings<T>()) s.Settings<T>().emplace();
    if (f != nullptr) f(*s.Settings<T>());
  };
  k.validate = [f = d.validate](const GpuSharing& s) {
    return f != nullptr && s.Settings<T>() ? f(*s.Settings<T>()) : Status::Ok();
  };
  k.write = [f = d.write_fields, key = d.json_key](const GpuSharing& s, nlohmann::ordered_json& out) {
    if (!s.Settings<T>()) return;
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    if (f != nullptr) f(*s.Settings<T>(), j);
    out[key] = std::move(j);
  };
  k.present = [](const GpuSharing& s) { return s.Settings<T>().has_value(); };
  k.reset = [](GpuSharing& s) { s.Settings<T>().reset(); };
  k.upstream_admission_view = [f = d.upstream_admission_view](GpuSharing& s) {
    if (f != nullptr && s.Settings<T>()) f(*s.Settings<T>());
  };
  return k;
}

// Makes `kind` known to the configs' `sharing`. Registering the same kind
// again does nothing; another kind for a registered strategy or JSON key is
// AlreadyExists. The order of registration is the order of the blocks in
// canonical JSON and of the strategies in upstream's "supported" list.
Status RegisterSharingBlock(const SharingBlockKind& kind);
std::vector<const SharingBlockKind*> RegisteredSharingBlocks();

// Which config's `sharing` an operation is for: the config kind (it has the
// blocks that name it) and the Go type of its `sharing` member.
struct SharingScope {
  std::string_view config_kind;
  std::string_view go_struct;
};

// The `sharing` member of a config (null: none), decoded strictly with the
// Go type names of upstream's API.
void DecodeSharing(config::ConfigWalker& w, const config::JsonValue& v, std::optional<GpuSharing>& out,
                   const SharingScope& scope);
// Upstream's Normalize: the chosen strategy's block exists, with its
// defaults, when the strategy's gate is on.
void NormalizeSharing(GpuSharing& s, const config::FeatureGates& gates, const SharingScope& scope);
// Upstream's Validate: a known strategy with its gate on, no other
// strategy's block, and the chosen block's own rules.
Status ValidateSharing(const GpuSharing& s, const config::FeatureGates& gates, const SharingScope& scope);
// The canonical JSON: the strategy, then the blocks in registration order.
nlohmann::ordered_json SharingToJson(const GpuSharing& s, const SharingScope& scope);
// Upstream's webhook looks only at the chosen strategy's block.
void UpstreamSharingView(GpuSharing& s, const SharingScope& scope);

template <SharingBlockValue T>
std::optional<T>& SharingSettings::Of() {
  const std::string& key = T::BlockKind().json_key;
  auto it = slots_.find(key);
  if (it == slots_.end()) it = slots_.emplace(key, std::make_unique<TypedSlot<T>>()).first;
  return static_cast<TypedSlot<T>&>(*it->second).value;
}

template <SharingBlockValue T>
const std::optional<T>& SharingSettings::Of() const {
  static const std::optional<T> kAbsent;
  auto it = slots_.find(T::BlockKind().json_key);
  return it == slots_.end() ? kAbsent : static_cast<const TypedSlot<T>&>(*it->second).value;
}

}  // namespace nvdra::gpu
