#include "agent/torch/op_recorder.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

namespace habitat {
namespace agent {

struct RecorderState {
  std::shared_ptr<KernelSource> source;
  OpRecorder::Options options;
  std::atomic<uint64_t> next_id{0};
  std::atomic<uint64_t> failed_pushes{0};
  std::atomic<uint64_t> failed_conversions{0};
  std::atomic<uint64_t> autocast_ops{0};
  std::atomic<int> autocast_dtype{-1};  // c10::ScalarType, -1: none seen
  std::mutex mu;
  std::vector<OpEvent> events;  // guarded by mu
  std::string first_error;      // guarded by mu
};

namespace {

// The recorder currently recording; callbacks copy the shared_ptr so the
// state outlives any op still in flight when recording stops.
std::mutex g_active_mu;
std::shared_ptr<RecorderState> g_active;  // guarded by g_active_mu

// Nesting of recorded ops on this thread (ids), for parent_id.
thread_local std::vector<uint64_t> t_stack;

class OpContext : public at::ObserverContext {
 public:
  std::shared_ptr<RecorderState> state;
  OpEvent event;
  bool pushed = false;
};

// The caching allocator's allocated bytes on `device` now and their peak
// since the last reset; false where there is none to read (no device
// chosen, another allocator, CUDA not initialised). A lock and a copy of
// the device's statistics: about a microsecond, once per top-level range.
bool ReadAllocated(int device, int64_t* current, int64_t* peak) {
  if (device < 0) return false;
  auto* allocator = dynamic_cast<c10::DeviceAllocator*>(c10::GetAllocator(c10::DeviceType::CUDA));
  if (allocator == nullptr || !allocator->initialized()) return false;
  const c10::CachingDeviceAllocator::DeviceStats stats =
      allocator->getDeviceStats(static_cast<c10::DeviceIndex>(device));
  // Entry 0 of a StatArray is the aggregate over the small and large pools.
  *current = stats.allocated_bytes[0].current;
  *peak = stats.allocated_bytes[0].peak;
  return true;
}

void NoteError(RecorderState* s, const std::string& message) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->first_error.empty()) s->first_error = message;
}

// Returns whether the tensor requires grad.
bool TensorArg(const at::Tensor& t, std::string name, Argument* arg) {
  arg->name = std::move(name);
  if (!t.defined()) {
    arg->kind = Argument::Kind::kNone;
    return false;
  }
  arg->kind = Argument::Kind::kTensor;
  // Nested and some sparse tensors have no plain sizes.
  if (!t.is_nested()) {
    const auto sizes = t.sizes();
    arg->tensor.shape.assign(sizes.begin(), sizes.end());
  }
  arg->tensor.dtype = std::string(t.dtype().name());
  return t.requires_grad();
}

// Appends the arguments one IValue input becomes: tensors with shape and
// dtype, lists of tensors element by element ("i.j"), scalars by kind;
// `grads` gets one requires_grad flag per argument appended.
void AppendInput(const c10::IValue& v, size_t index, const OpRecorder::Options& options,
                 std::vector<Argument>* out, std::vector<bool>* grads) {
  const std::string name = std::to_string(index);
  Argument arg;
  arg.name = name;
  bool requires_grad = false;
  if (v.isTensor()) {
    requires_grad = TensorArg(v.toTensor(), name, &arg);
  } else if (v.isDouble()) {
    arg.kind = Argument::Kind::kScalar;
    arg.scalar = v.toDouble();
  } else if (v.isBool()) {
    arg.kind = Argument::Kind::kBoolean;
    arg.boolean = v.toBool();
  } else if (v.isInt()) {
    arg.kind = Argument::Kind::kInteger;
    arg.integer = v.toInt();
  } else if (v.isSymInt()) {
    const c10::SymInt s = v.toSymInt();
    if (auto i = s.maybe_as_int()) {
      arg.kind = Argument::Kind::kInteger;
      arg.integer = *i;
    }
  } else if (v.isString()) {
    arg.kind = Argument::Kind::kText;
    arg.text = v.toStringRef();
  } else if (v.isDevice()) {
    arg.kind = Argument::Kind::kText;
    arg.text = v.toDevice().str();
  } else if (v.isIntList()) {
    const auto list = v.toIntVector();
    if (list.size() <= options.max_list_elements) {
      arg.kind = Argument::Kind::kIntegers;
      arg.integers.assign(list.begin(), list.end());
    }
  } else if (v.isTensorList()) {
    const auto tensors = v.toTensorList();
    if (tensors.size() <= options.max_list_elements &&
        out->size() + tensors.size() <= options.max_arguments) {
      for (size_t j = 0; j < tensors.size(); ++j) {
        Argument e;
        grads->push_back(TensorArg(tensors.get(j), name + "." + std::to_string(j), &e));
        out->push_back(std::move(e));
      }
      return;
    }
  } else if (v.isList()) {
    // e.g. List[Optional[Tensor]] of aten::index: tensors element by element.
    const c10::List<c10::IValue> list = v.toList();
    bool all_tensors = true;
    for (size_t j = 0; j < list.size() && all_tensors; ++j) {
      const c10::IValue e = list.get(j);
      all_tensors = e.isTensor() || e.isNone();
    }
    if (all_tensors && list.size() <= options.max_list_elements &&
        out->size() + list.size() <= options.max_arguments) {
      for (size_t j = 0; j < list.size(); ++j) {
        const c10::IValue e = list.get(j);
        Argument a;
        a.name = name + "." + std::to_string(j);
        grads->push_back(e.isTensor() && TensorArg(e.toTensor(), a.name, &a));
        out->push_back(std::move(a));
      }
      return;
    }
  }
  // Anything else (None, complex, double lists, ...) stays kind kNone.
  grads->push_back(requires_grad);
  out->push_back(std::move(arg));
}

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  std::shared_ptr<RecorderState> state;
  {
    std::lock_guard<std::mutex> lock(g_active_mu);
    state = g_active;
  }
  if (state == nullptr) return nullptr;
  auto ctx = std::make_unique<OpContext>();
  OpEvent& e = ctx->event;
  e.id = ++state->next_id;
  e.parent_id = t_stack.empty() ? 0 : t_stack.back();
  e.thread_id = at::RecordFunction::currentThreadId();
  e.forward_thread_id = fn.forwardThreadId();
  e.sequence_number = fn.seqNr();
  e.is_backward = fn.scope() == at::RecordScope::BACKWARD_FUNCTION;
  try {
    // Inside an autocast-wrapped op its nested calls see autocast excluded,
    // so only top-level forward ops tell whether the step used it.
    if (e.parent_id == 0 && !e.is_backward &&
        at::autocast::is_autocast_enabled(state->options.autocast_device)) {
      ++state->autocast_ops;
      state->autocast_dtype =
          static_cast<int>(at::autocast::get_autocast_dtype(state->options.autocast_device));
    }
    e.name = fn.name();
    if (state->options.record_inputs && fn.needsInputs()) {
      const auto inputs = fn.inputs();
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (e.arguments.size() >= state->options.max_arguments) break;
        AppendInput(inputs[i], i, state->options, &e.arguments, &e.requires_grad);
      }
    }
  } catch (const std::exception& ex) {
    ++state->failed_conversions;
    NoteError(state.get(), std::string("inputs of ") + e.name + ": " + ex.what());
  }
  const Status pushed = state->source->PushExternalId(e.id);
  if (pushed.ok()) {
    ctx->pushed = true;
  } else {
    ++state->failed_pushes;
    NoteError(state.get(), pushed.ToString());
  }
  if (e.parent_id == 0) {
    // Nested ranges' allocations are their top-level range's.
    int64_t peak = 0;
    try {
      if (!ReadAllocated(state->options.memory_device, &e.allocated_bytes_before, &peak)) {
        e.allocated_bytes_before = -1;
      }
    } catch (const std::exception& ex) {
      e.allocated_bytes_before = -1;
      NoteError(state.get(), std::string("allocator statistics: ") + ex.what());
    }
  }
  t_stack.push_back(e.id);
  e.start_ns = state->source->NowNs();
  ctx->state = std::move(state);
  return ctx;
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext* raw) {
  auto* ctx = static_cast<OpContext*>(raw);
  if (ctx == nullptr) return;
  RecorderState* s = ctx->state.get();
  ctx->event.end_ns = s->source->NowNs();
  if (ctx->event.allocated_bytes_before >= 0) {
    try {
      if (!ReadAllocated(s->options.memory_device, &ctx->event.allocated_bytes_after,
                         &ctx->event.peak_allocated_bytes_after)) {
        ctx->event.allocated_bytes_before = -1;
      }
    } catch (const std::exception& ex) {
      ctx->event.allocated_bytes_before = -1;
      NoteError(s, std::string("allocator statistics: ") + ex.what());
    }
  }
  if (ctx->pushed) {
    const Status popped = s->source->PopExternalId();
    if (!popped.ok()) NoteError(s, popped.ToString());
  }
  // Ranges end in LIFO order on a thread; async ones may not, so search.
  for (auto it = t_stack.rbegin(); it != t_stack.rend(); ++it) {
    if (*it == ctx->event.id) {
      t_stack.erase(std::next(it).base());
      break;
    }
  }
  std::lock_guard<std::mutex> lock(s->mu);
  s->events.push_back(std::move(ctx->event));
}

