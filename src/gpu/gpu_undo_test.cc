#include "gpu/gpu_undo.h"

#include <gtest/gtest.h>

namespace nvdra::gpu {
namespace {

using nlohmann::json;

TEST(GpuUndoTest, RoundTripsTheRecordPrepareWrites) {
  GpuUndo u;
  u.devices = {"gpu-0", "gpu-2"};
  u.time_slicing = {{"gpu-2", "GPU-2222", 2, json::object()}};
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
  ASSERT_EQ(u->time_slicing.size(), 1u);
  EXPECT_EQ(u->time_slicing[0].uuid, "GPU-1");
  EXPECT_EQ(EncodeGpuUndo(*u), j) << "a re-encode loses nothing a newer version wrote";
}

TEST(GpuUndoTest, MpsDaemonsRoundTripAndUnreadableOnesAreKeptVerbatim) {
  json j = json::parse(R"({"version": 1, "devices": ["gpu-0"], "timeSlicing": [],
      "mps": [{"id": "u-95a93", "namespace": "nvdra", "deployment": "mps-control-daemon-u-95a93",
               "root": "/p/mps/u-95a93", "uuids": ["GPU-a"], "exclusiveProcess": ["GPU-a"],
               "activeThreadPercentage": 20, "pinnedLimits": {"GPU-a": "10M"}, "multiUser": true, "later": 1},
              {"id": "newer", "deployment": 7}]})");
  auto u = DecodeGpuUndo(j);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->mps.size(), 1u);
  EXPECT_EQ(u->mps[0].deployment, "mps-control-daemon-u-95a93");
  EXPECT_EQ(u->mps[0].pinned_limits.at("GPU-a"), "10M");
  EXPECT_TRUE(u->mps[0].multi_user);
  EXPECT_EQ(u->mps[0].unknown, json::parse(R"({"later": 1})"));
  ASSERT_EQ(u->unreadable_mps.size(), 1u);
  EXPECT_EQ(EncodeGpuUndo(*u), j);
}

TEST(GpuUndoTest, OddShapesAreErrorValuesNotExceptions) {
  const char* bad[] = {
      R"("a string")", R"(42)", R"([1, 2])", R"({"devices": "gpu-0"})", R"({"devices": [0]})",
      R"({"timeSlicing": {"uuid": "x"}})", R"({"version": "1"})",
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
  EXPECT_EQ(DecodeGpuUndo(json::parse("42")).status().message(), "GPU undo record: expected an object, got a number (42)");
  // A version past int64 is refused rather than wrapped to -1.
  EXPECT_FALSE(DecodeGpuUndo(json::parse(R"({"version": 18446744073709551615})")).ok());
}

TEST(GpuUndoTest, MissingPartsReadAsEmpty) {
  for (const char* text : {"null", "{}", R"({"legacyCheckpoint": {"x": 1}})"}) {
    auto u = DecodeGpuUndo(json::parse(text));
    ASSERT_TRUE(u.ok()) << text << ": " << u.status().ToString();
    EXPECT_TRUE(u->devices.empty()) << text;
    EXPECT_TRUE(u->time_slicing.empty()) << text;
  }
  auto legacy = DecodeGpuUndo(json::parse(R"({"legacyCheckpoint": {"x": 1}})"));
  EXPECT_EQ(EncodeGpuUndo(*legacy)["legacyCheckpoint"], json::parse(R"({"x": 1})"));
}

TEST(GpuUndoTest, UnreadableTimeSliceItemsAreKeptApartVerbatim) {
  auto u = DecodeGpuUndo(json::parse(R"({"timeSlicing": [42, {"uuid": 7}, {"uuid": "GPU-ok"},
                                                        {"uuid": "GPU-big", "interval": 18446744073709551615}]})"));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->time_slicing.size(), 1u);
  EXPECT_EQ(u->time_slicing[0].uuid, "GPU-ok");
  ASSERT_EQ(u->unreadable_time_slicing.size(), 3u);
  EXPECT_EQ(u->unreadable_time_slicing[0], json(42));
  EXPECT_EQ(u->unreadable_time_slicing[2]["interval"], json(UINT64_MAX)) << "kept verbatim, not wrapped to -1";
  EXPECT_EQ(EncodeGpuUndo(*u)["timeSlicing"].size(), 4u);
}

}  // namespace
}  // namespace nvdra::gpu
