# tilebudget3: scripts/ab-kit's call (prepared 2026-12-05 14:49 UTC). Trees (name rev sha):
#   base cf72dff cf72dff
#   a 393b106 393b106
# run command "bash .dev/tilebudget3/call.sh", carry [".dev/tilebudget3"], timeout_s 420
python3 scripts/ab-kit call .dev/tilebudget3 --op ssd --end 400 --order base,a,a,base --rows nemotron-h,m2-2.7b,seed,m2-2.7b-b8 --checks a
