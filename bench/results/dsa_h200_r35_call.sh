# r35: scripts/ab-kit's call (prepared 2026-12-02 19:38 UTC). Trees (name rev sha):
#   base main 7e155e7
#   a dsa44 8207e7a
#   b dsa45 12ceb3b
# run command "bash .dev/r35/call.sh", carry [".dev/r35"], timeout_s 350
python3 scripts/ab-kit call .dev/r35 --checks b --op dsa --end 330 --order base,a,b,b,a,base --rows S1,S2,C1,Z3cp,A1,A2,A3 --heads 32,64
