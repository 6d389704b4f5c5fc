// Operator arguments from a cpu_op's "Input Dims" / "Input type" /
// "Concrete Inputs" args (present when the profile had record_shapes=True).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "habitat/v1/trace.pb.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace kineto {

// One Argument per recorded input, named by its position ("0", "1", ...).
//  - "Input type" that is a dtype name ("float", "c10::Half", "long int")
//    is a tensor: shape from "Input Dims", dtype as spelled.
//  - A type that is an IValue tag (capitalised: "Int", "Double", "Scalar",
//    "Bool", "ScalarList", "String", ...) takes its value from "Concrete
//    Inputs": integer, scalar, boolean, integer list or text.
//  - "TensorList" becomes one tensor argument per element, named "i.j",
//    when the trace recorded the element shapes (dtype not recorded: "").
//  - "" (None) or a value the trace did not record becomes `none`.
// Returns an empty list when the event has no shape information; an error
// (naming the event) when the args are present but of the wrong JSON type.
absl::StatusOr<std::vector<habitat::v1::Argument>> ConvertArguments(size_t event_index,
                                                                    const nlohmann::json& event);

}  // namespace kineto
}  // namespace habitat
