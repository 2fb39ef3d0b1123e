// A CDI spec (one file): its kind, devices and spec-level edits; the minimum
// cdiVersion the content needs; validation of names; and the byte-stable JSON
// rendering we write to disk.
//
// Version policy: we never write a version above 0.5.0 and never a field that
// a 0.5.0 reader rejects, because runtimes built with older CDI libraries
// (podman 4.3, containerd 1.7 with an old vendored CDI) refuse newer versions
// and unknown fields outright. The rules follow the CDI library's
// MinimumRequiredVersion: 0.3.0 baseline, 0.4.0 for a mount type, 0.5.0 for a
// device name that does not start with a letter or a device node hostPath.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cdi/container_edits.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::cdi {

inline constexpr const char* kMaxWrittenVersion = "0.5.0";

struct SpecDevice {
  std::string name;  // e.g. "<claimUID>-gpu-0"
  ContainerEdits edits;
  friend bool operator==(const SpecDevice&, const SpecDevice&) = default;
};

struct Spec {
  std::string kind;  // "<vendor>/<class>", e.g. "k8s.gpu.nvidia.com/claim"
  std::vector<SpecDevice> devices;
  ContainerEdits edits;  // spec-level, applied once per container
  // Spec-level edits that many specs share (every GPU claim's spec carries
  // every mount of the driver's files): held, never copied or compared
  // entry by entry. Each of their lists comes before the same list of
  // `edits`. Immutable while held, so the pointer names the content.
  std::shared_ptr<const ContainerEdits> shared_edits;
  // Specs are equal when they write the same: shared edits by content.
  friend bool operator==(const Spec& a, const Spec& b);
};

// The spec-level edits as written: `shared_edits`, then `edits`.
ContainerEdits SpecLevelEdits(const Spec& spec);

// The lowest cdiVersion that can express `spec` ("0.3.0", "0.4.0" or "0.5.0").
std::string MinimumVersion(const Spec& spec);

// Checks what a CDI reader checks (kind "<vendor>/<class>" with names old
// libraries accept, device names, absolute container paths, device-node
// types) and what keeps us at or below 0.5.0. InvalidArgument says which.
Status ValidateSpec(const Spec& spec);

// Vendor: [A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9], at least 2 characters.
// Class: same without '.', because a dotted class needs 0.6.0.
bool IsValidVendorName(const std::string& vendor);
bool IsValidClassName(const std::string& cls);
// Device names: [A-Za-z0-9][A-Za-z0-9_.:-]* ending in a letter or digit.
bool IsValidDeviceName(const std::string& name);

// Deterministic JSON: fixed key order, two-space indent, trailing newline;
// the same Spec always renders to the same bytes. Empty fields are omitted.
std::string RenderJson(const Spec& spec);

// RenderJson for a stream of specs that share their spec-level edits
// (Spec::shared_edits: the driver's files, in every claim's spec): the
// text of the shared entries is rendered once per shared edits and
// spliced in; the rest, which names each claim, is rendered every time.
// The pointer decides whether the text is current, so no spec's edits are
// compared. The bytes are RenderJson's.
class SpecRenderer {
 public:
  std::string Render(const Spec& spec) const EXCLUDES(mu_);

 private:
  // The text of the shared entries of each list of a containerEdits
  // object, written where the list's first item goes.
  struct Fragment {
    std::shared_ptr<const ContainerEdits> edits;  // held: the pointer stays unique
    size_t depth = 0;                             // nesting of the lists' items
    std::string env, device_nodes, hooks, mounts;
  };
  std::shared_ptr<const Fragment> FragmentFor(const std::shared_ptr<const ContainerEdits>& edits, size_t depth) const
      EXCLUDES(mu_);
  mutable Mutex mu_;
  mutable std::shared_ptr<const Fragment> last_ GUARDED_BY(mu_);
};

// The same rendering for one containerEdits object (for diagnostics).
std::string RenderEditsJson(const ContainerEdits& edits);

}  // namespace nvdra::cdi
