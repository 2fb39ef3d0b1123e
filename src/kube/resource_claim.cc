#include "kube/resource_claim.h"

#include <nlohmann/json.hpp>

#include "kube/raw_json.h"
#include "util/json_depth.h"

namespace nvdra::kube {
namespace {

using nlohmann::json;

// A shape error: the claim cannot be trusted, so the whole decode fails
// rather than yielding a claim with fewer devices than were allocated.
class ShapeError {
 public:
  explicit ShapeError(std::string what) : what(std::move(what)) {}
  std::string what;
};

std::string GetString(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_string()) throw ShapeError(std::string(key) + " is a " + it->type_name() + ", not a string");
  return it->get<std::string>();
}

// The member `key` of object `j`: nullptr when absent or null, else it must
// have the wanted type.
const json* Member(const json& j, const char* key, json::value_t type, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  if (it->type() != type) {
    json probe(type);
    throw ShapeError(where + "." + key + " is a " + it->type_name() + ", not " +
                     (type == json::value_t::array ? "an " : "a ") + probe.type_name());
  }
  return &*it;
}

const json& ObjectElement(const json& element, const std::string& where) {
  if (!element.is_object()) throw ShapeError(where + " is a " + std::string(element.type_name()) + ", not an object");
  return element;
}

}  // namespace

Result<ResourceClaim> DecodeResourceClaim(std::string_view text) {
  NVDRA_RETURN_IF_ERROR(CheckJsonDepth(text, "ResourceClaim"));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("ResourceClaim is not valid JSON");
  if (!j.is_object()) return InvalidArgument("ResourceClaim is not a JSON object");
  ResourceClaim c;
  try {
    if (j.contains("kind") && GetString(j, "kind") != "ResourceClaim") {
      return InvalidArgument("expected kind ResourceClaim, got " + GetString(j, "kind"));
    }
    c.api_version = GetString(j, "apiVersion");
    if (const json* meta = Member(j, "metadata", json::value_t::object, "ResourceClaim")) {
      c.namespace_name = GetString(*meta, "namespace");
      c.name = GetString(*meta, "name");
      c.uid = GetString(*meta, "uid");
      c.resource_version = GetString(*meta, "resourceVersion");
    }
    const json* status = Member(j, "status", json::value_t::object, "ResourceClaim");
    if (status == nullptr) return c;
    if (auto raw = FindRawJson(text, {"status"})) c.status_json = std::string(*raw);
    if (const json* alloc = Member(*status, "allocation", json::value_t::object, "status")) {
      c.allocated = true;
      if (const json* devices = Member(*alloc, "devices", json::value_t::object, "status.allocation")) {
        if (const json* results = Member(*devices, "results", json::value_t::array, "status.allocation.devices")) {
          for (size_t i = 0; i < results->size(); ++i) {
            std::string where = "status.allocation.devices.results[" + std::to_string(i) + "]";
            const json& r = ObjectElement((*results)[i], where);
            DeviceRequestAllocationResult res;
            res.request = GetString(r, "request");
            res.driver = GetString(r, "driver");
            res.pool = GetString(r, "pool");
            res.device = GetString(r, "device");
            // The API server requires all four; without them the result
            // names no device and must not be read as "nothing allocated".
            for (const auto* field : {&res.request, &res.driver, &res.pool, &res.device}) {
              if (field->empty()) throw ShapeError(where + " lacks request, driver, pool or device");
            }
            auto admin = r.find("adminAccess");
            if (admin != r.end() && !admin->is_null()) {
              if (!admin->is_boolean()) throw ShapeError(where + ".adminAccess is not a boolean");
              res.admin_access = admin->get<bool>();
            }
            auto share = r.find("shareID");
            if (share != r.end() && !share->is_null()) res.share_id = GetString(r, "shareID");
            c.results.push_back(std::move(res));
          }
        }
        if (const json* configs = Member(*devices, "config", json::value_t::array, "status.allocation.devices")) {
          for (size_t i = 0; i < configs->size(); ++i) {
            std::string where = "status.allocation.devices.config[" + std::to_string(i) + "]";
            const json& cfg = ObjectElement((*configs)[i], where);
            DeviceAllocationConfiguration out;
            out.source = GetString(cfg, "source");
            if (const json* requests = Member(cfg, "requests", json::value_t::array, where)) {
              for (const auto& r : *requests) {
                if (!r.is_string()) throw ShapeError(where + ".requests has a " + r.type_name() + ", not a string");
                out.requests.push_back(r.get<std::string>());
              }
            }
            if (const json* op = Member(cfg, "opaque", json::value_t::object, where)) {
              OpaqueDeviceConfig o;
              o.driver = GetString(*op, "driver");
              auto raw = FindRawJson(text, {"status", "allocation", "devices", "config", i, "opaque", "parameters"});
              o.parameters = raw ? std::string(*raw) : "";
              out.opaque = std::move(o);
            }
            c.configs.push_back(std::move(out));
          }
        }
      }
    }
    if (const json* reserved = Member(*status, "reservedFor", json::value_t::array, "status")) {
      for (size_t i = 0; i < reserved->size(); ++i) {
        const json& r = ObjectElement((*reserved)[i], "status.reservedFor[" + std::to_string(i) + "]");
        c.reserved_for.push_back({GetString(r, "apiGroup"), GetString(r, "resource"), GetString(r, "name"),
                                  GetString(r, "uid")});
      }
    }
  } catch (const ShapeError& e) {
    return InvalidArgument("ResourceClaim " + c.namespace_name + "/" + c.name + " has an unexpected shape: " +
                           e.what);
  } catch (const json::exception& e) {
    return InvalidArgument("ResourceClaim " + c.namespace_name + "/" + c.name + " has an unexpected shape: " +
                           e.what());
  }
  return c;
}

}  // namespace nvdra::kube
