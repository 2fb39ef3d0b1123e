// The config decoder with nvdra's config kinds, registered as the programs
// register them.
#include "config/config_decoder.h"

#include <gtest/gtest.h>
#include <random>

#include "cmd/config_kinds/config_kinds.h"
#include "computedomain/compute_domain_config_kinds.h"
#include "gpu/gpu_config_kinds.h"
#include "gpu/mig_config.h"
#include "gpu/mps_config.h"
#include "gpu/time_slicing_config.h"
#include "gpu/vfio_config.h"

namespace nvdra::config {
namespace {

using computedomain::ComputeDomainChannelConfig;
using computedomain::ComputeDomainDaemonConfig;
using gpu::GpuConfig;
using gpu::GpuSharing;
using gpu::IommuConfig;
using gpu::MigDeviceConfig;
using gpu::MpsConfig;
using gpu::TimeSliceInterval;
using gpu::TimeSlicingConfig;
using gpu::VfioDeviceConfig;

[[maybe_unused]] const bool kDecoderTestKinds = RegisterNvdraConfigKinds().ok();

std::string ErrorOf(std::string_view json) {
  auto c = DecodeStrict(json);
  if (c.ok()) return "<decoded>";
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << json;
  return c.status().message();
}

constexpr char kHeader[] = R"("apiVersion":"resource.nvidia.com/v1beta1",)";

std::string Doc(std::string_view kind, std::string_view rest) {
  std::string s = "{" + std::string(kHeader) + "\"kind\":\"" + std::string(kind) + "\"";
  if (!rest.empty()) s += "," + std::string(rest);
  return s + "}";
}

TEST(ConfigDecoderTest, DecodesGpuConfigWithTimeSlicing) {
  auto c = DecodeStrict(Doc("GpuConfig",
                            R"("sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}})"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto& g = c->Get<GpuConfig>();
  ASSERT_TRUE(g.sharing.has_value());
  EXPECT_EQ(g.sharing->strategy, "TimeSlicing");
  ASSERT_TRUE(g.sharing->Settings<TimeSlicingConfig>().has_value());
  EXPECT_EQ(g.sharing->Settings<TimeSlicingConfig>()->interval, "Long");
  EXPECT_FALSE(g.sharing->Settings<MpsConfig>().has_value());
  EXPECT_EQ(TimeSliceOf(g), TimeSliceInterval::kLong);
}

TEST(ConfigDecoderTest, DecodesMpsConfigWithQuantities) {
  auto c = DecodeStrict(Doc("GpuConfig", R"("sharing":{"strategy":"MPS","mpsConfig":{
      "defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi",
      "defaultPerDevicePinnedMemoryLimit":{"0":"1Gi","GPU-abc":2048}}})"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto& mps = *c->Get<GpuConfig>().sharing->Settings<MpsConfig>();
  EXPECT_EQ(mps.default_active_thread_percentage, 50);
  ASSERT_TRUE(mps.default_pinned_device_memory_limit.has_value());
  EXPECT_EQ(mps.default_pinned_device_memory_limit->value(), 10LL << 30);
  ASSERT_EQ(mps.default_per_device_pinned_memory_limit.size(), 2u);
  EXPECT_EQ(mps.default_per_device_pinned_memory_limit.at("0").value(), 1LL << 30);
  EXPECT_EQ(mps.default_per_device_pinned_memory_limit.at("GPU-abc").value(), 2048);
  EXPECT_FALSE(mps.multi_user.has_value());
  auto multi = DecodeStrict(Doc("GpuConfig", R"("sharing":{"strategy":"MPS","mpsConfig":{"multiUser":true}})"));
  ASSERT_TRUE(multi.ok()) << multi.status().message();
  EXPECT_EQ(multi->Get<GpuConfig>().sharing->Settings<MpsConfig>()->multi_user, true);
}

