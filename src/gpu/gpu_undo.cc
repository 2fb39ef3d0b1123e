#include "gpu/gpu_undo.h"

#include <algorithm>
#include <string_view>

namespace nvdra::gpu {

using nlohmann::json;

namespace {

constexpr const char* kWhat = "GPU undo record";
constexpr const char* kPieceVersions = "pieceVersions";

bool Same(const std::map<std::string, UndoPieceSlot>& a, const std::map<std::string, UndoPieceSlot>& b) {
  auto next = [](const std::map<std::string, UndoPieceSlot>& m, auto it) {
    while (it != m.end() && (it->second.get() == nullptr || it->second.get()->Empty())) ++it;
    return it;
  };
  auto i = next(a, a.begin());
  auto j = next(b, b.begin());
  for (; i != a.end() && j != b.end(); i = next(a, ++i), j = next(b, ++j)) {
    if (i->first != j->first || !i->second.get()->Equals(*j->second.get())) return false;
  }
  return i == a.end() && j == b.end();
}

using VersionMap = std::map<std::string, int64_t>;

Result<VersionMap> PieceVersions(const JsonReader& r) {
  VersionMap out;
  NVDRA_ASSIGN_OR_RETURN(std::optional<JsonReader> versions, r.OptionalObject(kPieceVersions));
  if (!versions) return out;
  for (const auto& [key, v] : versions->value().items()) {
    NVDRA_ASSIGN_OR_RETURN(out[key], versions->Field(key).As<int64_t>());
  }
  return out;
}

Status DecodeInto(const JsonReader& r, const UndoPieceCodecs& codecs, GpuUndo& out) {
  NVDRA_RETURN_IF_ERROR(r.ExpectObject());
  NVDRA_ASSIGN_OR_RETURN(out.version, r.OptionalOr<int64_t>("version", kGpuUndoVersion));
  NVDRA_ASSIGN_OR_RETURN(out.devices, r.OptionalOr<std::vector<std::string>>("devices", {}));
  NVDRA_ASSIGN_OR_RETURN(VersionMap versions, PieceVersions(r));
  // Linear look-ups over a handful of keys, with no set built per record:
  // this runs on every prepare and unprepare.
  auto is_known = [&codecs](std::string_view key) {
    if (key == "version" || key == "devices" || key == kPieceVersions) return true;
    return std::any_of(codecs.begin(), codecs.end(), [key](const auto& c) { return c.key == key; });
  };
  for (auto codec_it = codecs.begin(); codec_it != codecs.end(); ++codec_it) {
    const auto& codec = *codec_it;
    if (std::string_view(codec.key) == "version" || std::string_view(codec.key) == "devices" ||
        std::string_view(codec.key) == kPieceVersions ||
        std::any_of(codecs.begin(), codec_it, [&codec](const auto& c) { return c.key == codec.key; })) {
      continue;  // the first codec of a key reads it
    }
    auto version_of = versions.find(codec.key);
    std::optional<int64_t> version;
    if (version_of != versions.end()) version = version_of->second;
    versions.erase(codec.key);
    if (!r.Has(codec.key)) continue;
    const json& value = r.value().at(codec.key);
    if (version.value_or(1) > codec.version || version.value_or(1) < 1) {
      out.unreadable[codec.key] = {value, version};
      continue;
    }
    NVDRA_ASSIGN_OR_RETURN(std::unique_ptr<UndoPiece> piece,
                           codec.decode(r.Field(codec.key), static_cast<int>(version.value_or(1))));
    if (piece == nullptr) {
      out.unreadable[codec.key] = {value, version};
    } else if (!piece->Empty()) {
      out.pieces[codec.key] = UndoPieceSlot(std::move(piece));
    }
  }
  out.unknown_piece_versions = std::move(versions);
  for (const auto& [key, value] : r.value().items()) {
    if (!is_known(key)) out.unknown[key] = value;
  }
  return Status::Ok();
}

}  // namespace

bool operator==(const GpuUndo& a, const GpuUndo& b) {
  return a.version == b.version && a.devices == b.devices && a.unreadable == b.unreadable && a.unknown == b.unknown &&
         a.unknown_piece_versions == b.unknown_piece_versions && Same(a.pieces, b.pieces);
}

json EncodeGpuUndo(const GpuUndo& undo) {
  json j = {{"version", undo.version}, {"devices", undo.devices}};
  json versions = json::object();
  for (const auto& [key, v] : undo.unknown_piece_versions) versions[key] = v;
  for (const auto& [key, slot] : undo.pieces) {
    if (slot.get() == nullptr || slot.get()->Empty()) continue;
    j[key] = slot.get()->Encode();
    if (slot.get()->version() != 1) versions[key] = slot.get()->version();
  }
  for (const auto& [key, piece] : undo.unreadable) {
    j[key] = piece.value;
    if (piece.version) versions[key] = *piece.version;
  }
  if (!versions.empty()) j[kPieceVersions] = std::move(versions);
  MergeUnknownMembers(j, undo.unknown);
  return j;
}

Result<GpuUndo> DecodeGpuUndo(const json& j, const UndoPieceCodecs& codecs) {
  GpuUndo out;
  if (j.is_null()) return out;
  NVDRA_RETURN_IF_ERROR(DecodeInto(JsonReader(j), codecs, out).Wrap(kWhat));
  return out;
}

}  // namespace nvdra::gpu
