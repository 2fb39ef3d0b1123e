// The GPU kind's undo record: which devices the claim's containers get, and
// one piece per plug-in with node-side work (claim_feature.h), each under
// the plug-in's own key, written and read by the plug-in's own codec. Written
// with PrepareStarted, completed with PrepareCompleted, and read by Prepare,
// by the spec rebuild of a repeated Prepare and by Unprepare alike.
//
// On disk: {"version": 1, "devices": ["gpu-0", ...], "<key>": <piece>, ...}
// plus, only where a piece is at a version other than 1,
// "pieceVersions": {"<key>": <version>}. A piece whose version is newer than
// its codec's, or whose shape its codec cannot read, is kept verbatim
// (`unreadable`), re-encoded as it was and reported by Unprepare; a key no
// codec knows stays among the unknown fields, verbatim too. The keys and
// shapes the plug-ins write are listed beside their codecs (gpu_undo_pieces.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/json_reader.h"
#include "util/status.h"

namespace nvdra::gpu {

inline constexpr int kGpuUndoVersion = 1;

// One plug-in's piece of the record, decoded.
class UndoPiece {
 public:
  virtual ~UndoPiece() = default;
  virtual std::unique_ptr<UndoPiece> Clone() const = 0;
  virtual bool Equals(const UndoPiece& other) const = 0;
  // Nothing to record: the piece is left out of the record.
  virtual bool Empty() const = 0;
  // Its JSON, under its key.
  virtual nlohmann::json Encode() const = 0;
  // The version Encode writes.
  virtual int version() const { return 1; }
};

// The boilerplate of a piece: `Self` is a value type with kKey (its key in
// the record), Empty(), Encode() and operator==.
template <typename Self>
class UndoPieceOf : public UndoPiece {
 public:
  std::unique_ptr<UndoPiece> Clone() const override { return std::make_unique<Self>(static_cast<const Self&>(*this)); }
  bool Equals(const UndoPiece& other) const override {
    const auto* o = dynamic_cast<const Self*>(&other);
    return o != nullptr && *o == static_cast<const Self&>(*this);
  }
  friend bool operator==(const UndoPieceOf&, const UndoPieceOf&) { return true; }
};

// How a plug-in's piece is read.
struct UndoPieceCodec {
  std::string key;
  // The newest version this build reads (and the one its pieces write).
  int version = 1;
  // Decodes the piece (never null) written at `version`. An error: the
  // record is malformed (InvalidArgument); nullptr: a piece this version
  // cannot read, kept verbatim. An empty piece is dropped (absent and empty
  // are one).
  std::function<Result<std::unique_ptr<UndoPiece>>(const JsonReader& piece, int version)> decode;
};
using UndoPieceCodecs = std::vector<UndoPieceCodec>;

// A copyable holder of one piece.
class UndoPieceSlot {
 public:
  UndoPieceSlot() = default;
  explicit UndoPieceSlot(std::unique_ptr<UndoPiece> p) : p_(std::move(p)) {}
  UndoPieceSlot(const UndoPieceSlot& o) : p_(o.p_ ? o.p_->Clone() : nullptr) {}
  UndoPieceSlot& operator=(const UndoPieceSlot& o) {
    if (this != &o) p_ = o.p_ ? o.p_->Clone() : nullptr;
    return *this;
  }
  UndoPieceSlot(UndoPieceSlot&&) = default;
  UndoPieceSlot& operator=(UndoPieceSlot&&) = default;
  UndoPiece* get() const { return p_.get(); }
  void reset(std::unique_ptr<UndoPiece> p) { p_ = std::move(p); }

 private:
  std::unique_ptr<UndoPiece> p_;
};

// A piece this version cannot read, as it was.
struct UnreadablePiece {
  nlohmann::json value;
  std::optional<int64_t> version;  // from pieceVersions, where it was there
  friend bool operator==(const UnreadablePiece&, const UnreadablePiece&) = default;
};

struct GpuUndo {
  int64_t version = kGpuUndoVersion;
  // Sorted, unique. Empty in a record imported from the Go driver's
  // checkpoint: the ledger's prepared devices say it then.
  std::vector<std::string> devices;
  // The plug-ins' pieces, by key.
  std::map<std::string, UndoPieceSlot> pieces;
  // Pieces this version cannot read, by key: kept verbatim, reported and
  // skipped by Unprepare.
  std::map<std::string, UnreadablePiece> unreadable;
  // Unknown top-level fields, and pieceVersions entries of keys no codec
  // here knows.
  nlohmann::json unknown = nlohmann::json::object();
  std::map<std::string, int64_t> unknown_piece_versions;

  // The piece P (null when the record has none).
  template <typename P>
  const P* Find() const {
    auto it = pieces.find(std::string(P::kKey));
    return it == pieces.end() ? nullptr : dynamic_cast<const P*>(it->second.get());
  }
  // The piece P, or an empty one when the record has none.
  template <typename P>
  const P& Of() const {
    static const P kEmpty;
    const P* p = Find<P>();
    return p != nullptr ? *p : kEmpty;
  }
  // The piece P, added empty when the record has none.
  template <typename P>
  P& Get() {
    UndoPieceSlot& slot = pieces[std::string(P::kKey)];
    if (dynamic_cast<P*>(slot.get()) == nullptr) slot.reset(std::make_unique<P>());
    return static_cast<P&>(*slot.get());
  }

  // Equal pieces (an empty one counts as absent) and fields.
  friend bool operator==(const GpuUndo& a, const GpuUndo& b);
};

nlohmann::json EncodeGpuUndo(const GpuUndo& undo);
// Null (no record) decodes as an empty record; a record of the wrong shape
// (not an object, a field of the wrong type) is InvalidArgument. `codecs`:
// the pieces this reader knows.
Result<GpuUndo> DecodeGpuUndo(const nlohmann::json& j, const UndoPieceCodecs& codecs);

// Reads a piece that is a list of items, as the built-in ones are: each item
// `decode` cannot read (nullopt) is kept verbatim among `unreadable`; a value
// that is not a list is an error, or with `lenient_shape` a piece this version
// cannot read (nullptr).
template <typename P, typename Item, typename DecodeItem>
Result<std::unique_ptr<UndoPiece>> DecodeListPiece(const JsonReader& value, bool lenient_shape,
                                                   std::vector<Item> P::*items,
                                                   std::vector<nlohmann::json> P::*unreadable,
                                                   const DecodeItem& decode) {
  if (!value.value().is_array()) {
    if (lenient_shape) return std::unique_ptr<UndoPiece>();
    NVDRA_RETURN_IF_ERROR(value.ForEachItem([](const JsonReader&) { return Status::Ok(); }));
  }
  auto piece = std::make_unique<P>();
  NVDRA_RETURN_IF_ERROR(value.ForEachItem([&](const JsonReader& item) {
    if (std::optional<Item> i = decode(item)) {
      ((*piece).*items).push_back(std::move(*i));
    } else {
      ((*piece).*unreadable).push_back(item.value());
    }
    return Status::Ok();
  }));
  return std::unique_ptr<UndoPiece>(std::move(piece));
}

// The items of a list piece followed by its unreadable ones, verbatim.
template <typename Item, typename EncodeItem>
nlohmann::json EncodeListPiece(const std::vector<Item>& items, const std::vector<nlohmann::json>& unreadable,
                               const EncodeItem& encode) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& i : items) out.push_back(encode(i));
  for (const auto& raw : unreadable) out.push_back(raw);
  return out;
}

}  // namespace nvdra::gpu
