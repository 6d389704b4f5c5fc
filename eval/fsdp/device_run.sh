#!/usr/bin/env bash
# One device call: the three FSDP2 runs of eval/fsdp/README.md on N GPUs of
# one host (the main cases, bf16 at 4x the batch with plain steps traced, the
# --fit batches), each run's results tarred under $OUT.
#   usage (on the device tool): bash eval/fsdp/device_run.sh N FIT_BATCHES
set -o pipefail
n=${1:?number of GPUs}
fit=${2:-}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1
out=${OUT:?set by the device tool}
(cd agent/python && python3 setup.py build_ext --inplace > /tmp/b.log 2>&1) \
  || { tail -20 /tmp/b.log; exit 1; }
run() {  # name budget_s args...
  local name=$1 budget=$2; shift 2
  timeout $((budget + 40)) torchrun --nproc-per-node "$n" eval/fsdp/measure_fsdp.py \
    --out "/tmp/$name" --budget-s "$budget" "$@" 2>&1 | grep -v Warning \
    | tee "$out/log_$name.txt"
  tar czf "$out/$name.tgz" -C /tmp "$name"
}
run main 190
run b4x 110 --batch-multiplier 4 --precisions bf16 --no-large --trace-plain
[ -n "$fit" ] && PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False run fit 120 --fit-batches "$fit"
exit 0
