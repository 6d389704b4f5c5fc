// The CUPTI activity record structs the agent decodes, named once by CUDA
// version. CUPTI adds a numbered struct (CUpti_ActivityKernel10, ...) when a
// record grows, and deprecates the older ones: decoding with a struct of the
// wrong version reads fields at the wrong offsets. Code outside this header
// uses the aliases, so moving to another toolkit is one edit here.
//
// Only the CUDA 13 toolkit's records are listed, the one this agent is built
// and checked with; an older or newer toolkit stops the build here rather
// than decode records with a guessed layout.
#pragma once

#include <cuda.h>
#include <cupti.h>

namespace habitat {
namespace agent {

#if CUDA_VERSION >= 13000 && CUDA_VERSION < 14000
using CuptiKernelRecord = CUpti_ActivityKernel10;
using CuptiMemcpyRecord = CUpti_ActivityMemcpy6;
using CuptiMemsetRecord = CUpti_ActivityMemset4;
#else
#error \
    "agent/cupti knows the CUPTI record versions of CUDA 13 only: add this toolkit's to cupti_records.h"
#endif

// Unversioned in every toolkit the agent supports.
using CuptiApiRecord = CUpti_ActivityAPI;
using CuptiExternalCorrelationRecord = CUpti_ActivityExternalCorrelation;

}  // namespace agent
}  // namespace habitat
