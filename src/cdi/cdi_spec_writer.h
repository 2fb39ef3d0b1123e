// Per-claim ("transient") CDI spec files in the CDI directory:
// <root>/<vendor>-<class>_<claimUID>.json, kind <vendor>/<class>, device names
// <claimUID>-<device>. Files are written atomically (temp file + rename in the
// same directory) so a runtime never reads a partial spec, and byte-stable so
// re-writing on every Prepare (the directory is often tmpfs) is harmless.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cdi/spec.h"
#include "util/status.h"

namespace nvdra::cdi {

// A temp file older than this belongs to no write in flight (a write takes
// milliseconds): a crash between create and rename left it.
inline constexpr std::chrono::seconds kStaleTempFileAge{60};

class CdiSpecWriter {
 public:
  // `vendor` e.g. "k8s.gpu.nvidia.com", `cls` e.g. "claim".
  CdiSpecWriter(std::string root, std::string vendor, std::string cls = "claim");

  const std::string& root() const { return root_; }
  std::string Kind() const { return vendor_ + "/" + cls_; }

  // Creates the CDI directory (0755) when missing. Anything else at that path
  // (a regular file) is renamed to "<root>.not-a-directory-<unix-ms>", with an
  // error in the log, rather than keep every Prepare failing. Then sweeps
  // temp files a crashed write left (SweepStaleTempFiles). Called at start.
  Status EnsureRoot() const;

  // Removes our temp files older than `min_age`; returns how many.
  Result<size_t> SweepStaleTempFiles(std::chrono::seconds min_age = kStaleTempFileAge) const;

  // "<root>/<vendor>-<class>_<uid>.json".
  Result<std::string> ClaimSpecPath(const std::string& claim_uid) const;
  // "<uid>-<device>": the device name inside the claim's spec.
  static std::string ClaimDeviceName(const std::string& claim_uid, const std::string& device_name);
  // "<vendor>/<class>=<uid>-<device>": what the kubelet passes to the runtime.
  std::string DeviceId(const std::string& claim_uid, const std::string& device_name) const;

  // Builds the claim's spec from per-device edits (device names unqualified,
  // e.g. "gpu-0"), sorted by name so the output does not depend on the order
  // of the request. With the claim's name, the spec-level edits also set
  // ClaimRefEnv(uid)=<namespace>/<name>: a spec outlives a lost ledger, and
  // the entry rebuilt from it can then be checked against the API server.
  Spec BuildClaimSpec(const std::string& claim_uid, std::vector<SpecDevice> devices, ContainerEdits common_edits = {},
                      const std::string& claim_namespace = "", const std::string& claim_name = "") const;
  // "NVDRA_CLAIM_<uid with '-' as '_'>": the variable that names the claim
  // in its spec. CDI 0.5.0 readers refuse any field beyond the container
  // edits, so the name travels as an environment variable of its own per
  // claim (a container with several claims gets each).
  static std::string ClaimRefEnv(const std::string& claim_uid);

  // Validates the UID and the spec, renders it and writes it atomically with
  // mode 0644. Skips the write when the file already holds the same bytes.
  Status WriteClaimSpec(const std::string& claim_uid, const Spec& spec) const;

  // Removes the claim's spec (.json, and a .yaml left by the upstream
  // driver); a missing file is success.
  Status RemoveClaimSpec(const std::string& claim_uid) const;

  // For a rollback to the Go driver: rewrites the claim's spec under the Go
  // driver's name and in its format ("<prefix><uid>.yaml", YAML), which its
  // Unprepare removes, and removes ours. The CDI devices keep their names,
  // so containers of the claim start as before. Ok when only the YAML is
  // there (handed over already); NotFound without either.
  Status HandClaimSpecToUpstream(const std::string& claim_uid) const;

  // UIDs of every claim spec of our vendor and class in the directory
  // (sorted, unique), for the reconciler's sweep.
  Result<std::vector<std::string>> ListClaimSpecUids() const;

  // The claim's devices its spec on disk names ("gpu-0" for the CDI device
  // "<uid>-gpu-0"), in file order; for rebuilding lost ledger entries. Our
  // spec (.json) or, without one, the Go driver's (.yaml). A spec that
  // cannot be read or parsed is an error (InvalidArgument when it is not a
  // spec); entries that are not devices of the claim are skipped. NotFound
  // without a spec of either.
  Result<std::vector<std::string>> ClaimSpecDevices(const std::string& claim_uid) const;

  // The same, with the claim's namespace and name when its spec names them
  // (ClaimRefEnv of this UID; empty otherwise: a spec of an older version,
  // of the Go driver, or a copy made under another UID).
  struct ClaimSpecContents {
    std::vector<std::string> devices;
    std::string ns, name;
  };
  Result<ClaimSpecContents> ReadClaimSpec(const std::string& claim_uid) const;
  // What ReadClaimSpec reads out of a spec's text: ours (JSON) or the Go
  // driver's (YAML); `path` names it in errors. InvalidArgument when the
  // text is not a spec; never throws, whatever it holds.
  static Result<ClaimSpecContents> ParseClaimSpec(std::string_view text, bool yaml, const std::string& claim_uid,
                                                  const std::string& path);

  // Removes the claim specs whose UID `is_known` rejects, and temp files a
  // crashed write left behind (any of an unknown claim, those of a known
  // claim once stale); returns the UIDs removed. The caller holds
  // whatever keeps new claims from being prepared meanwhile (the ledger
  // records a claim before its spec is written, so "known" means "in the
  // ledger in any state").
  Result<std::vector<std::string>> SweepOrphanClaimSpecs(
      const std::function<bool(const std::string& claim_uid)>& is_known) const;

 private:
  std::string FilePrefix() const;
  Status EnsureDirectory() const;
  // Whether `name` is a temp file of one of our specs; sets the claim UID.
  bool IsOurTempFile(const std::string& name, std::string* uid) const;

  std::string root_;
  std::string vendor_;
  std::string cls_;
  // Shared by copies: it only remembers the last spec-level edits' text.
  std::shared_ptr<SpecRenderer> renderer_ = std::make_shared<SpecRenderer>();
};

}  // namespace nvdra::cdi
