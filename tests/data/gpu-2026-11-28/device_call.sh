#!/bin/bash
# The device call of 2026-11-28 (issues 46 and 47), run from the repository's root on the lent GPU:
#   bash tests/data/gpu-2026-11-28/device_call.sh SECONDS [all|compiled|third|fourth]   (the second call: compiled
#   only; the third, in a later session: the other two models' generation, ncu on the compiled GPT-2 step, CUDA
#   graphs; fourth, not run yet: what issue 46 still needs, ncu on the compiled resnet50 step and `profile
#   --compile reduce-overhead --backend trace`, whose capture trace is joined with the measured step)
# Each step starts only if the time it is expected to take is left, and is cut at what is left; what each step
# made is packed into $OUT as soon as it is done, so a call cut short still brings back the steps before.
set -u
BUDGET=${1:-540}
START=$(date +%s)
HERE=tests/data/gpu-2026-11-28
GPU=${GPU:-h200}  # cpu: to try this script where there is no GPU (with STEP_DEVICE=cpu)
RES=/tmp/res
mkdir -p $RES/traces $RES/compile-logs $RES/ncu
export PYTHONUNBUFFERED=1
NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | tail -1)
export PYTHONPATH=/tmp/site:$PWD:$NCU_PY
# Inductor: the FX-node provenance of each kernel, and each Triton kernel's FLOPs and bytes in its metadata.
export INDUCTOR_PROVENANCE=1 TORCHINDUCTOR_BENCHMARK_KERNEL=1 TORCH_COMPILE_DEBUG_EXTEND=1

