// Kubernetes resource.Quantity ("10Gi", "512Mi", "1.5G", "2e3"), parsed by the
// same grammar as k8s.io/apimachinery/pkg/api/resource so that an MPS memory
// limit accepted by the API server means the same bytes here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace nvdra::config {

class Quantity {
 public:
  Quantity() = default;

  // Parses `text` (surrounding blanks ignored). Errors carry the upstream
  // wording, e.g. "quantities must match the regular expression ...".
  static Result<Quantity> Parse(std::string_view text);

  // The text as the user wrote it (trimmed); rendered back unchanged so a
  // canonical config round-trips byte for byte.
  const std::string& text() const { return text_; }

  // The value rounded up to an integer, like resource.Quantity.Value();
  // saturates at the int64 range instead of wrapping.
  int64_t value() const { return value_; }

  // Upstream's MPS limit form: value()/1024/1024 formatted as "<n>M"; valid
  // only when n > 0.
  std::string Megabytes() const;
  bool HasPositiveMegabytes() const { return value_ / 1024 / 1024 > 0; }

  friend bool operator==(const Quantity&, const Quantity&) = default;

 private:
  std::string text_ = "0";
  int64_t value_ = 0;
};

// The canonical text Kubernetes gives an integer quantity, as
// resource.NewQuantity(n, format).String() does: BinarySI with the largest
// binary suffix that keeps the mantissa an integer ("0", "1Mi", "1536Mi",
// "80Gi"; below 1024 as DecimalSI), DecimalSI with the largest decimal one
// ("4", "1500", "1k", "16G"). Used where a published value must read back
// from the API server byte for byte.
std::string FormatBinarySI(int64_t n);
std::string FormatDecimalSI(int64_t n);

}  // namespace nvdra::config
