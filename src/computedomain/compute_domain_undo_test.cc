#include "computedomain/compute_domain_undo.h"

#include <gtest/gtest.h>

namespace nvdra::computedomain {
namespace {

using nlohmann::json;

TEST(ComputeDomainUndoTest, RoundTripsChannelAndDaemonRecords) {
  ComputeDomainUndo ch;
  ch.domain_id = "cd-1";
  ch.channels = {{"channel-3", 3, json::object()}};
  EXPECT_EQ(EncodeComputeDomainUndo(ch).dump(),
            R"({"allChannels":false,"channels":[{"device":"channel-3","id":3}],"daemon":false,"domainID":"cd-1",)"
            R"("version":1})");
  auto back = DecodeComputeDomainUndo(EncodeComputeDomainUndo(ch));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, ch);

  ComputeDomainUndo d;
  d.domain_id = "cd-1";
  d.daemon = true;
  d.domain_name = "my-domain";
  d.domain_namespace = "default";
  json j = EncodeComputeDomainUndo(d);
  EXPECT_EQ(j["domainName"], "my-domain");
  auto dback = DecodeComputeDomainUndo(j);
  ASSERT_TRUE(dback.ok());
  EXPECT_EQ(*dback, d);
}

TEST(ComputeDomainUndoTest, KeepsFieldsOfANewerVersion) {
  json j = json::parse(R"({"version": 2, "domainID": "cd-1", "daemon": true, "cliqueID": "c.1",
                          "channels": [{"device": "channel-0", "id": 0, "mode": "x"}], "allChannels": false})");
  auto u = DecodeComputeDomainUndo(j);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->version, 2);
  EXPECT_TRUE(u->daemon);
  EXPECT_EQ(EncodeComputeDomainUndo(*u), j);
}

TEST(ComputeDomainUndoTest, OddShapesAreErrorValuesNotExceptions) {
  const char* bad[] = {
      R"([])",
      R"("x")",
      R"({"daemon": "yes"})",
      R"({"daemon": 1})",
      R"({"domainID": 7})",
      R"({"channels": {}})",
      R"({"channels": [7]})",
      R"({"channels": [{"device": "channel-0"}]})",
      R"({"channels": [{"device": "channel-0", "id": -1}]})",
      R"({"allChannels": "true"})",
  };
  for (const char* text : bad) {
    Result<ComputeDomainUndo> u = Internal("not run");
    EXPECT_NO_THROW(u = DecodeComputeDomainUndo(json::parse(text))) << text;
    EXPECT_FALSE(u.ok()) << text;
    EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << text;
  }
}

TEST(ComputeDomainUndoTest, ErrorsNameTheRecordAndTheField) {
  EXPECT_EQ(DecodeComputeDomainUndo(json::parse(R"({"daemon": "yes"})")).status().message(),
            "ComputeDomain undo record: daemon: expected a boolean, got a string");
  EXPECT_EQ(
      DecodeComputeDomainUndo(json::parse(R"({"channels": [{"device": "channel-0", "id": 0}, 7]})")).status().message(),
      "ComputeDomain undo record: channels[1]: expected an object, got a number (7)");
  EXPECT_EQ(
      DecodeComputeDomainUndo(json::parse(R"({"channels": [{"device": "channel-0", "id": -1}]})")).status().message(),
      "ComputeDomain undo record: channels[0]: a channel needs a device and an id in 0..2147483647: "
      R"({"device":"channel-0","id":-1})");
  EXPECT_EQ(DecodeComputeDomainUndo(json::parse("[]")).status().message(),
            "ComputeDomain undo record: expected an object, got an array");
  // An id past 64 bits is refused, not wrapped to a negative one.
  EXPECT_FALSE(
      DecodeComputeDomainUndo(json::parse(R"({"channels": [{"device": "c", "id": 18446744073709551615}]})")).ok());
}

TEST(ComputeDomainUndoTest, AnImportedRecordReadsAsNothingToUndo) {
  auto u = DecodeComputeDomainUndo(json::parse(R"({"legacyCheckpoint": {"status": {}}})"));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_FALSE(u->daemon);
  EXPECT_TRUE(u->channels.empty());
  EXPECT_TRUE(EncodeComputeDomainUndo(*u).contains("legacyCheckpoint"));
}

}  // namespace
}  // namespace nvdra::computedomain
