// Writes a Trace (trace_model.h) as the protobuf wire format of
// habitat.v1.Trace, by hand: the training machines have no protobuf C++
// library. Field numbers are those of proto/habitat/v1/trace.proto; the
// round-trip test parses the bytes with the generated class.
//
// proto3 rules kept: scalar fields equal to their default are left out
// (except oneof members and `optional` fields, which have presence),
// repeated int64 are packed, submessages that are set are written even when
// empty.
#pragma once

#include <string>

#include "agent/capture/trace_model.h"

namespace habitat {
namespace agent {

std::string SerializeTrace(const Trace& trace);

}  // namespace agent
}  // namespace habitat
