#include "util/parse_number.h"

#include <charconv>
#include <limits>
#include <system_error>
#include <type_traits>

namespace nvdra {
namespace {

std::string Quote(std::string_view text) {
  constexpr size_t kMax = 64;  // keep messages readable for huge inputs
  if (text.size() > kMax) return "\"" + std::string(text.substr(0, kMax)) + "...\"";
  return "\"" + std::string(text) + "\"";
}

template <typename T>
const char* TypeName() {
  if constexpr (std::is_floating_point_v<T>) return "a floating-point number";
  if constexpr (std::is_signed_v<T>) {
    return sizeof(T) == 8 ? "a 64-bit integer" : "a 32-bit integer";
  }
  return sizeof(T) == 8 ? "an unsigned 64-bit integer" : "an unsigned 32-bit integer";
}

template <typename T>
Result<T> Parse(std::string_view text, int base) {
  std::string_view digits = text;
  // from_chars takes no '+'; a '+' followed by another sign is refused.
  const bool plus = !digits.empty() && digits.front() == '+';
  if (plus) digits.remove_prefix(1);
  if (digits.empty() || digits.front() == '+' || (digits.front() == '-' && (plus || !std::is_signed_v<T>))) {
    return InvalidArgument(Quote(text) + " is not " + TypeName<T>());
  }
  T value{};
  std::from_chars_result r;
  if constexpr (std::is_floating_point_v<T>) {
    r = std::from_chars(digits.data(), digits.data() + digits.size(), value, std::chars_format::general);
  } else {
    if (base < 2 || base > 36) return InvalidArgument("number base must be 2..36");
    r = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
  }
  if (r.ec == std::errc::result_out_of_range) {
    return InvalidArgument(Quote(text) + " is out of range for " + TypeName<T>());
  }
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) {
    return InvalidArgument(Quote(text) + " is not " + TypeName<T>());
  }
  return value;
}

}  // namespace

Result<int64_t> ParseInt64(std::string_view text, int base) { return Parse<int64_t>(text, base); }
Result<uint64_t> ParseUint64(std::string_view text, int base) { return Parse<uint64_t>(text, base); }
Result<int32_t> ParseInt32(std::string_view text, int base) { return Parse<int32_t>(text, base); }
Result<uint32_t> ParseUint32(std::string_view text, int base) { return Parse<uint32_t>(text, base); }
Result<double> ParseDouble(std::string_view text) { return Parse<double>(text, 10); }

std::string_view TrimSpace(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

}  // namespace nvdra
