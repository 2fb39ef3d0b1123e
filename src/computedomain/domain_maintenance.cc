#include "computedomain/domain_maintenance.h"

#include "computedomain/fabric_clique.h"
#include "kube/node_labels.h"
#include "util/log.h"

namespace nvdra::computedomain {

DomainMaintenance::DomainMaintenance(kube::KubeClient& client, DomainWatch& watch, NodeLabelManager& labels,
                                     const DomainDirectories& dirs, DomainMaintenanceOptions options)
    : client_(client),
      watch_(watch),
      labels_(labels),
      dirs_(dirs),
      options_(std::move(options)),
      worker_({.period = options_.period,
               .name = "the ComputeDomain maintenance pass",
               .thread_name = "cd-maintenance",
               .group = options_.group},
              [this] {
                RunOnce();
                return Status::Ok();  // problems are logged by the pass; the next one comes a period later
              }) {}

DomainMaintenance::~DomainMaintenance() { Stop(); }

Status DomainMaintenance::SyncCliqueLabel(const std::string& clique) {
  if (clique_label_known_ && clique_label_written_ == clique) return Status::Ok();
  // A label value is at most 63 characters of [A-Za-z0-9._-]; the clique
  // "<uuid>.<id>" fits.
  auto rule = [&](const std::optional<std::string>&) -> Result<std::optional<std::string>> {
    if (clique.empty()) return std::optional<std::string>();
    return std::optional<std::string>(clique);
  };
  const std::string path = "/api/v1/nodes/" + options_.node_name;
  if (!clique.empty() && !clique_label_owned_) {
    // Before the label: a label nvdra wrote always carries the mark.
    nlohmann::json mark = {{"metadata", {{"annotations", {{kGpuCliqueLabelOwner, "true"}}}}}};
    NVDRA_RETURN_IF_ERROR(client_.MergePatchJson(path, mark).status().Wrap("mark the clique label as nvdra's"));
    clique_label_owned_ = true;
  }
  auto r = kube::UpdateNodeLabel(client_, options_.node_name, kGpuCliqueLabel, rule);
  if (!r.ok()) return r.status();
  clique_label_written_ = clique;
  clique_label_known_ = true;
  return Status::Ok();
}

Status DomainMaintenance::RemoveOwnedCliqueLabel() {
  NVDRA_ASSIGN_OR_RETURN(bool removed, computedomain::RemoveOwnedCliqueLabel(client_, options_.node_name));
  if (removed) NVDRA_INFO("removed the {} label nvdra set (GPU_CLIQUE_LABEL_ENABLED is off)", kGpuCliqueLabel);
  return Status::Ok();
}

MaintenanceReport DomainMaintenance::RunOnce() {
  MutexLock run_lock(run_mu_);
  MaintenanceReport rep;
  if (options_.read_clique) {
    auto clique = options_.read_clique();
    if (!clique.ok()) {
      rep.clique = clique.status().Wrap("re-read the NVLink clique");
    } else {
      if (*clique != watch_.clique_id()) {
        NVDRA_INFO("{} (was \"{}\")", CliqueLogLine({*clique, ""}), watch_.clique_id());
        watch_.SetCliqueId(*clique);
        if (options_.on_clique_change) options_.on_clique_change(*clique);
        rep.clique_changed = true;
      }
      if (options_.gpu_clique_label) rep.clique = SyncCliqueLabel(*clique).Wrap("label node with its clique");
    }
  } else if (options_.gpu_clique_label) {
    rep.clique = SyncCliqueLabel(watch_.clique_id()).Wrap("label node with its clique");
  }
  if (!options_.gpu_clique_label && !clique_label_owned_) {
    Status removed = RemoveOwnedCliqueLabel().Wrap("remove the clique label nvdra set");
    clique_label_owned_ = removed.ok();  // once gone, no pass looks again
    if (!removed.ok()) rep.clique = removed;
  }
  const bool busy = options_.busy && options_.busy();
  if (busy) watch_.Activate();
  if (options_.repair_node_label) rep.label = labels_.Repair();
  rep.removed_dirs = dirs_.RemoveGone([this](const std::string& uid) { return watch_.Exists(uid); });
  if (options_.busy && !busy) rep.watches_closed = watch_.DeactivateIfIdle(options_.watch_linger);
  if (!rep.label.ok()) NVDRA_WARN("ComputeDomain node label: {}", rep.label.ToString());
  if (!rep.clique.ok()) NVDRA_WARN("{}", rep.clique.ToString());
  return rep;
}

void DomainMaintenance::Start() { worker_.Start(); }

void DomainMaintenance::Stop() { worker_.Stop(); }

}  // namespace nvdra::computedomain
