# dsa34: scripts/ab-kit's call (prepared 2026-12-02 08:12 UTC). Trees (name rev sha):
#   base main 991d3f1
#   a dsa34 cae8ab9
# run command "bash .dev/dsa34/call.sh", carry [".dev/dsa34"], timeout_s 240
python3 scripts/ab-kit call .dev/dsa34 --op dsa --end 220 --order base,a,a,base --rows S1,S2,C1,Z3cp,A3 --heads 32,64 --trace S2:64,S1:32
