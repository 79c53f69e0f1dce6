export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; cd $PWD; python3 - <<'EOF' > $OUT/decode-loop.csv 2>$OUT/loop.err
import time,torch,transformers
from hroofline.collect.models import HF_CONFIGS
transformers.logging.set_verbosity_error()
print("model,batch,prompt_tokens,new_tokens,prefill_s,tpot_s")
for name in ("gpt2","tinyllama-1.1b","gpt2-large"):
    c,_,a=HF_CONFIGS[name]; cfg=getattr(transformers,c)(**a); torch.manual_seed(0)
    with torch.device("cuda"): m=transformers.AutoModelForCausalLM.from_config(cfg,attn_implementation="sdpa")
    m=m.to(torch.bfloat16).eval()
    for b in (1,8,32):
        ids=torch.randint(0,cfg.vocab_size,(b,128),device="cuda")
        def run(n):
            with torch.inference_mode():
                torch.cuda.synchronize(); t0=time.perf_counter()
                o=m(input_ids=ids,use_cache=True); nxt=o.logits[:,-1].argmax(-1,keepdim=True)
                torch.cuda.synchronize(); t1=time.perf_counter()
                for _ in range(n):
                    o=m(input_ids=nxt,past_key_values=o.past_key_values,use_cache=True); nxt=o.logits[:,-1].argmax(-1,keepdim=True)
                torch.cuda.synchronize(); return t1-t0,(time.perf_counter()-t1)/max(n,1)
        run(8); r=[run(127) for _ in range(2)]
        print(f"{name},{b},128,128,{min(x[0] for x in r):.6f},{min(x[1] for x in r):.6f}",flush=True)
    del m; torch.cuda.empty_cache()
EOF
timeout 330 python3 tests/data/gpu-2026-11-28/generate_times.py $OUT/generate-times.csv 250 tinyllama-1.1b gpt2-large > $OUT/generate.log 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt; python3 -c "import torch,transformers;print(torch.__version__,transformers.__version__)" >> $OUT/gpu.txt
