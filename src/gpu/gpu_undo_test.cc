#include "gpu/gpu_undo.h"

#include <gtest/gtest.h>

#include "gpu/fabric_partition_undo.h"
#include "gpu/gpu_undo_pieces.h"
#include "gpu/mps_undo.h"
#include "gpu/time_slicing_undo.h"

namespace nvdra::gpu {
namespace {

using nlohmann::json;

TEST(GpuUndoTest, RoundTripsTheRecordPrepareWrites) {
  GpuUndo u;
  u.devices = {"gpu-0", "gpu-2"};
  u.Get<TimeSlicingUndo>().items = {{"gpu-2", "GPU-2222", 2, json::object()}};
  json j = EncodeGpuUndo(u);
  EXPECT_EQ(j.dump(),
            R"({"devices":["gpu-0","gpu-2"],"timeSlicing":[{"device":"gpu-2","interval":2,"uuid":"GPU-2222"}],)"
            R"("version":1})");
  auto back = DecodeGpuUndo(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, u);
}

TEST(GpuUndoTest, KeepsFieldsOfANewerVersion) {
  json j = json::parse(R"({"version": 7, "devices": ["gpu-1"], "mps": {"daemon": "x"},
                          "timeSlicing": [{"uuid": "GPU-1", "interval": 1, "device": "gpu-1", "priority": 3}]})");
  auto u = DecodeGpuUndo(j);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->version, 7);
  ASSERT_EQ(u->Of<TimeSlicingUndo>().items.size(), 1u);
  EXPECT_EQ(u->Of<TimeSlicingUndo>().items[0].uuid, "GPU-1");
  EXPECT_EQ(EncodeGpuUndo(*u), j) << "a re-encode loses nothing a newer version wrote";
}

TEST(GpuUndoTest, MpsDaemonsRoundTripAndUnreadableOnesAreKeptVerbatim) {
  json j = json::parse(R"({"version": 1, "devices": ["gpu-0"],
      "mps": [{"id": "u-95a93", "namespace": "nvdra", "deployment": "mps-control-daemon-u-95a93",
               "root": "/p/mps/u-95a93", "uuids": ["GPU-a"], "exclusiveProcess": ["GPU-a"],
               "activeThreadPercentage": 20, "pinnedLimits": {"GPU-a": "10M"}, "multiUser": true, "later": 1},
              {"id": "newer", "deployment": 7}]})");
  auto u = DecodeGpuUndo(j);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->Of<MpsUndo>().daemons.size(), 1u);
  EXPECT_EQ(u->Of<MpsUndo>().daemons[0].deployment, "mps-control-daemon-u-95a93");
  EXPECT_EQ(u->Of<MpsUndo>().daemons[0].pinned_limits.at("GPU-a"), "10M");
  EXPECT_TRUE(u->Of<MpsUndo>().daemons[0].multi_user);
  EXPECT_EQ(u->Of<MpsUndo>().daemons[0].unknown, json::parse(R"({"later": 1})"));
  ASSERT_EQ(u->Of<MpsUndo>().unreadable.size(), 1u);
  EXPECT_EQ(EncodeGpuUndo(*u), j);
}

TEST(GpuUndoTest, OddShapesAreErrorValuesNotExceptions) {
  const char* bad[] = {
      R"("a string")",       R"(42)",
      R"([1, 2])",           R"({"devices": "gpu-0"})",
      R"({"devices": [0]})", R"({"timeSlicing": {"uuid": "x"}})",
      R"({"version": "1"})",
  };
  for (const char* text : bad) {
    Result<GpuUndo> u = Internal("not run");
    EXPECT_NO_THROW(u = DecodeGpuUndo(json::parse(text))) << text;
    EXPECT_FALSE(u.ok()) << text;
    EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << text;
  }
}

TEST(GpuUndoTest, ErrorsNameTheRecordAndTheField) {
  EXPECT_EQ(DecodeGpuUndo(json::parse(R"({"devices": ["gpu-0", 0]})")).status().message(),
            "GPU undo record: devices[1]: expected a string, got a number (0)");
  EXPECT_EQ(DecodeGpuUndo(json::parse(R"({"version": "1"})")).status().message(),
            "GPU undo record: version: expected an integer, got a string");
  EXPECT_EQ(DecodeGpuUndo(json::parse("42")).status().message(),
            "GPU undo record: expected an object, got a number (42)");
  // A version past int64 is refused rather than wrapped to -1.
  EXPECT_FALSE(DecodeGpuUndo(json::parse(R"({"version": 18446744073709551615})")).ok());
}

