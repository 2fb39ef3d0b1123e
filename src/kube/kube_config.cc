#include "kube/kube_config.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "util/file_util.h"

namespace nvdra::kube {
namespace {

Result<std::string> Base64Decode(const std::string& in, const std::string& what) {
  static const std::string kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned int acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    auto pos = kChars.find(c);
    if (pos == std::string::npos) return InvalidArgument(what + " is not valid base64");
    acc = (acc << 6) | static_cast<unsigned int>(pos);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string Resolve(const std::filesystem::path& base, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (base / p).string();
}

YAML::Node FindNamed(const YAML::Node& list, const std::string& name) {
  if (list && list.IsSequence()) {
    for (const auto& item : list) {
      if (item["name"] && item["name"].as<std::string>() == name) return item;
    }
  }
  return YAML::Node();
}

std::string Str(const YAML::Node& n, const char* key) { return n && n[key] ? n[key].as<std::string>() : std::string(); }

}  // namespace

std::string RealGetEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? v : "";
}

Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context_name) {
  NVDRA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("kubeconfig " + path + " is not valid YAML: " + e.what());
  }
  try {
    std::string ctx = context_name.empty() ? Str(root, "current-context") : context_name;
    if (ctx.empty()) return InvalidArgument("kubeconfig " + path + " has no current-context");
    YAML::Node context = FindNamed(root["contexts"], ctx)["context"];
    if (!context) return InvalidArgument("kubeconfig " + path + ": context \"" + ctx + "\" not found");
    std::string cluster_name = Str(context, "cluster");
    YAML::Node cluster = FindNamed(root["clusters"], cluster_name)["cluster"];
    if (!cluster) {
      return InvalidArgument("kubeconfig " + path + ": cluster \"" + cluster_name + "\" of context \"" + ctx +
                             "\" not found");
    }
    std::string user_name = Str(context, "user");
    YAML::Node user = FindNamed(root["users"], user_name)["user"];
    if (!user_name.empty() && !user) {
      return InvalidArgument("kubeconfig " + path + ": user \"" + user_name + "\" of context \"" + ctx +
                             "\" not found");
    }
    auto base = std::filesystem::path(path).parent_path();
    KubeConfig c;
    c.server = Str(cluster, "server");
    if (c.server.empty())
      return InvalidArgument("kubeconfig " + path + ": cluster \"" + cluster_name + "\" has no server");
    while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
    if (cluster["insecure-skip-tls-verify"])
      c.insecure_skip_tls_verify = cluster["insecure-skip-tls-verify"].as<bool>();
    if (auto d = Str(cluster, "certificate-authority-data"); !d.empty()) {
      NVDRA_ASSIGN_OR_RETURN(c.ca_pem, Base64Decode(d, "certificate-authority-data"));
    }
    c.ca_file = Resolve(base, Str(cluster, "certificate-authority"));
    if (user) {
      if (auto d = Str(user, "client-certificate-data"); !d.empty()) {
        NVDRA_ASSIGN_OR_RETURN(c.client_cert_pem, Base64Decode(d, "client-certificate-data"));
      }
      if (auto d = Str(user, "client-key-data"); !d.empty()) {
        NVDRA_ASSIGN_OR_RETURN(c.client_key_pem, Base64Decode(d, "client-key-data"));
      }
      c.client_cert_file = Resolve(base, Str(user, "client-certificate"));
      c.client_key_file = Resolve(base, Str(user, "client-key"));
      c.token = Str(user, "token");
      c.token_file = Resolve(base, Str(user, "tokenFile"));
      if (user["exec"] || user["auth-provider"]) {
        return InvalidArgument("kubeconfig " + path + ": user \"" + user_name +
                               "\" uses exec or auth-provider credentials, which are not supported; "
                               "use a token, token file or client certificate");
      }
    }
    bool has_cert = !c.client_cert_pem.empty() || !c.client_cert_file.empty();
    bool has_key = !c.client_key_pem.empty() || !c.client_key_file.empty();
    if (has_cert != has_key) {
      return InvalidArgument("kubeconfig " + path + ": user \"" + user_name +
                             "\" needs both a client certificate and a client key");
    }
    return c;
  } catch (const YAML::Exception& e) {
    return InvalidArgument("kubeconfig " + path + " has an unexpected shape: " + e.what());
  }
}

Result<KubeConfig> LoadInClusterConfig(const GetEnvFn& getenv, const std::string& sa_dir) {
  std::string host = getenv("KUBERNETES_SERVICE_HOST");
  std::string port = getenv("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return FailedPrecondition("no kubeconfig given (--kubeconfig or KUBECONFIG) and not running in a cluster "
                              "(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set)");
  }
  KubeConfig c;
  // IPv6 literals need brackets in a URL.
  c.server = "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
  c.ca_file = sa_dir + "/ca.crt";
  c.token_file = sa_dir + "/token";
  struct stat st;
  if (::stat(c.token_file.c_str(), &st) != 0) {
    return FailedPrecondition("in-cluster config: service-account token " + c.token_file +
                              " does not exist (is automountServiceAccountToken disabled?)");
  }
  if (::stat(c.ca_file.c_str(), &st) != 0) {
    return FailedPrecondition("in-cluster config: service-account CA " + c.ca_file + " does not exist");
  }
  return c;
}

Result<KubeConfig> ResolveKubeConfig(const std::string& flag, const GetEnvFn& getenv, const std::string& sa_dir) {
  if (!flag.empty()) return LoadKubeconfig(flag);
  std::string env = getenv("KUBECONFIG");
  // KUBECONFIG may list several files; like client-go's loader for a single
  // context we use the first one that exists.
  size_t start = 0;
  while (!env.empty() && start <= env.size()) {
    size_t end = env.find(':', start);
    std::string p = env.substr(start, end == std::string::npos ? std::string::npos : end - start);
    struct stat st;
    if (!p.empty() && ::stat(p.c_str(), &st) == 0) return LoadKubeconfig(p);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return LoadInClusterConfig(getenv, sa_dir);
}

Result<std::string> BearerToken::Get() {
  MutexLock l(mu_);
  if (file_.empty()) return token_;
  struct stat st;
  if (::stat(file_.c_str(), &st) != 0) {
    if (!token_.empty()) return token_;  // keep the last good token while the file is swapped
    return Unavailable("cannot read bearer token file " + file_);
  }
  if (st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec || st.st_size != size_) {
    auto text = ReadFileToString(file_);
    if (!text.ok()) {
      if (!token_.empty()) return token_;
      return Unavailable("cannot read bearer token file " + file_ + ": " + text.status().message());
    }
    std::string t = *text;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    token_ = t;
    mtime_ = st.st_mtim;
    size_ = st.st_size;
  }
  return token_;
}

}  // namespace nvdra::kube
