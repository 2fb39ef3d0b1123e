#include "util/uid.h"

#include <string>

namespace nvdra {

static bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool IsValidClaimUid(std::string_view uid) {
  if (uid.empty() || uid.size() > 128) return false;
  if (!IsAlnum(uid.front()) || !IsAlnum(uid.back())) return false;
  for (char c : uid) {
    if (!IsAlnum(c) && c != '-') return false;
  }
  return true;
}

Status ValidateClaimUid(std::string_view uid) {
  if (uid.empty()) return InvalidArgument("claim UID is empty");
  if (IsValidClaimUid(uid)) return Status::Ok();
  std::string shown(uid.substr(0, 80));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return InvalidArgument("claim UID \"" + shown + (uid.size() > 80 ? "..." : "") +
                         "\" is not a valid Kubernetes UID (want letters, digits and '-', at most 128)");
}

bool IsValidObjectName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok) return false;
  }
  return IsAlnum(name.front()) && IsAlnum(name.back());
}

}  // namespace nvdra
