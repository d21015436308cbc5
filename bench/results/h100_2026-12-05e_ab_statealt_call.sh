# statealt: scripts/ab-kit's call (prepared 2026-12-05 18:37 UTC). Trees (name rev sha):
#   base main 9fcf551
#   a statealt a010a09
# run command "bash .dev/statealt/call.sh", carry [".dev/statealt"], timeout_s 350
python3 scripts/ab-kit call .dev/statealt --op ssd --end 330 --order base,a,a,base,base,a --rows m2-2.7b-b8,nemotron-h --checks a