TEST(GpuUndoTest, MissingPartsReadAsEmpty) {
  for (const char* text : {"null", "{}", R"({"legacyCheckpoint": {"x": 1}})"}) {
    auto u = DecodeGpuUndo(json::parse(text));
    ASSERT_TRUE(u.ok()) << text << ": " << u.status().ToString();
    EXPECT_TRUE(u->devices.empty()) << text;
    EXPECT_TRUE(u->Of<TimeSlicingUndo>().items.empty()) << text;
  }
  auto legacy = DecodeGpuUndo(json::parse(R"({"legacyCheckpoint": {"x": 1}})"));
  EXPECT_EQ(EncodeGpuUndo(*legacy)["legacyCheckpoint"], json::parse(R"({"x": 1})"));
}

TEST(GpuUndoTest, UnreadableTimeSliceItemsAreKeptApartVerbatim) {
  auto u = DecodeGpuUndo(json::parse(R"({"timeSlicing": [42, {"uuid": 7}, {"uuid": "GPU-ok"},
                                                        {"uuid": "GPU-big", "interval": 18446744073709551615}]})"));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->Of<TimeSlicingUndo>().items.size(), 1u);
  EXPECT_EQ(u->Of<TimeSlicingUndo>().items[0].uuid, "GPU-ok");
  ASSERT_EQ(u->Of<TimeSlicingUndo>().unreadable.size(), 3u);
  EXPECT_EQ(u->Of<TimeSlicingUndo>().unreadable[0], json(42));
  EXPECT_EQ(u->Of<TimeSlicingUndo>().unreadable[2]["interval"], json(UINT64_MAX)) << "kept verbatim, not wrapped to -1";
  EXPECT_EQ(EncodeGpuUndo(*u)["timeSlicing"].size(), 4u);
}

// A piece of its own: a plug-in's piece at version 2, which a reader at
// version 1 of that piece keeps verbatim.
struct CounterUndo final : UndoPieceOf<CounterUndo> {
  static constexpr std::string_view kKey = "counter";
  int64_t count = 0;
  int written_at = 2;
  bool Empty() const override { return count == 0; }
  json Encode() const override { return {{"count", count}}; }
  int version() const override { return written_at; }
  friend bool operator==(const CounterUndo&, const CounterUndo&) = default;
};

UndoPieceCodec CounterCodec(int version) {
  return {"counter", version, [](const JsonReader& value, int at) -> Result<std::unique_ptr<UndoPiece>> {
            auto count = value.Required<int64_t>("count");
            if (!count.ok()) return std::unique_ptr<UndoPiece>();
            auto p = std::make_unique<CounterUndo>();
            p->count = *count;
            p->written_at = at;
            return std::unique_ptr<UndoPiece>(std::move(p));
          }};
}

TEST(GpuUndoTest, EachPieceHasItsOwnVersionAndANewerOneIsKeptVerbatim) {
  GpuUndo u;
  u.devices = {"gpu-0"};
  u.Get<CounterUndo>().count = 3;
  json j = EncodeGpuUndo(u);
  EXPECT_EQ(j["counter"], json::parse(R"({"count": 3})"));
  EXPECT_EQ(j["pieceVersions"], json::parse(R"({"counter": 2})")) << "a piece past version 1 says so";
  // A reader of version 2 reads it.
  auto back = DecodeGpuUndo(j, {CounterCodec(2)});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Of<CounterUndo>().count, 3);
  EXPECT_EQ(*back, u);
  // A reader of version 1 keeps it verbatim, reports it, and writes it back.
  auto old = DecodeGpuUndo(j, {CounterCodec(1)});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->Find<CounterUndo>(), nullptr);
  ASSERT_EQ(old->unreadable.count("counter"), 1u);
  EXPECT_EQ(old->unreadable.at("counter").version, 2);
  EXPECT_EQ(EncodeGpuUndo(*old), j);
  // A reader without the piece keeps it among the unknown fields.
  auto none = DecodeGpuUndo(j, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->unknown["counter"], j["counter"]);
  EXPECT_EQ(EncodeGpuUndo(*none), j);
  // The built-in pieces are all at version 1: today's records carry no versions.
  GpuUndo builtin;
  builtin.Get<TimeSlicingUndo>().items = {{"gpu-2", "GPU-2222", 2, json::object()}};
  builtin.Get<FabricUndo>().partition = FabricPartitionUndo{3, {1, 2}, json::object()};
  EXPECT_FALSE(EncodeGpuUndo(builtin).contains("pieceVersions"));
  EXPECT_FALSE(DecodeGpuUndo(json::parse(R"({"pieceVersions": {"counter": "2"}})"), {CounterCodec(2)}).ok());
}

TEST(GpuUndoTest, AnEmptyPieceIsAnAbsentOne) {
  GpuUndo a, b;
  a.Get<MpsUndo>();
  EXPECT_EQ(a, b);
  EXPECT_FALSE(EncodeGpuUndo(a).contains("mps"));
  auto back = DecodeGpuUndo(json::parse(R"({"mps": [], "timeSlicing": []})"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, b);
}

}  // namespace
}  // namespace nvdra::gpu
