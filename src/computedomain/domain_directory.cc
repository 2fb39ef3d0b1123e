#include "computedomain/domain_directory.h"

#include <algorithm>
#include <filesystem>

#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::computedomain {

namespace {

// A domain UID names a directory: nothing that could walk out of domains/.
bool IsDomainDirName(const std::string& s) {
  if (s.empty() || s.size() > 128 || s == "." || s == "..") return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

DomainDirectories::DomainDirectories(std::string plugin_dir, std::string template_path)
    : plugin_dir_(std::move(plugin_dir)), template_path_(std::move(template_path)) {}

std::string DomainDirectories::Root() const { return JoinPath(plugin_dir_, "domains"); }

std::string DomainDirectories::Dir(const std::string& domain_uid) const { return JoinPath(Root(), domain_uid); }

Status DomainDirectories::Prepare(const std::string& domain_uid) const {
  if (!IsDomainDirName(domain_uid)) return InvalidArgument("domainID \"" + domain_uid + "\" is not a valid UID");
  std::string dir = Dir(domain_uid);
  NVDRA_RETURN_IF_ERROR(MakeDirectories(dir, 0755).Wrap("create IMEX daemon directory"));
  auto tmpl = ReadFileToString(template_path_);
  if (!tmpl.ok()) {
    return FailedPrecondition("read the IMEX daemon config template " + template_path_ + ": " +
                              tmpl.status().message() +
                              " (the upstream image ships it there; point --compute-domain-daemon-config-template "
                              "at it)");
  }
  std::string dest = JoinPath(dir, kDaemonConfigTemplateName);
  auto existing = ReadFileToString(dest);
  if (existing.ok() && *existing == *tmpl) return Status::Ok();
  return WriteFileAtomically(dest, *tmpl, 0644).Wrap("copy the IMEX daemon config template to " + dest);
}

bool DomainDirectories::HasAny() const {
  auto entries = ListDirectory(Root());
  if (!entries.ok()) return false;
  return std::any_of(entries->begin(), entries->end(), [](const std::string& name) { return IsDomainDirName(name); });
}

std::vector<std::string> DomainDirectories::RemoveGone(
    const std::function<std::optional<bool>(const std::string&)>& exists) const {
  std::vector<std::string> removed;
  auto entries = ListDirectory(Root());
  if (!entries.ok()) return removed;  // no domains/ yet
  for (const auto& name : *entries) {
    if (!IsDomainDirName(name)) continue;
    auto e = exists(name);
    if (!e.has_value() || *e) continue;
    std::error_code ec;
    std::filesystem::remove_all(Dir(name), ec);
    if (ec) {
      NVDRA_WARN("remove the directory of deleted ComputeDomain {}: {}", name, ec.message());
      continue;
    }
    NVDRA_INFO("removed the IMEX daemon directory of ComputeDomain {}: the domain no longer exists", name);
    removed.push_back(name);
  }
  return removed;
}

}  // namespace nvdra::computedomain
