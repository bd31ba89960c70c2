#include "broker/resources/store.h"

namespace zn::broker {

std::string_view to_string(StoreError e) {
  switch (e) {
    case StoreError::kNotFound:
      return "not_found";
    case StoreError::kReadOnly:
      return "read_only";
    case StoreError::kQuotaExceeded:
      return "quota_exceeded";
    case StoreError::kTooLarge:
      return "too_large";
    case StoreError::kBadRequest:
      return "bad_request";
    case StoreError::kLimitExceeded:
      return "limit_exceeded";
    case StoreError::kForbidden:
      return "forbidden";
    case StoreError::kInternal:
      return "internal";
  }
  return "internal";
}

}  // namespace zn::broker