TEST(ConfigDecoderTest, DecodesEveryKind) {
  auto mig = DecodeStrict(Doc("MigDeviceConfig", R"("sharing":{"strategy":"TimeSlicing"})"));
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  EXPECT_TRUE(mig->Get<MigDeviceConfig>().IsTimeSlicing());

  auto vfio = DecodeStrict(Doc("VfioDeviceConfig",
                               R"("iommu":{"backendPolicy":"PreferIommuFD","enableAPIDevice":true})"));
  ASSERT_TRUE(vfio.ok()) << vfio.status().ToString();
  EXPECT_EQ(vfio->Get<VfioDeviceConfig>().iommu->backend_policy, "PreferIommuFD");
  EXPECT_EQ(vfio->Get<VfioDeviceConfig>().iommu->enable_api_device, true);

  auto chan = DecodeStrict(Doc("ComputeDomainChannelConfig", R"("domainID":"cd-uid","allocationMode":"All")"));
  ASSERT_TRUE(chan.ok());
  EXPECT_EQ(chan->Get<ComputeDomainChannelConfig>().domain_id, "cd-uid");
  EXPECT_EQ(chan->Get<ComputeDomainChannelConfig>().allocation_mode, "All");

  auto daemon = DecodeStrict(Doc("ComputeDomainDaemonConfig", R"("domainID":"cd-uid")"));
  ASSERT_TRUE(daemon.ok());
  EXPECT_EQ(daemon->Get<ComputeDomainDaemonConfig>().domain_id, "cd-uid");
  EXPECT_EQ(KindOf(*daemon), "ComputeDomainDaemonConfig");

  auto bare = DecodeStrict(Doc("GpuConfig", ""));
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->Get<GpuConfig>().sharing.has_value());
}

TEST(ConfigDecoderTest, UnknownFieldsAreNamedWithTheirPath) {
  EXPECT_EQ(ErrorOf(Doc("ComputeDomainChannelConfig", R"("domainID":"x","unexpectedField":"foo")")),
            "strict decoding error: unknown field \"unexpectedField\"");
  EXPECT_EQ(ErrorOf(Doc("GpuConfig", R"("sharing":{"strategy":"TimeSlicing","foo":1})")),
            "strict decoding error: unknown field \"sharing.foo\"");
  EXPECT_EQ(ErrorOf(Doc("GpuConfig", R"("sharing":{"strategy":"MPS","mpsConfig":{"threads":1}})")),
            "strict decoding error: unknown field \"sharing.mpsConfig.threads\"");
  // MIG devices have no time-slicing block.
  EXPECT_EQ(ErrorOf(Doc("MigDeviceConfig", R"("sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{}})")),
            "strict decoding error: unknown field \"sharing.timeSlicingConfig\"");
}

TEST(ConfigDecoderTest, KeysAreCaseSensitive) {
  EXPECT_EQ(ErrorOf(Doc("GpuConfig", R"("Sharing":{"strategy":"TimeSlicing"})")),
            "strict decoding error: unknown field \"Sharing\"");
  EXPECT_EQ(ErrorOf(Doc("ComputeDomainDaemonConfig", R"("domainId":"x")")),
            "strict decoding error: unknown field \"domainId\"");
}

TEST(ConfigDecoderTest, DuplicateFieldsAreReported) {
  EXPECT_EQ(ErrorOf(Doc("ComputeDomainChannelConfig", R"("domainID":"a","domainID":"b")")),
            "strict decoding error: duplicate field \"domainID\"");
  EXPECT_EQ(ErrorOf(R"({"kind":"GpuConfig","apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"})"),
            "strict decoding error: duplicate field \"kind\"");
  EXPECT_EQ(ErrorOf(Doc("GpuConfig", R"("sharing":{"strategy":"MPS","mpsConfig":{
      "defaultPerDevicePinnedMemoryLimit":{"0":"1Gi","0":"2Gi"}}})")),
            "strict decoding error: duplicate field \"sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit.0\"");
}

TEST(ConfigDecoderTest, AllStrictErrorsAreListedInDocumentOrderOnce) {
  EXPECT_EQ(ErrorOf(Doc("ComputeDomainChannelConfig", R"("b":1,"domainID":"a","a":2,"domainID":"c","b":3)")),
            "strict decoding error: unknown field \"b\", unknown field \"a\", duplicate field \"domainID\"");
  // Nothing inside an unknown field is inspected.
  EXPECT_EQ(ErrorOf(Doc("ComputeDomainDaemonConfig", R"("domainID":"a","extra":{"x":1,"x":2})")),
            "strict decoding error: unknown field \"extra\"");
}

