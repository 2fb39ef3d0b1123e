#include "util/blocking_region.h"

namespace nvdra {

namespace {
thread_local BlockingRegion::Pool* thread_pool = nullptr;
}  // namespace

void BlockingRegion::SetThreadPool(Pool* pool) { thread_pool = pool; }

BlockingRegion::BlockingRegion() : pool_(thread_pool) {
  if (pool_ != nullptr) pool_->EnterBlocking();
}

BlockingRegion::~BlockingRegion() {
  if (pool_ != nullptr) pool_->LeaveBlocking();
}

}  // namespace nvdra