// Registered once per input setting; enabled while a recorder records.
// needsInputs is fixed when a callback is added, so a recorder that wants
// a different setting than the registered callback replaces it (without
// this, a busy-time region without inputs left every later trace without
// argument shapes).
std::mutex g_handle_mu;
at::CallbackHandle g_handle = at::INVALID_CALLBACK_HANDLE;  // g_handle_mu
bool g_handle_needs_inputs = false;                         // g_handle_mu

void EnableCallbacks(bool record_inputs) {
  std::lock_guard<std::mutex> lock(g_handle_mu);
  if (g_handle != at::INVALID_CALLBACK_HANDLE && g_handle_needs_inputs != record_inputs) {
    at::removeCallback(g_handle);
    g_handle = at::INVALID_CALLBACK_HANDLE;
  }
  if (g_handle == at::INVALID_CALLBACK_HANDLE) {
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&OnStart, &OnEnd)
            .needsInputs(record_inputs)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    g_handle_needs_inputs = record_inputs;
    return;
  }
  at::reenableCallback(g_handle);
}

void DisableCallbacks() {
  std::lock_guard<std::mutex> lock(g_handle_mu);
  if (g_handle != at::INVALID_CALLBACK_HANDLE) at::disableCallback(g_handle);
}

}  // namespace

