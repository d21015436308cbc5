"""Warp-stall samples of dsa_scan per inlined function chain, from ncu's per-instruction page (round 64, docs/dsa.md):
    PYTHONPATH=. python bench/results/h100_2026-12-07_ncu_functions.py MODE [N]   (MODE: fn | outer | line)
Inputs: /tmp/a3.dis (nvdisasm -gi of A3's H = 32 DSA_RFLOOR program compiled with -lineinfo: compile_cubin(...,
options=("-lineinfo",))), /tmp/sass.csv (the call's a3_ncu_sass.csv: 3 launches, instructions in address order). The
line numbers are the compiled text's (_full_text: the defines' lines first); a line's function is the last definition
above it. Per chain: samples, "no instruction" samples, instructions, the most any executed, the first's index."""
import re,csv,collections,sys
from cake_rt.launch.compile import load_source, _full_text
d=dict(DSA_BQ=4,DSA_CAP=4096,DSA_CB=2,DSA_D=128,DSA_H=32,DSA_RFLOOR=1,DSA_TILE=128,DSA_WGMMA=1)
src=_full_text(load_source("dsa/indexer.cu"),d).split("\n")
fstart=[]
pat=re.compile(r'^\s*(?:CAKE_DEVICE|__device__|__global__|extern "C" __global__|static __device__)[^;{=]*?\b(\w+)\s*\(')
for i,l in enumerate(src):
    m=pat.match(l)
    if m and not l.startswith('#'): fstart.append((i+1,m.group(1)))
def fn(line):
    name='?'
    for s,n in fstart:
        if s<=line: name=n
        else: break
    return name
ins=[];cur=None;prev_dir=False
for l in open('/tmp/a3.dis'):
    m=re.match(r'\s*//## File ".*?", line (\d+)(.*)',l)
    if m:
        par=[int(x) for x in re.findall(r'inlined at ".*?", line (\d+)',m.group(2))]
        if prev_dir and cur: cur=cur+par
        else: cur=[int(m.group(1))]+par
        prev_dir=True; continue
    prev_dir=False
    if re.match(r'^\s+/\*[0-9a-f]{4,5}\*/\s+[A-Z@{]',l):
        ins.append((cur,l.split('*/',1)[1].strip()))
kern=[];hdr=None
with open('/tmp/sass.csv') as f:
    for line in csv.reader(f):
        if not line: continue
        if line[0]=="Kernel Name": kern.append([]); continue
        if line[0]=="Address": hdr=line; continue
        kern[-1].append(dict(zip(hdr,line)))
def num(x):
    try: return float(x)
    except: return 0.0
mode=sys.argv[1] if len(sys.argv)>1 else "fn"
agg=collections.defaultdict(lambda:[0,0,0,0,10**9])
for i,(chain,txt) in enumerate(ins):
    s=sum(num(k[i]["Warp Stall Sampling (All Samples)"]) for k in kern)
    ni=sum(num(k[i]["stall_no_inst"]) for k in kern)
    ex=num(kern[0][i]["Instructions Executed"])
    chain=chain or [0]
    if mode=="fn": key=" < ".join(fn(c) for c in chain[:5])
    elif mode=="outer": key=" < ".join(fn(c) for c in chain[-3:])
    else: key=f"{fn(chain[0])}:{chain[0]}  <- "+",".join(str(c) for c in chain[1:4])
    a=agg[key]; a[0]+=s; a[1]+=ni; a[2]+=1; a[3]=max(a[3],ex); a[4]=min(a[4],i)
tot=sum(v[0] for v in agg.values()); tni=sum(v[1] for v in agg.values())
print(f"total samples {int(tot)}, no_inst {int(tni)} ({100*tni/tot:.0f}%) over {len(kern)} launches")
print("samples no_inst #instr maxexec first_instr  key")
for k,v in sorted(agg.items(),key=lambda kv:-kv[1][1])[:int(sys.argv[2]) if len(sys.argv)>2 else 40]:
    print(f"{int(v[0]):6d} {int(v[1]):5d} {v[2]:5d} {int(v[3]):7d} {v[4]:6d}  {k}")
