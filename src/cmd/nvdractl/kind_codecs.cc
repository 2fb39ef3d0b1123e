#include "cmd/nvdractl/kind_codecs.h"

#include "computedomain/compute_domain_checkpoint_codec.h"
#include "gpu/gpu_checkpoint_codec.h"

namespace nvdra::ctl {
namespace {

const gpu::GpuCheckpointCodec kGpu;
const computedomain::ComputeDomainCheckpointCodec kComputeDomain;
const ledger::KindCodec* const kAll[] = {&kGpu, &kComputeDomain};

}  // namespace

const ledger::KindCodec* CodecForDriver(const std::string& driver) {
  for (const auto* c : kAll) {
    if (c->driver_name() == driver) return c;
  }
  return nullptr;
}

const ledger::KindCodec& DefaultCodec() { return kGpu; }

std::string KnownDrivers() {
  std::string out;
  for (const auto* c : kAll) out += (out.empty() ? "" : ", ") + c->driver_name();
  return out;
}

const ledger::KindCodec& CodecOfEntries(const std::vector<ledger::ClaimEntry>& entries) {
  for (const auto& e : entries) {
    for (const auto& a : e.allocation) {
      if (const auto* c = CodecForDriver(a.driver)) return *c;
    }
  }
  return DefaultCodec();
}

}  // namespace nvdra::ctl
