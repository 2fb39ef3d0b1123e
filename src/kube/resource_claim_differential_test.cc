// Holds the claim decoder's one-pass reading to the tree-based one: over the
// API fixtures and systematic mutations of them, the fast path either gives
// the very claim the tree reading gives, or declines and the tree reading's
// verdict (its error message included) is what DecodeResourceClaim answers.
// Where the tree reading takes a document without repeated members, the fast
// path must take it too: declining is for errors, not for work it skips.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kube/resource_claim.h"
#include "util/file_util.h"
#include "util/json_depth.h"
#include "util/test_paths.h"

namespace nvdra::kube {
namespace {

using nlohmann::json;

std::string DiffFixture(const std::string& version) {
  auto text = ReadFileToString(std::string(NVDRA_SHARED_DIR) + "/fixtures/kubernetes-api/resource.k8s.io." + version +
                               ".ResourceClaim.json");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

std::vector<std::string> DiffFixtures() { return {DiffFixture("v1"), DiffFixture("v1beta2"), DiffFixture("v1beta1")}; }

// A claim as a GPU plugin sees it in a cluster: compact, with fields the
// decoder skips before and after the ones it reads.
const char* const kDiffGpuClaim =
    R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"annotations":)"
    R"({"resource.kubernetes.io/pod-claim-name":"gpu"},"creationTimestamp":"2026-01-01T00:00:00Z",)"
    R"("managedFields":[{"manager":"kube-scheduler","fieldsV1":{"f:status":{"f:allocation":{}}}}],)"
    R"("name":"pod-gpu-x7k2","namespace":"default","resourceVersion":"1234","uid":"0f9c-11"},)"
    R"("spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com","count":1}}]}},)"
    R"("status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com",)"
    R"("pool":"node-1","device":"gpu-3","adminAccess":false,"consumedCapacity":{"memory":"80Gi"}}],)"
    R"("config":[{"source":"FromClaim","requests":["gpu"],"opaque":{"driver":"gpu.nvidia.com",)"
    R"("parameters":{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}}}]},)"
    R"("nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["node-1"]}]}]}},)"
    R"("reservedFor":[{"resource":"pods","name":"pod","uid":"aa-bb"}]}})";

struct ReadingVerdicts {
  int taken = 0;     // documents the fast path took
  int declined = 0;  // documents it left to the tree reading
};

// Decodes `text` all three ways and checks they agree. `no_repeats`: the
// document has no repeated members, so whatever the tree reading takes the
// fast path must take.
void CheckReadings(const std::string& text, ReadingVerdicts& v, bool no_repeats = true) {
  SCOPED_TRACE(text.size() > 600 ? text.substr(0, 600) + "..." : text);
  auto tree = DecodeResourceClaimTree(text);
  auto fast = DecodeResourceClaimFast(text);
  auto both = DecodeResourceClaim(text);
  if (fast) {
    ++v.taken;
    ASSERT_TRUE(tree.ok()) << "the fast path took a document the tree reading refuses: " << tree.status().ToString();
    EXPECT_TRUE(*fast == *tree);
  } else {
    ++v.declined;
    if (no_repeats) EXPECT_FALSE(tree.ok()) << "the fast path declined a document the tree reading takes";
  }
  ASSERT_EQ(both.ok(), tree.ok());
  if (tree.ok()) {
    EXPECT_TRUE(*both == *tree);
  } else {
    EXPECT_EQ(both.status().code(), tree.status().code());
    EXPECT_EQ(both.status().message(), tree.status().message());
  }
}

// Every JSON pointer of `j`, the root excluded.
void AllPointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      out.push_back(at / k);
      AllPointers(v, at / k, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      out.push_back(at / i);
      AllPointers(j[i], at / i, out);
    }
  }
}

TEST(ResourceClaimDifferentialTest, FixturesDecodeToTheSameClaim) {
  ReadingVerdicts v;
  for (const auto& text : DiffFixtures()) {
    CheckReadings(text, v);
    CheckReadings(json::parse(text).dump(), v);
    CheckReadings(json::parse(text).dump(1, '\t'), v);
    auto fast = DecodeResourceClaimFast(text);
    ASSERT_TRUE(fast.has_value());
    EXPECT_TRUE(fast->allocated);
    EXPECT_FALSE(fast->results.empty());
  }
  CheckReadings(kDiffGpuClaim, v);
  EXPECT_EQ(v.declined, 0);
}

