# Sourced by the GPU scripts after they set OUT and BUDGET_S: NVLink multicast off (it is not available on the GPU machines used), the source
# tree on PYTHONPATH, and `step MAX_S command...`, which runs a command with a timeout of
# min(MAX_S, what is left of BUDGET_S), so that one hang cannot eat the whole call.
set -o pipefail
export PYTHONPATH=.:$PYTHONPATH PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s)
step() {
  local max=$1; shift
  local left=$(( BUDGET_S - ($(date +%s) - T0) ))
  (( left < 15 )) && { echo "== skip (budget): $*"; return 0; }
  (( max > left )) && max=$left
  echo "== t=$(( $(date +%s) - T0 ))s (limit ${max}s): $*"
  timeout -k 5 "$max" "$@" || echo "== exit $? : $*"
}
TP="python3 -m tpscope.cli"
