// The IMEX daemon's directory of a ComputeDomain on this node,
// <plugin dir>/domains/<domain UID>, mounted into the daemon at /imexd. A
// daemon claim's Prepare creates it and puts the daemon config template
// there as imexd.cfg.tmpl (the daemon renders its config from it), as the
// upstream plugin does. Directories of ComputeDomains that no longer exist
// are removed by the reconciler, not by Unprepare: the daemon of a live
// domain may be restarted on this node and find its directory again.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra::computedomain {

// Upstream's image ships the template here; --compute-domain-daemon-config-template.
inline constexpr const char* kDefaultDaemonConfigTemplate = "/templates/compute-domain-daemon-config.tmpl.cfg";
inline constexpr const char* kDaemonConfigTemplateName = "imexd.cfg.tmpl";

class DomainDirectories {
 public:
  DomainDirectories(std::string plugin_dir, std::string template_path);

  std::string Root() const;                              // <plugin dir>/domains
  std::string Dir(const std::string& domain_uid) const;  // <plugin dir>/domains/<uid>

  // mkdir -p (0755) and the template copied in (0644, atomically). Idempotent.
  Status Prepare(const std::string& domain_uid) const;

  // Removes the directories whose domain `exists` says is gone; `exists`
  // returns nullopt when it cannot tell (the watch has not synced), and then
  // nothing is removed. Returns the UIDs removed.
  std::vector<std::string> RemoveGone(const std::function<std::optional<bool>(const std::string&)>& exists) const;

  // Whether any domain's directory is there (RemoveGone has work to follow).
  bool HasAny() const;

  const std::string& template_path() const { return template_path_; }

 private:
  std::string plugin_dir_;
  std::string template_path_;
};

}  // namespace nvdra::computedomain