TEST(ResourceClaimDifferentialTest, Truncations) {
  ReadingVerdicts v;
  std::vector<std::string> docs = {kDiffGpuClaim};
  for (const auto& text : DiffFixtures()) docs.push_back(json::parse(text).dump());
  docs.push_back(DiffFixture("v1"));
  // Every cut of the compact claim; every fifth of the larger fixtures, whose
  // cuts repeat the same structures.
  for (size_t d = 0; d < docs.size(); ++d) {
    for (size_t n = 0; n < docs[d].size(); n += d == 0 ? 1 : 5) CheckReadings(docs[d].substr(0, n), v);
  }
  // A proper prefix of an object misses at least its closing brace.
  EXPECT_EQ(v.taken, 0);
  EXPECT_GT(v.declined, 4000);
}

TEST(ResourceClaimDifferentialTest, EveryValueReplacedByEachType) {
  const std::vector<json> replacements = {
      nullptr, true,          false,          0,     -1.5e3,    18446744073709551615u, "x",
      "",      json::array(), json::object(), {"x"}, {{"a", 1}}};
  ReadingVerdicts v;
  for (const auto& doc : {std::string(kDiffGpuClaim), DiffFixture("v1")}) {
    json j = json::parse(doc);
    std::vector<json::json_pointer> pointers;
    AllPointers(j, json::json_pointer(), pointers);
    for (const auto& p : pointers) {
      for (const auto& r : replacements) {
        json m = j;
        m[p] = r;
        CheckReadings(m.dump(), v);
      }
    }
  }
  // Both verdicts occur: wrong types of read fields, anything in skipped ones.
  EXPECT_GT(v.taken, 500);
  EXPECT_GT(v.declined, 100);
}

TEST(ResourceClaimDifferentialTest, UnknownMembersAnywhere) {
  const json unknown = {{"deep", {1, "two", nullptr, true, {{"x", 1.5e10}}, json::array(), json::object()}}};
  ReadingVerdicts v;
  for (const auto& doc : {std::string(kDiffGpuClaim), DiffFixture("v1")}) {
    json j = json::parse(doc);
    auto want = DecodeResourceClaimTree(j.dump());
    ASSERT_TRUE(want.ok());
    std::vector<json::json_pointer> pointers = {json::json_pointer()};
    AllPointers(j, json::json_pointer(), pointers);
    for (const auto& p : pointers) {
      // consumedCapacity's members are all quantities: an unknown one is
      // an error there.
      if (!j[p].is_object() || (!p.empty() && p.back() == "consumedCapacity")) continue;
      for (const char* name : {"aaUnknown", "mmUnknown", "zzUnknown"}) {
        json m = j;
        m[p][name] = unknown;
        CheckReadings(m.dump(), v);
        // Status is kept verbatim, so only a member outside it leaves the
        // claim as it was.
        auto got = DecodeResourceClaimFast(m.dump());
        ASSERT_TRUE(got.has_value());
        if (p.to_string().rfind("/status", 0) != 0) {
          got->status_json = want->status_json;
          EXPECT_TRUE(*got == *want) << p.to_string();
        }
      }
    }
  }
  EXPECT_EQ(v.declined, 0);
}

std::string NestedText(size_t depth, const std::string& open, const std::string& close, const std::string& inner) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += open;
  s += inner;
  for (size_t i = 0; i < depth; ++i) s += close;
  return s;
}

TEST(ResourceClaimDifferentialTest, DeepNesting) {
  ReadingVerdicts v;
  const std::string claim = kDiffGpuClaim;
  for (size_t depth : {1, 100, 253, 254, 255, 256, 300, 5000}) {
    for (const auto& [open, close] : {std::pair{"[", "]"}, std::pair{"{\"a\":", "}"}}) {
      std::string nest = NestedText(depth, open, close, "1");
      // Under the root (depth + 1 levels) and under status.allocation (+ 3).
      CheckReadings(claim.substr(0, claim.size() - 1) + ",\"zz\":" + nest + "}", v);
      std::string at = "\"allocation\":{";
      std::string deep = claim;
      deep.insert(deep.find(at) + at.size(), "\"extra\":" + nest + ",");
      CheckReadings(deep, v);
      EXPECT_EQ(DecodeResourceClaimFast(deep).has_value(), depth + 3 <= kMaxJsonDepth) << depth;
    }
  }
  EXPECT_GT(v.taken, 0);
  EXPECT_GT(v.declined, 0);
}