TEST(ConfigDecoderTest, WrongTypesAreFatalAndNameTheField) {
  EXPECT_EQ(ErrorOf(Doc("GpuConfig", R"("sharing":"TimeSlicing")")),
            "json: cannot unmarshal string into Go struct field GpuConfig.sharing of type v1beta1.GpuSharing");
  EXPECT_EQ(ErrorOf(Doc("GpuConfig", R"("sharing":{"strategy":7})")),
            "json: cannot unmarshal number into Go struct field GpuSharing.sharing.strategy of type "
            "v1beta1.GpuSharingStrategy");
  EXPECT_EQ(ErrorOf(Doc("GpuConfig",
                        R"("sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50.5}})")),
            "json: cannot unmarshal number 50.5 into Go struct field MpsConfig.sharing.mpsConfig."
            "defaultActiveThreadPercentage of type int");
  // Beyond int64: an error as in Go, never an exception.
  EXPECT_EQ(ErrorOf(Doc(
                "GpuConfig",
                R"("sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":99999999999999999999}})")),
            "json: cannot unmarshal number 99999999999999999999 into Go struct field MpsConfig.sharing.mpsConfig."
            "defaultActiveThreadPercentage of type int");
  EXPECT_EQ(ErrorOf(Doc("VfioDeviceConfig", R"("iommu":{"enableAPIDevice":"yes"})")),
            "json: cannot unmarshal string into Go struct field IOMMUConfig.iommu.enableAPIDevice of type bool");
  EXPECT_EQ(ErrorOf(Doc("ComputeDomainChannelConfig", R"("domainID":["a"])")),
            "json: cannot unmarshal array into Go struct field ComputeDomainChannelConfig.domainID of type string");
  // A type error wins over strict errors, as in the Kubernetes serializer.
  EXPECT_EQ(ErrorOf(Doc("ComputeDomainChannelConfig", R"("zzz":1,"domainID":true)")),
            "json: cannot unmarshal bool into Go struct field ComputeDomainChannelConfig.domainID of type string");
}

TEST(ConfigDecoderTest, BadQuantitiesNameTheField) {
  std::string err = ErrorOf(
      Doc("GpuConfig", R"("sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":"10 GB"}})"));
  EXPECT_EQ(
      err.rfind(
          "invalid quantity \"10 GB\" at \"sharing.mpsConfig.defaultPinnedDeviceMemoryLimit\": quantities must match",
          0),
      0u)
      << err;
  err = ErrorOf(Doc("GpuConfig",
                    R"("sharing":{"strategy":"MPS","mpsConfig":{"defaultPerDevicePinnedMemoryLimit":{"0":true}}})"));
  EXPECT_NE(err.find("\"sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit.0\""), std::string::npos) << err;
}

