// The ComputeDomain plugin's own periodic upkeep, beside the engine's
// reconciler: the node label is made to match the prepared claims (repaired
// when someone removed it, removed when its last claim went away while the
// API server was unreachable), IMEX daemon directories of ComputeDomains that
// no longer exist are removed, and the node's NVLink clique is re-read so a
// repartitioned fabric is followed (and, with GPU_CLIQUE_LABEL_ENABLED,
// published as the node label nvidia.com/gpu.clique). It also opens the
// ComputeDomain watches while the node has ComputeDomain work and closes
// them once it has had none for a while (DomainWatch).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "computedomain/clique_label.h"
#include "computedomain/domain_directory.h"
#include "computedomain/domain_watch.h"
#include "computedomain/node_label_manager.h"
#include "kube/kube_client.h"
#include "util/mutex.h"
#include "util/periodic_worker.h"
#include "util/status.h"

namespace nvdra::computedomain {

struct DomainMaintenanceOptions {
  std::chrono::milliseconds period{60'000};
  std::string node_name;
  // Reads the node's clique now ("" without one); null: never re-read.
  std::function<Result<std::string>()> read_clique;
  // Called when the clique changed (after the watch follows it).
  std::function<void(const std::string&)> on_clique_change;
  // GPU_CLIQUE_LABEL_ENABLED. Off: the first pass removes a label nvdra
  // set while it was on (kGpuCliqueLabelOwner), and nothing else.
  bool gpu_clique_label = false;
  // Keep the ComputeDomain node label (driver-managed IMEX); host-managed
  // IMEX never sets nor removes it.
  bool repair_node_label = true;
  // Whether the node has ComputeDomain work the watches must follow (claims
  // in the ledger, label holders, daemon directories to clean up). Set: each
  // pass opens the watches while it says so, and closes them once it has
  // not said so, and no lookup came, for `watch_linger`. Null: the watches
  // are left as they are.
  std::function<bool()> busy;
  std::chrono::milliseconds watch_linger{600'000};
  // Run on this group's thread instead of one of its own. Optional; must
  // outlive the maintenance.
  PeriodicGroup* group = nullptr;
};

struct MaintenanceReport {
  Status label;  // what Repair could not fix
  std::vector<std::string> removed_dirs;
  bool clique_changed = false;
  Status clique;                // reading the clique or writing its label
  bool watches_closed = false;  // this pass closed the idle watches
};

class DomainMaintenance {
 public:
  DomainMaintenance(kube::KubeClient& client, DomainWatch& watch, NodeLabelManager& labels,
                    const DomainDirectories& dirs, DomainMaintenanceOptions options);
  ~DomainMaintenance();

  MaintenanceReport RunOnce() EXCLUDES(run_mu_);
  // RunOnce now and then every period.
  void Start();
  void Stop();

 private:
  Status SyncCliqueLabel(const std::string& clique) REQUIRES(run_mu_);
  Status RemoveOwnedCliqueLabel() REQUIRES(run_mu_);

  kube::KubeClient& client_;
  DomainWatch& watch_;
  NodeLabelManager& labels_;
  const DomainDirectories& dirs_;
  DomainMaintenanceOptions options_;

  Mutex run_mu_;                                          // one pass at a time
  std::string clique_label_written_ GUARDED_BY(run_mu_);  // last value written (or checked)
  bool clique_label_known_ GUARDED_BY(run_mu_) = false;
  bool clique_label_owned_ GUARDED_BY(run_mu_) = false;  // the annotation is written (or was removed)

  // Last: it stops before the members its passes use go away.
  PeriodicWorker worker_;
};

}  // namespace nvdra::computedomain
