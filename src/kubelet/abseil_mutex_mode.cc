#include "kubelet/abseil_mutex_mode.h"

#include <absl/synchronization/mutex.h>

namespace nvdra::kubelet {

void SetReleaseMutexMode() {
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

}  // namespace nvdra::kubelet
