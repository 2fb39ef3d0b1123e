// The config kinds of every device kind nvdra ships, registered with the
// config decoder in one fixed order (the GPU kind's, then the ComputeDomain
// kind's), so that each program decodes the same kinds and names them alike
// in its errors: the kubelet plugins (a config of the other driver's kind is
// refused by the resolver, as upstream refuses it) and the webhook.
#pragma once

#include "util/status.h"

namespace nvdra {

Status RegisterNvdraConfigKinds();

}  // namespace nvdra
