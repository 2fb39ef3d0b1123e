#include "config/quantity.h"

#include <limits>

namespace nvdra::config {
namespace {

constexpr char kFormatWrong[] = "quantities must match the regular expression "
                                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr char kSuffixWrong[] = "unable to parse quantity's suffix";

using i128 = __int128;
constexpr i128 kCap = static_cast<i128>(1) << 100;  // far above int64, far below i128 overflow

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

struct Parts {
  bool positive = true;
  std::string_view num, denom, suffix;
};

// Mirrors parseQuantityString in apimachinery, including its leniencies
// ("1.G" and "." are accepted).
Result<Parts> Split(std::string_view str) {
  Parts p;
  size_t pos = 0, end = str.size();
  if (pos < end && (str[0] == '-' || str[0] == '+')) {
    p.positive = str[0] != '-';
    ++pos;
  }
  while (pos < end && str[pos] == '0') ++pos;
  if (pos >= end) {
    p.num = "0";
    return p;
  }
  size_t start = pos;
  while (pos < end && IsDigit(str[pos])) ++pos;
  p.num = str.substr(start, pos - start);
  if (p.num.empty()) p.num = "0";
  if (pos < end && str[pos] == '.') {
    ++pos;
    start = pos;
    while (pos < end && IsDigit(str[pos])) ++pos;
    p.denom = str.substr(start, pos - start);
  }
  size_t suffix_start = pos;
  while (pos < end && std::string_view("eEinumkKMGTP").find(str[pos]) != std::string_view::npos) ++pos;
  if (pos < end && (str[pos] == '-' || str[pos] == '+')) ++pos;
  while (pos < end && IsDigit(str[pos])) ++pos;
  if (pos < end) return InvalidArgument(kFormatWrong);
  p.suffix = str.substr(suffix_start);
  return p;
}

struct Scale {
  int base = 10;  // 10 or 2
  int exponent = 0;
};

Result<Scale> InterpretSuffix(std::string_view s) {
  static constexpr std::pair<std::string_view, Scale> kSuffixes[] = {
      {"", {10, 0}},   {"n", {10, -9}}, {"u", {10, -6}}, {"m", {10, -3}}, {"k", {10, 3}},  {"M", {10, 6}},
      {"G", {10, 9}},  {"T", {10, 12}}, {"P", {10, 15}}, {"E", {10, 18}}, {"Ki", {2, 10}}, {"Mi", {2, 20}},
      {"Gi", {2, 30}}, {"Ti", {2, 40}}, {"Pi", {2, 50}}, {"Ei", {2, 60}},
  };
  for (const auto& [name, scale] : kSuffixes) {
    if (s == name) return scale;
  }
  if (s.size() >= 2 && (s[0] == 'e' || s[0] == 'E')) {
    std::string_view rest = s.substr(1);
    bool neg = false;
    if (rest[0] == '-' || rest[0] == '+') {
      neg = rest[0] == '-';
      rest.remove_prefix(1);
    }
    if (rest.empty() || rest.size() > 6) return InvalidArgument(kSuffixWrong);
    int e = 0;
    for (char c : rest) {
      if (!IsDigit(c)) return InvalidArgument(kSuffixWrong);
      e = e * 10 + (c - '0');
    }
    return Scale{10, neg ? -e : e};
  }
  return InvalidArgument(kSuffixWrong);
}

i128 MulCapped(i128 a, i128 b) {
  if (a == 0 || b == 0) return 0;
  if (a > kCap / b) return kCap;
  return a * b;
}

i128 Pow(int base, int exp) {
  i128 r = 1;
  for (int i = 0; i < exp; ++i) r = MulCapped(r, base);
  return r;
}

}  // namespace

Result<Quantity> Quantity::Parse(std::string_view raw) {
  std::string_view str = Trim(raw);
  if (str.empty()) return InvalidArgument(kFormatWrong);
  NVDRA_ASSIGN_OR_RETURN(Parts parts, Split(str));
  NVDRA_ASSIGN_OR_RETURN(Scale scale, InterpretSuffix(parts.suffix));

  // mantissa = num.denom as an integer, then value = mantissa * scale / 10^len(denom).
  i128 mantissa = 0;
  for (char c : parts.num) mantissa = MulCapped(mantissa, 10) + (c - '0');
  for (char c : parts.denom) mantissa = MulCapped(mantissa, 10) + (c - '0');
  if (mantissa > kCap) mantissa = kCap;
  int decimal_exp = -static_cast<int>(parts.denom.size());
  i128 numerator = mantissa;
  i128 denominator = 1;
  if (scale.base == 2) {
    numerator = MulCapped(numerator, Pow(2, scale.exponent));
  } else {
    decimal_exp += scale.exponent;
  }
  if (decimal_exp >= 0) {
    numerator = MulCapped(numerator, Pow(10, decimal_exp));
  } else if (-decimal_exp > 40) {
    denominator = kCap;  // vanishingly small: rounds up to 1 unless zero
  } else {
    denominator = Pow(10, -decimal_exp);
  }
  // Round up (away from zero for positives, towards zero for negatives), as
  // Quantity.Value() does.
  i128 v = numerator / denominator + (numerator % denominator != 0 ? 1 : 0);
  if (!parts.positive) v = -(numerator / denominator);
  constexpr i128 kMax = std::numeric_limits<int64_t>::max();
  constexpr i128 kMin = std::numeric_limits<int64_t>::min();
  if (v > kMax) v = kMax;
  if (v < kMin) v = kMin;

  Quantity q;
  q.text_ = std::string(str);
  q.value_ = static_cast<int64_t>(v);
  return q;
}

std::string FormatDecimalSI(int64_t n) {
  static constexpr const char* kSuffixes[] = {"", "k", "M", "G", "T", "P", "E"};
  if (n == 0) return "0";
  // Negative values keep their sign; the magnitude is canonicalised alike.
  i128 m = n < 0 ? -static_cast<i128>(n) : static_cast<i128>(n);
  size_t k = 0;
  while (k + 1 < std::size(kSuffixes) && m % 1000 == 0) {
    m /= 1000;
    ++k;
  }
  return (n < 0 ? "-" : "") + std::to_string(static_cast<uint64_t>(m)) + kSuffixes[k];
}

std::string FormatBinarySI(int64_t n) {
  static constexpr const char* kSuffixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (n > -1024 && n < 1024) return FormatDecimalSI(n);
  i128 m = n < 0 ? -static_cast<i128>(n) : static_cast<i128>(n);
  size_t k = 0;
  while (k + 1 < std::size(kSuffixes) && m % 1024 == 0) {
    m /= 1024;
    ++k;
  }
  return (n < 0 ? "-" : "") + std::to_string(static_cast<uint64_t>(m)) + kSuffixes[k];
}

std::string Quantity::Megabytes() const { return std::to_string(value_ / 1024 / 1024) + "M"; }

}  // namespace nvdra::config
