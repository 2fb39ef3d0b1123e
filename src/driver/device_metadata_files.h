// Device metadata files (KEP-5304, the DeviceMetadata feature gate): for
// each request of a prepared claim, a JSON file on the host that describes
// the request's devices, and a CDI spec that bind-mounts it read-only into
// the claim's containers. The layout is upstream's, so consumers written for
// the Go driver read ours:
//
//   host file   <plugin dir>/dra-device-metadata/<ns>_<claim>/<request>/metadata.json
//   CDI spec    <cdi root>/<driver>_metadata_<uid>_<request>.json, kind <driver>/metadata,
//               one device "<uid>_<request>"
//   container   /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json
//               (a claim made from a template: .../resourceclaimtemplates/<pod claim name>/...)
//
// <request> is the base request: a subrequest "req/sub" writes under "req"
// and names "req/sub" inside the file. The file is a stream of the same
// object encoded once per API version (only v1alpha1 today), as Go's
// PrettySerializer writes it. Both files are written atomically (temp file
// + rename). Everything needed to remove them follows from the claim's UID,
// namespace, name and allocation, all of which the ledger records before
// the files are written.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/claim.h"
#include "model/published_device.h"
#include "util/status.h"

namespace nvdra::driver {

// The claim a metadata file describes.
struct MetadataClaim {
  std::string uid, ns, name;
  // The claim's resource.kubernetes.io/pod-claim-name annotation (set on
  // claims made from a ResourceClaimTemplate); nullopt without one.
  std::optional<std::string> pod_claim_name;
};

// One device of a request in the file.
struct MetadataDevice {
  std::string pool, device;
  // ResourceSlice-form attributes; empty: the device carries none.
  std::map<std::string, model::AttributeValue> attributes;
};

// "req" for "req/sub" (upstream's BaseRequestRef).
std::string BaseRequest(const std::string& request);

class DeviceMetadataFiles {
 public:
  // `plugin_dir`: the plugin's data directory (/var/lib/kubelet/plugins/<driver>);
  // `cdi_root`: where claim CDI specs go.
  DeviceMetadataFiles(std::string driver, std::string plugin_dir, std::string cdi_root);

  const std::string& driver() const { return driver_; }
  // "<plugin dir>/dra-device-metadata".
  std::string Root() const;
  std::string ClaimDir(const std::string& ns, const std::string& name) const;
  std::string FilePath(const std::string& ns, const std::string& name, const std::string& base_request) const;
  std::string SpecPath(const std::string& uid, const std::string& base_request) const;
  // Where the file appears inside the claim's containers.
  std::string ContainerPath(const MetadataClaim& claim, const std::string& base_request) const;
  // "<driver>/metadata=<uid>_<request>".
  std::string DeviceId(const std::string& uid, const std::string& base_request) const;
  bool IsDeviceId(const std::string& cdi_device_id) const;

  // The file's bytes for request `request` (with its subrequest, if any):
  // metadata generation 1, one object per API version, each followed by a
  // newline.
  std::string RenderFile(const MetadataClaim& claim, const std::string& request,
                         const std::vector<MetadataDevice>& devices) const;

  // Writes the file, then the CDI spec, for `request`; returns the CDI
  // device id. Files that already hold the same bytes are left alone.
  Result<std::string> Write(const MetadataClaim& claim, const std::string& request,
                            const std::vector<MetadataDevice>& devices) const;

  // Removes the files of claim `uid` for `base_requests`: the CDI specs,
  // and the request directories under <ns>_<name> unless their file names
  // another claim (one of the same name made since). Missing files are
  // success; `name` "" skips the host files (see RemoveAllOf).
  Status Remove(const std::string& uid, const std::string& ns, const std::string& name,
                const std::set<std::string>& base_requests) const;
  // Removes every file of claim `uid` found by listing both directories
  // (an entry that lacks its name or allocation; the orphan sweep).
  Status RemoveAllOf(const std::string& uid) const;

  // The UIDs that own metadata files or specs (and their temp files), for
  // the orphan sweep. A request directory whose file cannot be read names
  // no UID: `stale_unknown` gets its path when it is older than a write in
  // flight could be (a crash between mkdir and rename left it).
  Result<std::set<std::string>> ListUids(std::vector<std::string>* stale_unknown = nullptr) const;
  // Removes a request directory with what it holds, and its claim
  // directory once empty.
  Status RemoveRequestDir(const std::string& request_dir) const;

 private:
  std::string SpecPrefix() const;  // "<driver>_metadata_"
  std::string RenderSpec(const MetadataClaim& claim, const std::string& base_request) const;
  // The UID a metadata file names; "" when it cannot be read.
  std::string FileUid(const std::string& path) const;

  std::string driver_;
  std::string plugin_dir_;
  std::string cdi_root_;
};

}  // namespace nvdra::driver
