# slotsig: scripts/ab-kit's call (prepared 2026-12-05 17:02 UTC). Trees (name rev sha):
#   base 075e57c 075e57c
#   a slotsig 8f64606
#   b slotsig3 122a802
# run command "bash .dev/slotsig/call.sh", carry [".dev/slotsig"], timeout_s 350
python3 scripts/ab-kit call .dev/slotsig --op ssd --end 330 --order base,a,b,b,a,base --rows nemotron-h,m2-2.7b,seed --checks a,b