// Every string written with escapes only: keys and values, ASCII as \u00XX,
// the rest as \u escapes (surrogate pairs past U+FFFF). kind stays plain:
// the tree reading wants it byte for byte.
std::string EscapeEveryChar(const std::string& s) {
  std::u32string cps;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    cps.push_back(cp);
    i += n;
  }
  std::string out = "\"";
  char buf[8];
  for (char32_t cp : cps) {
    if (cp >= 0x10000) {
      char32_t v = cp - 0x10000;
      snprintf(buf, sizeof(buf), "\\u%04X", static_cast<unsigned>(0xD800 + (v >> 10)));
      out += buf;
      snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
    } else {
      snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
    }
    out += buf;
  }
  return out + "\"";
}

std::string DumpAllEscaped(const json& j, bool root = true) {
  if (j.is_string()) return EscapeEveryChar(j.get<std::string>());
  if (j.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < j.size(); ++i) out += (i ? "," : "") + DumpAllEscaped(j[i], false);
    return out + "]";
  }
  if (!j.is_object()) return j.dump();
  std::string out = "{";
  for (const auto& [k, v] : j.items()) {
    if (out.size() > 1) out += ",";
    out += EscapeEveryChar(k) + ":" + (root && k == "kind" ? v.dump() : DumpAllEscaped(v, false));
  }
  return out + "}";
}

