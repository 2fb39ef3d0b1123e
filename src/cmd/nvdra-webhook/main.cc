// nvdra-webhook: the validating admission webhook for the opaque device
// configs of ResourceClaims and ResourceClaimTemplates, with upstream's flags
// (--tls-cert-file, --tls-private-key-file, --port, the logging flags,
// --feature-gates), paths and messages; it judges configs with the kubelet
// plugins' own decoder (admission/admission_review.h).
#include <malloc.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>

#include <CLI/CLI.hpp>

#include "admission/webhook_routes.h"
#include "admission/webhook_server.h"
#include "cmd/config_kinds/config_kinds.h"
#include "config/feature_gates.h"
#include "util/build_info.h"
#include "util/go_flag_args.h"
#include "util/log.h"
#include "util/logging_flags.h"

namespace {

using namespace nvdra;

struct WebhookFlags : LoggingFlags {
  std::string cert_file;
  std::string key_file;
  int port = 443;
  std::string feature_gates;
  std::string scope = "nvdra";
  std::string read_header_timeout = "10s";
  std::string read_body_timeout = "30s";
  std::string idle_timeout = "90s";
};

// A Go duration ("10s", "1m30s", "500ms") of at least a millisecond.
std::optional<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  static const std::regex kPart(R"(([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))");
  if (text.empty() || text.size() > 64) return std::nullopt;
  double ns = 0;
  std::smatch m;
  for (auto at = text.cbegin(); at != text.cend(); at = m[0].second) {
    if (!std::regex_search(at, text.cend(), m, kPart, std::regex_constants::match_continuous)) return std::nullopt;
    const std::string unit = m[2];
    const double scale = unit == "h"    ? 3600e9
                         : unit == "m"  ? 60e9
                         : unit == "s"  ? 1e9
                         : unit == "ms" ? 1e6
                         : unit == "ns" ? 1
                                        : 1e3;
    ns += std::stod(m[1]) * scale;
  }
  if (ns < 1e6 || ns > 24 * 3600e9) return std::nullopt;
  return std::chrono::milliseconds(std::llround(ns / 1e6));
}

// The server's options from the flags; the limits no flag sets keep their
// defaults (admission/webhook_server.h).
Result<admission::WebhookServerOptions> ServerOptions(const WebhookFlags& f) {
  admission::WebhookServerOptions o;
  o.port = f.port;
  o.cert_file = f.cert_file;
  o.key_file = f.key_file;
  const std::pair<const char*, const std::string*> durations[] = {{"--read-header-timeout", &f.read_header_timeout},
                                                                  {"--read-body-timeout", &f.read_body_timeout},
                                                                  {"--idle-timeout", &f.idle_timeout}};
  std::chrono::milliseconds* targets[] = {&o.head_timeout, &o.body_timeout, &o.idle_timeout};
  for (size_t i = 0; i < std::size(durations); ++i) {
    auto d = ParseDuration(*durations[i].second);
    if (!d) {
      return InvalidArgument(std::string(durations[i].first) + " " + *durations[i].second +
                             ": not a duration from 1ms to 24h, such as 10s or 1m30s");
    }
    *targets[i] = *d;
  }
  return o;
}

