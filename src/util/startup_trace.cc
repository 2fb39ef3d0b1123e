// The function-entry hook of an NVDRA_STARTUP_TRACE build (never part of a
// normal build): every instrumented function, the first time it runs,
// appends its address (8 bytes, native order) to the file that
// NVDRA_STARTUP_TRACE_OUT names, with ".<pid>" added. scripts/startup-order
// turns those addresses into cmake/startup-order.txt, the order in which
// the linker lays out the code that a start and the first claims run.
//
// The hook calls nothing that is itself instrumented: a fixed table of
// atomics (no allocation, no locks) and the C library's open and write.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr uint64_t kSlots = 1u << 20;  // far more functions than a program has
std::atomic<uintptr_t> g_seen[kSlots];
std::atomic<int> g_fd{-1};

__attribute__((no_instrument_function)) int TraceFd() {
  int fd = g_fd.load(std::memory_order_acquire);
  if (fd >= 0 || fd == -2) return fd;
  const char* out = std::getenv("NVDRA_STARTUP_TRACE_OUT");
  int opened = -2;
  if (out != nullptr && *out != '\0') {
    char path[4096];
    std::snprintf(path, sizeof(path), "%s.%d", out, static_cast<int>(::getpid()));
    opened = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (opened < 0) opened = -2;
  }
  int expected = -1;
  if (!g_fd.compare_exchange_strong(expected, opened)) {
    if (opened >= 0) ::close(opened);
    return expected;
  }
  return opened;
}

}  // namespace

extern "C" __attribute__((no_instrument_function)) void __cyg_profile_func_enter(void* fn, void* /*call_site*/) {
  const auto addr = reinterpret_cast<uintptr_t>(fn);
  uint64_t slot = (addr * 0x9E3779B97F4A7C15ull) >> 44;  // the top 20 bits
  for (uint64_t probe = 0; probe < kSlots; ++probe, slot = (slot + 1) & (kSlots - 1)) {
    uintptr_t cur = g_seen[slot].load(std::memory_order_relaxed);
    if (cur == addr) return;
    if (cur == 0) {
      if (g_seen[slot].compare_exchange_strong(cur, addr)) break;
      if (cur == addr) return;
    }
  }
  int fd = TraceFd();
  if (fd >= 0) {
    ssize_t ignored = ::write(fd, &addr, sizeof(addr));
    (void)ignored;
  }
}

extern "C" __attribute__((no_instrument_function)) void __cyg_profile_func_exit(void* /*fn*/, void* /*call_site*/) {}