TEST(ResourceClaimDifferentialTest, EscapedAndUnicodeStrings) {
  ReadingVerdicts v;
  for (const auto& doc : {std::string(kDiffGpuClaim), DiffFixture("v1"), DiffFixture("v1beta1")}) {
    json j = json::parse(doc);
    for (const std::string& name : std::vector<std::string>{"plain",
                                                            "gr\xC3\xBC\xC3\x9F"
                                                            "e-\xE2\x82\xAC",
                                                            "emoji-\xF0\x9F\x98\x80", "q\"b\\s/\b\f\n\r\t\x7F",
                                                            std::string("nul\0x", 5), "max-\xF4\x8F\xBF\xBF"}) {
      json m = j;
      m["metadata"]["name"] = name;
      m["status"]["allocation"]["devices"]["results"][0]["device"] = name;
      m["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["k\xC3\xA9y"] = name;
      CheckReadings(m.dump(), v);
      CheckReadings(m.dump(-1, ' ', /*ensure_ascii=*/true), v);
      std::string escaped = DumpAllEscaped(m);
      CheckReadings(escaped, v);
      auto fast = DecodeResourceClaimFast(escaped);
      ASSERT_TRUE(fast.has_value());
      EXPECT_EQ(fast->name, m["metadata"]["name"].get<std::string>());
    }
  }
  EXPECT_EQ(v.declined, 0);
}

// Bytes the tree reading refuses, and their valid neighbours, inside a
// string that is read and inside one that is skipped.
TEST(ResourceClaimDifferentialTest, StringAndNumberEdges) {
  const std::vector<std::string> strings = {"\x01",
                                            "\x1F",
                                            "\\x",
                                            "\\u12",
                                            "\\u12G4",
                                            "\\uD800",
                                            "\\uDC00",
                                            "\\uD800\\u0041",
                                            "\\uD800x",
                                            "\\uDBFF\\uDFFF",
                                            "\\u0000",
                                            "\\/",
                                            "\xC0\xAF",
                                            "\xC1\xBF",
                                            "\xC2\x80",
                                            "\xE0\x9F\xBF",
                                            "\xE0\xA0\x80",
                                            "\xED\xA0\x80",
                                            "\xED\x9F\xBF",
                                            "\xEF\xBF\xBF",
                                            "\xF0\x8F\xBF\xBF",
                                            "\xF0\x90\x80\x80",
                                            "\xF4\x90\x80\x80",
                                            "\xF5\x80\x80\x80",
                                            "\xE2\x82",
                                            "\xFF",
                                            "\x80",
                                            "\x7F",
                                            "\\",
                                            "\\\"",
                                            "\xF4\x8F\xBF"};
  const std::vector<std::string> numbers = {"0",
                                            "-0",
                                            "01",
                                            "1.",
                                            "-",
                                            ".5",
                                            "1e",
                                            "1e+",
                                            "+1",
                                            "1e400",
                                            "-1e400",
                                            "1.5e308",
                                            "1E-400",
                                            "0e0",
                                            "NaN",
                                            "Infinity",
                                            "12345678901234567890",
                                            "123456789012345678901234567890",
                                            "-9223372036854775809",
                                            "1.0e+2",
                                            std::string(400, '9'),
                                            "tru",
                                            "nul",
                                            "true1",
                                            "null",
                                            "falsee",
                                            "0x1"};
  ReadingVerdicts v;
  const std::string claim = kDiffGpuClaim;
  for (const auto& s : strings) {
    for (const char* at : {"\"gpu-3", "\"2026-01-01", "\"fieldsV1\":{\"f:status"}) {
      std::string m = claim;
      size_t pos = m.find(at);
      ASSERT_NE(pos, std::string::npos);
      m.insert(pos + 2, s);
      CheckReadings(m, v);
    }
  }
  for (const auto& n : numbers) {
    std::string m = claim;
    m.insert(m.find("\"count\":") + 8, n + ",\"n\":");
    CheckReadings(m, v);
    CheckReadings(claim.substr(0, claim.size() - 1) + ",\"n\":" + n + "}", v);
  }
  EXPECT_GT(v.taken, 20);
  EXPECT_GT(v.declined, 40);
}

TEST(ResourceClaimDifferentialTest, ByteMutations) {
  ReadingVerdicts v;
  const std::string claim = kDiffGpuClaim;
  for (size_t i = 0; i < claim.size(); ++i) {
    std::string cut = claim;
    cut.erase(i, 1);
    CheckReadings(cut, v);
    for (char c : {',', '"', '}', ']', ':', '\\', ' ', 'x', '\0'}) {
      std::string m = claim;
      m[i] = c;
      CheckReadings(m, v);
    }
  }
  EXPECT_GT(v.declined, 3000);
  EXPECT_GT(v.taken, 1000);
}

TEST(ResourceClaimDifferentialTest, DocumentEdges) {
  ReadingVerdicts v;
  const std::string claim = kDiffGpuClaim;
  for (const auto& text :
       {std::string(),
        std::string("null"),
        std::string("[]"),
        std::string("\"x\""),
        std::string("{}"),
        " \t\r\n" + claim + " \n",
        claim + "x",
        claim + "{}",
        claim + ",",
        std::string(R"({"kind":"Pod"})"),
        std::string(R"({"kind":"ResourceClaim "})"),
        std::string(R"({"kind":"Resource\u0043laim"})"),
        std::string(R"({"kind":null})"),
        std::string(R"({"kind":5})"),
        std::string(R"({"kind":"Pod","x":tru})"),
        std::string(R"({"status":{"allocation":{}}})"),
        std::string(R"({"status":{"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p"}]}}}})"),
        std::string(R"({"metadata":{"annotations":{"resource.kubernetes.io/pod-claim-name":5}}})"),
        std::string(R"({"metadata":{"annotations":["x"]}})"),
        std::string(R"({"\u006bind":"Pod"})")}) {
    CheckReadings(text, v);
  }
  EXPECT_GT(v.taken, 2);
  // A byte order mark: nlohmann skips it, the raw-text lookups of the tree
  // reading do not (no status text, no opaque parameters). The fast path
  // leaves such a document to the tree reading rather than differ.
  std::string bom = "\xEF\xBB\xBF" + claim;
  CheckReadings(bom, v, /*no_repeats=*/false);
  EXPECT_FALSE(DecodeResourceClaimFast(bom).has_value());
}

// The tree reading keeps the last of repeated members; the fast path leaves
// those to it, and the answer is the tree reading's.
TEST(ResourceClaimDifferentialTest, RepeatedMembersAreTheTreeReadings) {
  ReadingVerdicts v;
  for (
      const std::string text : {
          R"({"kind":"ResourceClaim","metadata":{"name":"a","name":"b"}})",
          R"({"kind":"Pod","kind":"ResourceClaim"})",
          R"({"status":{"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":5,"device":"x"}]}}}})",
          R"({"status":{"reservedFor":[],"reservedFor":[{"uid":"u"}]}})",
      }) {
    CheckReadings(text, v, /*no_repeats=*/false);
    EXPECT_FALSE(DecodeResourceClaimFast(text).has_value());
  }
  EXPECT_EQ(DecodeResourceClaim(R"({"kind":"ResourceClaim","metadata":{"name":"a","name":"b"}})")->name, "b");
}

}  // namespace
}  // namespace nvdra::kube