TEST(ConfigDecoderTest, NullLeavesFieldsUnset) {
  auto c = DecodeStrict(Doc("GpuConfig",
                            R"("sharing":{"strategy":"TimeSlicing","timeSlicingConfig":null,"mpsConfig":null})"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->Get<GpuConfig>().sharing->Settings<TimeSlicingConfig>().has_value());
  auto d = DecodeStrict(Doc("ComputeDomainDaemonConfig", R"("domainID":null)"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->Get<ComputeDomainDaemonConfig>().domain_id, "");
}

TEST(ConfigDecoderTest, TypeMetaErrorsLikeTheKubernetesSerializer) {
  EXPECT_EQ(ErrorOf(R"({"apiVersion":"resource.nvidia.com/v1beta1"})"),
            R"(Object 'Kind' is missing in '{"apiVersion":"resource.nvidia.com/v1beta1"}')");
  EXPECT_EQ(ErrorOf(R"({"kind":"GpuConfig"})"), R"(Object 'apiVersion' is missing in '{"kind":"GpuConfig"}')");
  std::string unknown_kind = ErrorOf(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomain"})");
  EXPECT_EQ(unknown_kind.rfind("no kind \"ComputeDomain\" is registered for version \"resource.nvidia.com/v1beta1\"",
                               0),
            0u)
      << unknown_kind;
  std::string wrong_version = ErrorOf(R"({"apiVersion":"resource.nvidia.com/v1","kind":"GpuConfig"})");
  EXPECT_EQ(wrong_version.rfind("no kind \"GpuConfig\" is registered for version \"resource.nvidia.com/v1\"", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"apiVersion":"a/b/c","kind":"GpuConfig"})"), "unexpected GroupVersion string: a/b/c");
  EXPECT_EQ(ErrorOf(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":1})")
                .rfind("couldn't get version/kind; json parse error: ", 0),
            0u);
  EXPECT_EQ(ErrorOf(R"([1,2])").rfind("couldn't get version/kind; json parse error: json: cannot unmarshal array", 0),
            0u);
  EXPECT_EQ(ErrorOf("{not json").rfind("couldn't get version/kind; json parse error: ", 0), 0u);
  EXPECT_EQ(ErrorOf("").rfind("couldn't get version/kind; json parse error: ", 0), 0u);
  // A huge quoted document is cut short in the message.
  std::string big = R"({"apiVersion":"resource.nvidia.com/v1beta1","pad":")" + std::string(5000, 'x') + "\"}";
  EXPECT_LT(ErrorOf(big).size(), 400u);
}

TEST(ConfigDecoderTest, HostileInputFailsCleanly) {
  std::string deep = Doc("GpuConfig", "\"sharing\":" + std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_NE(ErrorOf(deep).find("nesting is deeper than"), std::string::npos);
  std::string wide = "{" + std::string(kHeader) + R"("kind":"GpuConfig")";
  for (int i = 0; i < 20000; ++i) wide += ",\"f" + std::to_string(i) + "\":" + std::to_string(i);
  wide += "}";
  std::string err = ErrorOf(wide);
  // The error list is capped like Kubernetes' (100 entries).
  EXPECT_EQ(std::count(err.begin(), err.end(), ','), 99) << err.substr(0, 200);
  EXPECT_FALSE(DecodeStrict(std::string(3 << 20, ' ')).ok());
  EXPECT_FALSE(DecodeStrict(std::string("{\"kind\":\"\xff\"}")).ok());
}

TEST(ConfigDecoderTest, LenientDecodingIgnoresWhatItDoesNotKnow) {
  auto c = DecodeLenient(Doc("ComputeDomainChannelConfig",
                             R"("domainID":"a","fieldFromTheFuture":{"x":1},"domainID":"b","allocationMode":5)"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto& chan = c->Get<ComputeDomainChannelConfig>();
  EXPECT_EQ(chan.domain_id, "b");       // last duplicate wins, as in encoding/json
  EXPECT_EQ(chan.allocation_mode, "");  // wrong type skipped, not fatal
  auto q = DecodeLenient(
      Doc("GpuConfig", R"("sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":"bogus"}}})"));
  EXPECT_FALSE(q.ok());  // not JSON (extra brace)
  auto q2 = DecodeLenient(
      Doc("GpuConfig", R"("sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":"bogus"}})"));
  ASSERT_TRUE(q2.ok()) << q2.status().ToString();
  EXPECT_FALSE(q2->Get<GpuConfig>().sharing->Settings<MpsConfig>()->default_pinned_device_memory_limit.has_value());
  EXPECT_FALSE(DecodeLenient(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"FutureConfig"})").ok());
}

TEST(ConfigDecoderTest, MutatedInputNeverCrashes) {
  const std::string seeds[] = {
      Doc("GpuConfig", R"("sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,)"
                       R"("defaultPinnedDeviceMemoryLimit":"10Gi","defaultPerDevicePinnedMemoryLimit":{"0":"1Gi"}}})"),
      Doc("VfioDeviceConfig", R"("iommu":{"backendPolicy":"LegacyOnly","enableAPIDevice":true})"),
      Doc("ComputeDomainChannelConfig", R"("domainID":"x","allocationMode":"All")"),
  };
  const char kAlphabet[] = "{}[]\",:0123456789.eE-+ntfaGiMk \\\x00\xff";
  std::mt19937 rng(12345);  // fixed seed: reproducible
  int decoded = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string doc = seeds[i % 3];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !doc.empty(); ++e) {
      size_t pos = rng() % doc.size();
      switch (rng() % 3) {
        case 0: doc[pos] = kAlphabet[rng() % (sizeof(kAlphabet) - 1)]; break;
        case 1: doc.erase(pos, 1 + rng() % 8); break;
        default: doc.insert(pos, 1, kAlphabet[rng() % (sizeof(kAlphabet) - 1)]); break;
      }
    }
    for (bool strict : {true, false}) {
      auto c = strict ? DecodeStrict(doc) : DecodeLenient(doc);
      if (c.ok()) {
        ++decoded;
        // Whatever decodes renders to a document that decodes to the same value.
        auto again = DecodeLenient(ToCanonicalJson(*c));
        ASSERT_TRUE(again.ok()) << doc;
        EXPECT_EQ(*again, *c) << doc;
      } else {
        EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << doc;
        EXPECT_FALSE(c.status().message().empty());
      }
    }
  }
  EXPECT_GT(decoded, 0);
}

}  // namespace
}  // namespace nvdra::config
