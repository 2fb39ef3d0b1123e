#include "admission/admission_review.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "config/config_decoder.h"
#include "config/config_kind.h"
#include "config/opaque_config.h"
#include "kube/raw_json.h"
#include "util/json_depth.h"
#include "util/json_reader.h"
#include "util/log.h"

namespace nvdra::admission {
namespace {

using nlohmann::json;

constexpr std::string_view kAdmissionApiVersion = "admission.k8s.io/v1";
constexpr std::string_view kAdmissionKind = "AdmissionReview";
constexpr std::string_view kResourceGroup = "resource.k8s.io";
// A message quotes at most this much of a body it could not read.
constexpr size_t kMaxQuoted = 256;
// Parsed, a body of 3 MiB that is all `{},` becomes a million objects of
// some 80 bytes each, and takes seconds to build: a few such bodies at once
// would hold hundreds of MiB. A review of a claim with 32 configs holds a
// few thousand values.
constexpr size_t kMaxJsonValues = 200'000;

// What the request names: one of the six resources, or neither.
struct Target {
  bool known = false;
  bool is_template = false;
  std::string version;
};

std::string Quoted(std::string_view body) {
  if (body.size() <= kMaxQuoted) return std::string(body);
  return std::string(body.substr(0, kMaxQuoted)) + "...";
}

// Go's "%s" of a metav1.GroupVersionResource: "{group version resource}".
std::string GvrText(const JsonReader& resource) {
  return "{" + resource.ValueOr<std::string>("group", "") + " " + resource.ValueOr<std::string>("version", "") + " " +
         resource.ValueOr<std::string>("resource", "") + "}";
}

Target TargetOf(const JsonReader& resource) {
  Target t;
  std::string group = resource.ValueOr<std::string>("group", "");
  std::string version = resource.ValueOr<std::string>("version", "");
  std::string name = resource.ValueOr<std::string>("resource", "");
  if (group != kResourceGroup) return t;
  if (version != "v1" && version != "v1beta2" && version != "v1beta1") return t;
  if (name != "resourceclaims" && name != "resourceclaimtemplates") return t;
  t.known = true;
  t.is_template = name == "resourceclaimtemplates";
  t.version = version;
  return t;
}

json Response(const std::string& uid, bool allowed, std::string_view message, std::string_view reason) {
  json response = {{"uid", uid}, {"allowed", allowed}};
  if (!allowed) {
    response["status"] = {{"metadata", json::object()}, {"message", message}, {"reason", reason}};
  }
  return response;
}

HttpAnswer Review(const json& response) {
  nlohmann::ordered_json review;
  review["kind"] = kAdmissionKind;
  review["apiVersion"] = kAdmissionApiVersion;
  review["response"] = response;
  return {200, "application/json", review.dump(-1, ' ', false, json::error_handler_t::replace)};
}

bool IsJsonContentType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  return media == "application/json";
}

// The configs of one object, checked; the messages of those that fail.
struct ConfigCheck {
  Status shape;          // the object itself cannot be read (BadRequest)
  std::string too_many;  // more configs than the API server allows (Invalid)
  std::vector<std::string> failures;
};

// The API server's words for a list over its limit (field.TooMany).
std::string TooMany(const std::string& field, size_t n) {
  return field + ": Too many: " + std::to_string(n) + ": must have at most " + std::to_string(kMaxConfigsPerClaim) +
         " items";
}

// The raw text of the configs, read from the body once, on first use: a
// search from the start of the body for each config would cost the body's
// size times their number.
class RawConfigs {
 public:
  RawConfigs(std::string_view body, std::vector<kube::JsonPathStep> path) : body_(body), path_(std::move(path)) {}
  std::string_view Parameters(size_t index) {
    if (!items_) items_ = kube::FindRawJsonElements(body_, path_).value_or(std::vector<std::string_view>());
    if (index >= items_->size()) return {};
    return kube::FindRawJson((*items_)[index], {std::string("opaque"), std::string("parameters")})
        .value_or(std::string_view());
  }

