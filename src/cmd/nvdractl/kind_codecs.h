// The device kinds' ledger codecs (ledger/kind_codec.h) by driver name, so
// the ledger commands name held resources and describe claims to the Go
// driver exactly as the plugins do.
#pragma once

#include <string>
#include <vector>

#include "ledger/claim_entry.h"
#include "ledger/kind_codec.h"

namespace nvdra::ctl {

// nullptr for a driver nvdractl has no kind of (its devices hold themselves).
const ledger::KindCodec* CodecForDriver(const std::string& driver);
// The GPU kind's: what the ledger commands assume without --driver.
const ledger::KindCodec& DefaultCodec();
// "gpu.nvidia.com, compute-domain.nvidia.com", for help texts.
std::string KnownDrivers();
// The codec of the first driver with one among the entries' allocation
// results (a ledger belongs to one driver), else DefaultCodec().
const ledger::KindCodec& CodecOfEntries(const std::vector<ledger::ClaimEntry>& entries);

}  // namespace nvdra::ctl
