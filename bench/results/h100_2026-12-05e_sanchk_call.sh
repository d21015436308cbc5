# sanchk: scripts/ab-kit's call (prepared 2026-12-05 18:48 UTC). Trees (name rev sha):
#   base 166c64e 166c64e
#   a main b90ff4e
# run command "bash .dev/sanchk/call.sh", carry [".dev/sanchk"], timeout_s 270
python3 scripts/ab-kit call .dev/sanchk --op ssd --end 250 --order base,a --rows m2-2.7b-b8,short --checks a