left() { echo $((BUDGET - ($(date +%s) - START))); }
log() { echo "[$(($(date +%s) - START)) s] $*" | tee -a $OUT/log.txt; }
pack() { tar -cf $OUT/traces.tar -C $RES traces; tar -cf $OUT/compile-logs.tar -C $RES compile-logs;
         for f in $RES/ncu/*.tar; do [ -e "$f" ] && cp "$f" $OUT/; done; }
# step NAME EXPECTED_SECONDS COMMAND...
step() {
  local name=$1 expected=$2; shift 2
  if [ "$(left)" -lt "$expected" ]; then log "skip $name: $(left) s left, expects $expected"; return; fi
  log "start $name"
  local t0=$(date +%s)
  timeout $(( $(left) - 10 )) bash -c '"$@"' _ "$@" >> $OUT/log.txt 2>&1
  log "end $name rc=$? in $(( $(date +%s) - t0 )) s"
}
profile_trace() {  # NAME SCRIPT-ARGS...: hroofline's trace backend on our script, the trace and compile log kept
  local name=$1; shift
  TORCH_TRACE=/tmp/torch-trace/$name python3 -m hroofline profile --gpu $GPU --backend trace --warmup 3 --steps 1 \
    --store /tmp/store --out-dir /tmp/prof/$name --run $name --script $HERE/compiled_step.py "$@"
  local rc=$?
  if [ ! -f /tmp/prof/$name/trace.json ]; then  # without hroofline: the same step under torch.profiler alone
    mkdir -p /tmp/prof/$name
    TORCH_TRACE=/tmp/torch-trace/$name python3 $HERE/compiled_step.py "$@" --trace /tmp/prof/$name/trace.json
  fi
  [ -f /tmp/prof/$name/trace.json ] && xz -T4 -c /tmp/prof/$name/trace.json > $RES/traces/$name-trace.json.xz
  [ -d /tmp/torch-trace/$name ] && tar -cJf $RES/compile-logs/$name-torch-trace.tar.xz -C /tmp/torch-trace $name
  pack
  return $rc
}
profile_ncu() {  # NAME SCRIPT-ARGS...: hroofline under ncu, every launch of the 4th step
  local name=$1; shift
  python3 -m hroofline profile --gpu $GPU --warmup 3 --steps 1 --no-layers --store /tmp/store --out-dir /tmp/prof/$name \
    --run $name --script $HERE/compiled_step.py "$@"
  local rc=$?
  (cd /tmp/prof && for f in $name/*.ncu-rep; do [ -e "$f" ] && xz -T8 -f "$f"; done; tar -cf $RES/ncu/$name.tar $name)
  pack
  return $rc
}

profile_graphs() {  # NAME ARCH-ARGS...: hroofline's own compiled model replaying CUDA graphs, its capture trace kept
  local name=$1; shift
  python3 -m hroofline profile --gpu $GPU --backend trace --compile reduce-overhead --warmup 3 --steps 1 \
    --store /tmp/store --out-dir /tmp/prof/$name --run $name "$@"
  local rc=$?
  python3 -m hroofline summary $name --store /tmp/store
  for f in trace trace-capture; do
    [ -f /tmp/prof/$name/$f.json ] && xz -T4 -c /tmp/prof/$name/$f.json > $RES/traces/$name-$f.json.xz
  done
  pack
  return $rc
}

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || log "the wheels did not install"
export RES HERE GPU
export -f pack profile_trace profile_ncu profile_graphs

{ date -u; nvidia-smi; ncu --version; python3 -c "import torch, transformers, triton, torchvision; \
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), \
'transformers', transformers.__version__, 'triton', triton.__version__, 'torchvision', torchvision.__version__, \
torch.cuda.get_device_name(), torch.cuda.get_device_properties(0))"; git log -1 --format=%H; } > $OUT/env.txt 2>&1
log "env: $(grep -m1 torch $OUT/env.txt)"

if [ "${2:-all}" = fourth ]; then  # about 6 minutes: ncu profiled the compiled GPT-2 step's 695 kernels in 280 s
  step resnet50-compiled 90 profile_trace resnet50-bf16-compiled resnet50 --compile default
  step resnet50-compiled-ncu 300 profile_ncu resnet50-bf16-compiled-ncu resnet50 --compile default
  step resnet50-graphs 60 profile_graphs resnet50-bf16-reduce-overhead --arch resnet50 --precision amp-bf16
  step gpt2-graphs 60 profile_graphs gpt2-bf16-reduce-overhead --model hf:gpt2 --precision amp-bf16 --batch-size 8 \
    --seq-len 512
  pack
  log "done; $(left) s of the budget left"
  exit 0
fi
if [ "${2:-all}" = third ]; then
  step gpt2-compiled-ncu 270 profile_ncu gpt2-bf16-compiled-ncu hf:gpt2 --compile default
  step generate 80 python3 $HERE/generate_times.py $OUT/generate-times-more.csv 70 gpt2-large tinyllama-1.1b
  step gpt2-graphs 60 profile_trace gpt2-bf16-reduce-overhead hf:gpt2 --compile reduce-overhead
  pack
  log "done; $(left) s of the budget left"
  exit 0
fi
if [ "${2:-all}" = all ]; then
  step resnet50-eager 40 profile_trace resnet50-bf16-eager resnet50
  step gpt2-eager 40 profile_trace gpt2-bf16-eager hf:gpt2
fi
step gpt2-compiled 90 profile_trace gpt2-bf16-compiled hf:gpt2 --compile default
step resnet50-compiled 90 profile_trace resnet50-bf16-compiled resnet50 --compile default
step gpt2-compiled-ncu 60 profile_ncu gpt2-bf16-compiled-ncu hf:gpt2 --compile default
if [ "${2:-all}" = all ]; then
  step generate 60 python3 $HERE/generate_times.py $OUT/generate-times.csv 45
  step resnet50-compiled-ncu 150 profile_ncu resnet50-bf16-compiled-ncu resnet50 --compile default
fi
step gpt2-graphs 60 profile_trace gpt2-bf16-reduce-overhead hf:gpt2 --compile reduce-overhead
step resnet50-graphs 60 profile_trace resnet50-bf16-reduce-overhead resnet50 --compile reduce-overhead
pack
log "done; $(left) s of the budget left"
