# slotskip: scripts/ab-kit's call (prepared 2026-12-05 17:14 UTC). Trees (name rev sha):
#   base 075e57c 075e57c
#   a slotskip 75579bf
#   b slotskip3 513bca0
# run command "bash .dev/slotskip/call.sh", carry [".dev/slotskip"], timeout_s 350
python3 scripts/ab-kit call .dev/slotskip --op ssd --end 330 --order base,a,b,b,a,base --rows nemotron-h,m2-2.7b,seed --checks a,b
