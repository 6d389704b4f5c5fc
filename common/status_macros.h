// Early-return helpers for absl::Status / absl::StatusOr. The Abseil in
// Debian 12 (20220623) predates ABSL_RETURN_IF_ERROR, so we carry our own.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define HABITAT_CONCAT_INNER_(a, b) a##b
#define HABITAT_CONCAT_(a, b) HABITAT_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define HABITAT_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    const ::absl::Status habitat_status_ = (expr);     \
    if (!habitat_status_.ok()) return habitat_status_; \
  } while (false)

// `lhs = value of statusor_expr`, or returns its error status.
#define HABITAT_ASSIGN_OR_RETURN(lhs, statusor_expr) \
  HABITAT_ASSIGN_OR_RETURN_IMPL_(HABITAT_CONCAT_(habitat_statusor_, __LINE__), lhs, statusor_expr)

#define HABITAT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, statusor_expr) \
  auto tmp = (statusor_expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();                \
  lhs = std::move(tmp).value()