void AddFlags(CLI::App& app, WebhookFlags& f) {
  app.add_option("--tls-cert-file", f.cert_file,
                 "File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after "
                 "server cert).")
      ->required();
  app.add_option("--tls-private-key-file", f.key_file,
                 "File containing the default x509 private key matching --tls-cert-file.")
      ->required();
  app.add_option("--port", f.port, "Secure port that the webhook listens on")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  app.add_option("--feature-gates", f.feature_gates, config::FeatureGates::FlagHelp())->envname("FEATURE_GATES");
  app.add_option("--scope", f.scope,
                 "What is refused at admission: nvdra (every config the plugins would refuse at Prepare, of "
                 "gpu.nvidia.com and compute-domain.nvidia.com) or upstream (what upstream's webhook refuses: "
                 "gpu.nvidia.com configs only, without the checks upstream makes at Prepare)")
      ->envname("WEBHOOK_SCOPE")
      ->check(CLI::IsMember({"nvdra", "upstream"}))
      ->capture_default_str();
  app.add_option("--read-header-timeout", f.read_header_timeout,
                 "How long a client has for the TLS handshake and a request's head (on a kept-alive connection: "
                 "for the head, from its first byte)")
      ->capture_default_str();
  app.add_option("--read-body-timeout", f.read_body_timeout,
                 "How long a client has for a request's body, from its head")
      ->capture_default_str();
  app.add_option("--idle-timeout", f.idle_timeout, "How long a kept-alive connection may wait for its next request")
      ->capture_default_str();
  AddVerbosityFlag(app, f, "Log verbosity (2: every request and answer)");
  app.add_option("--logging-format", f.logging_format, "Log format: text or json")
      ->envname("LOGGING_FORMAT")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  AddLoggingFlags(app, f);
}

Status CheckLogging(const WebhookFlags& f, const config::FeatureGates& gates) {
  NVDRA_RETURN_IF_ERROR(ValidateLoggingFlags(f));
  return CheckAlphaLoggingFlags(f, gates.Enabled(config::Gate::kLoggingAlphaOptions));
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "Error: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  WebhookFlags flags;
  CLI::App app{"nvdra-webhook: a validating admission webhook for the opaque device configs of ResourceClaims and "
               "ResourceClaimTemplates, judged as nvdra's kubelet plugins judge them"};
  app.set_version_flag("--version", std::string("nvdra ") + BuildVersion() + "\ncommit: " + BuildCommit() +
                                        "\ndate: " + BuildDate());
  app.allow_extras(false);
  AddFlags(app, flags);
  try {
    // Go's one-dash spellings of long flags too, as upstream's webhook takes them.
    ParseGoFlags(app, argc, argv);
  } catch (const CLI::Success& e) {
    if (e.get_name() == "CallForVersion") {
      std::cout << e.what() << "\n";
    } else {
      std::cout << app.help();
    }
    return 0;
  } catch (const CLI::ParseError& e) {
    return Fail(e.what());
  }
  // The config kinds of both kubelet plugins: the webhook judges configs as
  // they do, and asks the registry which drivers' configs it judges.
  if (Status st = RegisterNvdraConfigKinds(); !st.ok()) return Fail(st.message());
  auto gates = config::FeatureGates::Parse(flags.feature_gates);
  if (!gates.ok()) return Fail(gates.status().Wrap("--feature-gates").message());
  if (Status st = gates->Validate(); !st.ok()) return Fail(st.Wrap("--feature-gates").message());
  if (Status st = CheckLogging(flags, *gates); !st.ok()) return Fail(st.message());
  auto options = ServerOptions(flags);
  if (!options.ok()) return Fail(options.status().message());
  InitLogging(flags.verbosity, flags.logging_format, flags.SplitLogStream());
  if (!flags.vmodule.empty()) SetVModule(*ParseVModule(flags.vmodule));

  // Request bodies (up to 3 MiB each) are mapped on their own and unmapped
  // when freed. By default glibc raises this threshold after the first large
  // free, and later bodies then stay in the heap after they are freed.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);

  // SIGTERM and SIGINT are taken by sigwait below, never by a handler; the
  // server's threads inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  NVDRA_INFO("Starting nvdra-webhook {} (commit {}); feature gates: {}", BuildVersion(), BuildCommit(),
             gates->ToString());
  const config::FeatureGates served_gates = *gates;
  const admission::WebhookScope scope = *admission::ParseWebhookScope(flags.scope);
  NVDRA_INFO("admission scope: {}", flags.scope);
  auto server = admission::WebhookServer::Start(*options, [served_gates, scope](const admission::HttpRequest& r) {
    return admission::ServeWebhook(r, served_gates, scope);
  });
  if (!server.ok()) return Fail(server.status().message());

  int sig = 0;
  sigwait(&stop_signals, &sig);
  NVDRA_INFO("nvdra-webhook: signal {}, stopping", sig);
  (*server)->Stop();
  return 0;
}