 private:
  std::string_view body_;
  std::vector<kube::JsonPathStep> path_;
  std::optional<std::vector<std::string_view>> items_;
};

ConfigCheck CheckConfigs(std::string_view body, const JsonReader& object, const Target& target,
                         const config::FeatureGates& gates, WebhookScope scope) {
  ConfigCheck out;
  const std::string spec_path = target.is_template ? "spec.spec" : "spec";
  std::vector<kube::JsonPathStep> raw_path = {std::string("request"), std::string("object"), std::string("spec")};
  if (target.is_template) raw_path.push_back(std::string("spec"));
  raw_path.push_back(std::string("devices"));
  raw_path.push_back(std::string("config"));

  auto devices = [&]() -> Result<std::optional<JsonReader>> {
    NVDRA_ASSIGN_OR_RETURN(auto spec, object.OptionalObject("spec"));
    if (!spec) return std::optional<JsonReader>();
    if (target.is_template) {
      NVDRA_ASSIGN_OR_RETURN(auto inner, spec->OptionalObject("spec"));
      if (!inner) return std::optional<JsonReader>();
      spec = std::move(inner);
    }
    return spec->OptionalObject("devices");
  }();
  if (!devices.ok()) {
    out.shape = devices.status();
    return out;
  }
  if (!devices->has_value()) return out;
  // Refused before any config is looked at, so that a review of thousands
  // costs no more than its parse.
  if (const auto* configs = (*devices)->Find("config");
      configs && configs->is_array() && configs->size() > kMaxConfigsPerClaim) {
    out.too_many = TooMany(spec_path + ".devices.config", configs->size());
    return out;
  }

  RawConfigs raw_configs(body, std::move(raw_path));
  const std::vector<std::string> checked = CheckedDrivers(scope);
  size_t index = 0;
  out.shape = (*devices)->ForEach("config", [&](const JsonReader& item) -> Status {
    const size_t i = index++;
    NVDRA_ASSIGN_OR_RETURN(auto opaque, item.OptionalObject("opaque"));
    if (!opaque) return Status::Ok();
    NVDRA_ASSIGN_OR_RETURN(std::string driver, opaque->OptionalOr<std::string>("driver", ""));
    if (std::find(checked.begin(), checked.end(), driver) == checked.end()) return Status::Ok();

    const std::string field = spec_path + ".devices.config[" + std::to_string(i) + "].opaque.parameters";
    auto decoded = config::DecodeStrict(raw_configs.Parameters(i));
    if (!decoded.ok()) {
      out.failures.push_back("error decoding object at " + field + ": " + decoded.status().message());
      return Status::Ok();
    }
    config::Config c = std::move(decoded).value();
    if (scope == WebhookScope::kUpstream) c = UpstreamAdmissionView(std::move(c));
    config::Normalize(c, gates);
    if (Status st = config::Validate(c, gates); !st.ok()) {
      out.failures.push_back("object at " + field + " is invalid: " + st.message());
    }
    return Status::Ok();
  });
  return out;
}

}  // namespace

std::optional<WebhookScope> ParseWebhookScope(std::string_view text) {
  if (text == "nvdra") return WebhookScope::kNvdra;
  if (text == "upstream") return WebhookScope::kUpstream;
  return std::nullopt;
}

std::vector<std::string> CheckedDrivers(WebhookScope scope) {
  std::vector<std::string> drivers;
  for (const config::ConfigKind* kind : config::RegisteredConfigKinds()) {
    if (scope == WebhookScope::kUpstream && !kind->upstream_admission_view) continue;
    if (std::find(drivers.begin(), drivers.end(), kind->driver) == drivers.end()) drivers.push_back(kind->driver);
  }
  return drivers;
}

config::Config UpstreamAdmissionView(config::Config c) {
  const config::ConfigKind* kind = c.kind();
  if (kind != nullptr && kind->upstream_admission_view) kind->upstream_admission_view(c);
  return c;
}

HttpAnswer TextError(int status, std::string_view message) {
  return {status, "text/plain; charset=utf-8", std::string(message) + "\n"};
}