OpRecorder::OpRecorder(std::shared_ptr<KernelSource> source, Options options)
    : state_(std::make_shared<RecorderState>()) {
  state_->source = std::move(source);
  state_->options = options;
}

OpRecorder::~OpRecorder() {
  if (!started_) return;
  std::vector<OpEvent> discarded;
  (void)Stop(&discarded);
}

void OpRecorder::SetMemoryDevice(int device) { state_->options.memory_device = device; }

Status OpRecorder::Start() {
  if (started_) return FailedPreconditionError("op recorder already started");
  if (state_->source == nullptr) {
    return InvalidArgumentError("op recorder has no kernel source");
  }
  {
    std::lock_guard<std::mutex> lock(g_active_mu);
    if (g_active != nullptr) {
      return FailedPreconditionError(
          "another habitat OperationTracker is already tracking in this "
          "process");
    }
    g_active = state_;
  }
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->events.clear();
    state_->first_error.clear();
  }
  state_->failed_pushes = 0;
  state_->failed_conversions = 0;
  state_->autocast_ops = 0;
  state_->autocast_dtype = -1;
  try {
    EnableCallbacks(state_->options.record_inputs);
  } catch (const std::exception& ex) {
    std::lock_guard<std::mutex> lock(g_active_mu);
    g_active = nullptr;
    return InternalError(std::string("adding the RecordFunction callback "
                                     "failed: ") +
                         ex.what());
  }
  started_ = true;
  return Status::Ok();
}

bool OpRecorder::AnyRecording() {
  std::lock_guard<std::mutex> lock(g_active_mu);
  return g_active != nullptr;
}

OpRecorder::AutocastSeen OpRecorder::autocast_seen() const {
  AutocastSeen seen;
  seen.ops = state_->autocast_ops.load();
  const int dtype = state_->autocast_dtype.load();
  if (dtype >= 0) seen.dtype = c10::toString(static_cast<c10::ScalarType>(dtype));
  return seen;
}

Status OpRecorder::Stop(std::vector<OpEvent>* out) {
  if (!started_) return FailedPreconditionError("op recorder not started");
  DisableCallbacks();
  {
    std::lock_guard<std::mutex> lock(g_active_mu);
    g_active = nullptr;
  }
  started_ = false;
  std::lock_guard<std::mutex> lock(state_->mu);
  *out = std::move(state_->events);
  state_->events.clear();
  if (state_->failed_pushes > 0 || state_->failed_conversions > 0) {
    return InternalError(std::to_string(state_->failed_pushes.load()) + " external-id pushes and " +
                         std::to_string(state_->failed_conversions.load()) +
                         " input conversions failed; first: " + state_->first_error);
  }
  return Status::Ok();
}

}  // namespace agent
}  // namespace habitat
