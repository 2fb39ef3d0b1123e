#include "kube/resource_claim.h"

#include <nlohmann/json.hpp>

#include "kube/raw_json.h"

namespace nvdra::kube {
namespace {

using nlohmann::json;

std::string GetString(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->get<std::string>();
}

}  // namespace

Result<ResourceClaim> DecodeResourceClaim(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("ResourceClaim is not valid JSON: ") + e.what());
  }
  ResourceClaim c;
  try {
    if (!j.is_object()) return InvalidArgument("ResourceClaim is not a JSON object");
    if (GetString(j, "kind") != "ResourceClaim" && j.contains("kind")) {
      return InvalidArgument("expected kind ResourceClaim, got " + GetString(j, "kind"));
    }
    c.api_version = GetString(j, "apiVersion");
    const json& meta = j.value("metadata", json::object());
    c.namespace_name = GetString(meta, "namespace");
    c.name = GetString(meta, "name");
    c.uid = GetString(meta, "uid");
    c.resource_version = GetString(meta, "resourceVersion");
    auto status = j.find("status");
    if (status == j.end() || status->is_null()) return c;
    if (auto raw = FindRawJson(text, {"status"})) c.status_json = std::string(*raw);
    auto alloc = status->find("allocation");
    if (alloc != status->end() && !alloc->is_null()) {
      c.allocated = true;
      const json& devices = alloc->value("devices", json::object());
      if (devices.contains("results") && !devices["results"].is_null()) {
        for (const auto& r : devices["results"]) {
          DeviceRequestAllocationResult res;
          res.request = GetString(r, "request");
          res.driver = GetString(r, "driver");
          res.pool = GetString(r, "pool");
          res.device = GetString(r, "device");
          if (r.contains("adminAccess") && !r["adminAccess"].is_null()) res.admin_access = r["adminAccess"].get<bool>();
          if (r.contains("shareID") && !r["shareID"].is_null()) res.share_id = r["shareID"].get<std::string>();
          c.results.push_back(std::move(res));
        }
      }
      if (devices.contains("config") && !devices["config"].is_null()) {
        size_t i = 0;
        for (const auto& cfg : devices["config"]) {
          DeviceAllocationConfiguration out;
          out.source = GetString(cfg, "source");
          if (cfg.contains("requests") && !cfg["requests"].is_null()) {
            out.requests = cfg["requests"].get<std::vector<std::string>>();
          }
          auto op = cfg.find("opaque");
          if (op != cfg.end() && !op->is_null()) {
            OpaqueDeviceConfig o;
            o.driver = GetString(*op, "driver");
            auto raw = FindRawJson(text, {"status", "allocation", "devices", "config", i, "opaque", "parameters"});
            o.parameters = raw ? std::string(*raw) : "";
            out.opaque = std::move(o);
          }
          c.configs.push_back(std::move(out));
          ++i;
        }
      }
    }
    if (status->contains("reservedFor") && !(*status)["reservedFor"].is_null()) {
      for (const auto& r : (*status)["reservedFor"]) {
        c.reserved_for.push_back({GetString(r, "apiGroup"), GetString(r, "resource"), GetString(r, "name"),
                                  GetString(r, "uid")});
      }
    }
  } catch (const json::exception& e) {
    return InvalidArgument("ResourceClaim " + c.namespace_name + "/" + c.name + " has an unexpected shape: " +
                           e.what());
  }
  return c;
}

}  // namespace nvdra::kube