namespace {

// The answer to the review's request `req` (with `uid`).
HttpAnswer Judge(std::string_view body, const JsonReader& req, const std::string& uid,
                 const config::FeatureGates& gates, WebhookScope scope) {
  auto refuse = [&](std::string_view message, std::string_view reason) {
    NVDRA_ERROR("{}", message);
    return Review(Response(uid, false, message, reason));
  };

  auto resource = req.OptionalObject("resource");
  if (!resource.ok()) return refuse(resource.status().message(), "BadRequest");
  const json empty = json::object();
  const JsonReader gvr = resource->has_value() ? **resource : JsonReader(empty, "request.resource");
  const Target target = TargetOf(gvr);
  if (!target.known) {
    return refuse("expected resource to be one of the supported versions for resourceclaims or "
                  "resourceclaimtemplates, got " +
                      GvrText(gvr),
                  "BadRequest");
  }
  const std::string expected_kind = target.is_template ? "ResourceClaimTemplate" : "ResourceClaim";
  auto object = req.OptionalObject("object");
  if (!object.ok()) return refuse(object.status().message(), "BadRequest");
  if (!object->has_value()) return refuse("the request carries no " + expected_kind, "BadRequest");
  const JsonReader& obj = **object;
  // The API server sends the object in the version the request names.
  std::string obj_kind = obj.ValueOr<std::string>("kind", "");
  std::string obj_version = obj.ValueOr<std::string>("apiVersion", "");
  const std::string expected_version = std::string(kResourceGroup) + "/" + target.version;
  if ((!obj_kind.empty() && obj_kind != expected_kind) || (!obj_version.empty() && obj_version != expected_version)) {
    return refuse("the object is a " + obj_version + " " + obj_kind + ", not the " + expected_version + " " +
                      expected_kind + " the request names",
                  "BadRequest");
  }

  ConfigCheck check = CheckConfigs(body, obj, target, gates, scope);
  if (!check.shape.ok()) {
    return refuse(expected_kind + " has an unexpected shape: " + check.shape.message(), "BadRequest");
  }
  if (!check.too_many.empty()) return refuse(check.too_many, "Invalid");
  if (!check.failures.empty()) {
    std::string msg = std::to_string(check.failures.size()) + " configs failed to validate: ";
    for (size_t i = 0; i < check.failures.size(); ++i) {
      if (i > 0) msg += "; ";
      msg += check.failures[i];
    }
    return refuse(msg, "Invalid");
  }
  NVDRA_VLOG(2, "admitted {} {}", expected_kind, uid);
  return Review(Response(uid, true, "", ""));
}

// Reads the AdmissionReview in `body` and judges its request.
HttpAnswer ReadAndJudge(std::string_view body, const config::FeatureGates& gates, WebhookScope scope) {
  auto bad_request = [](std::string_view why) {
    std::string msg = "failed to read AdmissionReview from request body: " + std::string(why);
    NVDRA_ERROR("{}", msg);
    return TextError(400, msg);
  };

  if (CountJsonValues(body, kMaxJsonValues) > kMaxJsonValues) {
    return bad_request("request could not be decoded: the request body holds more than " +
                       std::to_string(kMaxJsonValues) + " JSON values; refusing to decode it");
  }
  auto parsed = ParseJsonText(body, "the request body");
  if (!parsed.ok()) return bad_request("request could not be decoded: " + parsed.status().message());
  const JsonReader review(*parsed);
  if (!parsed->is_object()) {
    return bad_request("request could not be decoded: expected a JSON object, got " +
                       std::string(JsonTypeWithArticle(*parsed)));
  }
  std::string api_version = review.ValueOr<std::string>("apiVersion", "");
  std::string kind = review.ValueOr<std::string>("kind", "");
  if (kind.empty())
    return bad_request("request could not be decoded: Object 'Kind' is missing in '" + Quoted(body) + "'");
  if (api_version.empty()) {
    return bad_request("request could not be decoded: Object 'apiVersion' is missing in '" + Quoted(body) + "'");
  }
  if (api_version != kAdmissionApiVersion || kind != kAdmissionKind) {
    return bad_request("unsupported group version kind: " + api_version + ", Kind=" + kind);
  }
  auto request = review.OptionalObject("request");
  if (!request.ok()) return bad_request("request could not be decoded: " + request.status().message());
  if (!request->has_value()) return bad_request("the AdmissionReview has no request");
  const JsonReader& req = **request;
  auto uid = req.OptionalOr<std::string>("uid", "");
  if (!uid.ok()) return bad_request("request could not be decoded: " + uid.status().message());
  return Judge(body, req, *uid, gates, scope);
}

}  // namespace

HttpAnswer ReviewResourceClaimParameters(std::string_view content_type, std::string_view body,
                                         const config::FeatureGates& gates, WebhookScope scope) {
  if (!IsJsonContentType(content_type)) {
    std::string msg = "contentType=" + std::string(content_type) + ", expected application/json";
    NVDRA_ERROR("{}", msg);
    return TextError(415, msg);
  }
  NVDRA_VLOG(2, "handling request: {}", Quoted(body));
  return ReadAndJudge(body, gates, scope);
}

}  // namespace nvdra::admission
